@_spi(Fuzzing) import CacheStorageRedis
import FuzzSupport

/// Redis replies (RESP2) as a server could send them: the parser never traps, reads the same
/// whether the bytes come at once or in two pieces, and arrays of bulk strings survive being
/// written as a command and read back.
runFuzzer { data, size in
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    check(bytes, split: bytes.first.map { Int($0) } ?? 0)
    return 0
}

/// Parses `bytes` whole and again fed in two pieces split at `split`: never traps, and both
/// readings agree (the same replies, the same error or the same wait for more). Replies that
/// are arrays of bulk strings are written as commands and read back equal.
func check(_ bytes: [UInt8], split: Int) {
    let whole = readAll(bytes, split: nil)
    let pieces = readAll(bytes, split: min(max(0, split), bytes.count))
    precondition(whole.values == pieces.values && whole.failed == pieces.failed, "split at \(split)")
    for value in whole.values {
        guard case .array(let elements) = value else { continue }
        let arguments = elements.compactMap { element -> [UInt8]? in
            if case .bulk(let argument) = element { return argument }
            return nil
        }
        guard arguments.count == elements.count else { continue }
        var encoded: [UInt8] = []
        RESPEncoder.append(arguments, to: &encoded)
        precondition(readAll(encoded, split: nil).values == [value], "re-encoded array differs")
    }
}

func readAll(_ bytes: [UInt8], split: Int?) -> (values: [RESPValue], failed: Bool) {
    var parser = RESPParser()
    var values: [RESPValue] = []
    let parts = split.map { [Array(bytes[..<$0]), Array(bytes[$0...])] } ?? [bytes]
    do {
        for part in parts {
            part.withUnsafeBytes { parser.feed($0) }
            while let value = try parser.next() { values.append(value) }
        }
    } catch {
        return (values, true)
    }
    return (values, false)
}
