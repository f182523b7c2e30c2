import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One fuzz input: raw bytes from libFuzzer.
public typealias FuzzTest = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ test: FuzzTest
) -> CInt

/// Hands the process to libFuzzer with `test` as the target; libFuzzer's flags
/// (`-runs=N`, corpus folders) come from the command line.
///
/// SwiftPM gives every executable a `main` of its own, so the targets call libFuzzer's
/// driver from it instead of linking libFuzzer's `main`.
public func runFuzzer(_ test: FuzzTest) -> Never {
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, test))
}

/// The input as text, with invalid UTF-8 repaired, as a field value arrives after decoding.
public func fuzzText(_ data: UnsafePointer<UInt8>?, _ size: Int) -> String {
    guard let data else { return "" }
    return String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
}

/// The input as bytes.
public func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Header fields from text: one `name: value` per line; a line without a colon is a name
/// with an empty value.
public func fuzzFields(_ text: Substring) -> HeaderFields {
    var fields = HeaderFields()
    for line in text.split(separator: "\n") {
        let pieces = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        fields.append(name: String(pieces[0]), value: pieces.count > 1 ? String(pieces[1]) : "")
    }
    return fields
}

/// Where the pieces of `count` bytes end, as a socket may deliver them: `choice` 0 is one byte
/// at a time, 1–127 pieces of 1 to 16 bytes, 128–255 pieces of up to 8 to 1,024 bytes; sizes
/// vary with the choice.
public func pieceEnds(_ count: Int, choice: UInt8) -> [Int] {
    let largest = choice < 0x80 ? Int(choice & 0x0F) + 1 : 8 << (choice & 0x07)
    var state = UInt32(choice) &* 2_654_435_761 | 1
    var ends: [Int] = []
    var end = 0
    while end < count {
        state = state &* 1_664_525 &+ 1_013_904_223
        end = min(count, end + (choice == 0 ? 1 : 1 + Int(state >> 16) % largest))
        ends.append(end)
    }
    return ends
}
