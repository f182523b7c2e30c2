import CacheCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The encrypted block reader under damage, for the fuzz target `FuzzSealedBlocks`: a body of
/// four blocks and a half, sealed for one entry, is cut, reordered, spliced with another entry's
/// blocks, flipped or given another length as the input says, then read whole and by ranges,
/// from memory and through the disk store's file reader. Nothing may trap, and whatever reads must be the
/// original plaintext: any other outcome is a miss.
@_spi(Fuzzing) public enum SealedBodyFuzzing {
    private static let sealing = BodySealing(key: SymmetricKey(bytes: Array(repeating: 0x5A, count: 32))!)
    private static let size = Int64(4 * BodySealing.blockSize + BodySealing.blockSize / 2)
    private static let plaintext = (0..<Int(size)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 16) }
    private static let owner = Array("0123456789abcdef0123456789abcdef".utf8)
    private static let otherOwner = Array("fedcba9876543210fedcba9876543210".utf8)
    private static let sealed = BlockSealer.seal(plaintext, sealing, owner: owner)
    private static let other = BlockSealer.seal(plaintext, sealing, owner: otherOwner)
    private static let blockOnDisk = BodySealing.blockSize + BodySealing.overhead
    private static let file: (descriptor: Int32, path: String) = {
        let path = "/tmp/fuzz-sealed-\(getpid())"
        let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        precondition(descriptor >= 0, "cannot create \(path)")
        unlink(path)
        return (descriptor, path)
    }()

    /// Runs one input: its bytes, two at a time, are edits, and then ranges to read.
    public static func run(_ input: [UInt8]) {
        var bytes = sealed
        var claimed = size
        var index = 0
        func next() -> Int {
            defer { index += 1 }
            return index < input.count ? Int(input[index]) : 0
        }
        while index + 1 < input.count {
            let operation = next()
            let argument = next()
            // The whole blocks there are now, and the byte range of block `block` within them.
            let whole = bytes.count / blockOnDisk
            func range(_ block: Int) -> Range<Int> { (block * blockOnDisk)..<((block + 1) * blockOnDisk) }
            switch operation % 8 {
            case 0:  // truncate
                bytes.removeLast(min(bytes.count, argument * 97))
            case 1:  // swap two blocks
                guard whole >= 2 else { continue }
                let (first, second) = (range(argument % whole), range((argument / 16) % whole))
                let moved = Array(bytes[first])
                bytes.replaceSubrange(first, with: Array(bytes[second]))
                bytes.replaceSubrange(second, with: moved)
            case 2:  // a block replayed from another entry, in the same place
                guard whole >= 1 else { continue }
                let block = range(argument % whole)
                guard block.upperBound <= other.count else { continue }
                bytes.replaceSubrange(block, with: other[block])
            case 3:  // flip a bit
                guard !bytes.isEmpty else { continue }
                let offset = (argument << 8 | next()) * 131 % bytes.count
                bytes[offset] ^= UInt8(1 << (argument % 8))
            case 4:  // claim another length
                claimed = max(0, size + Int64(argument - 128) * 211)
            case 5:  // drop a whole block
                guard whole >= 1 else { continue }
                bytes.removeSubrange(range(argument % whole))
            case 6:  // a block repeated after itself
                guard whole >= 1 else { continue }
                let block = range(argument % whole)
                bytes.insert(contentsOf: Array(bytes[block]), at: block.upperBound)
            default:  // garbage appended
                bytes += Array(repeating: UInt8(argument), count: argument % 40)
            }
        }
        let intact = bytes == sealed && claimed == size
        if let whole = sealing.openAll(bytes, size: claimed, owner: owner) {
            precondition(whole == plaintext, "a damaged body opened to other bytes")
        } else {
            precondition(!intact, "the intact body did not open")
        }
        // Through the file reader, by ranges the input picks.
        let descriptor = file.descriptor
        precondition(ftruncate(descriptor, 0) == 0)
        precondition(bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == bytes.count)
        let body = FileBody(
            descriptor: dup(descriptor), path: file.path, size: claimed, blocks: .sealed(sealing, owner: owner)
        ) { StorageError(.corrupted, $0) }
        for _ in 0..<3 {
            let lower = Int64(next() << 8 | next()) * 7 % max(1, claimed)
            let upper = lower + Int64(next() << 10 | next())
            do {
                let read = try body.read(lower...upper)
                let end = Int(min(upper, claimed - 1))
                precondition(
                    read.isEmpty || (end < plaintext.count && read[...] == plaintext[Int(lower)...end]),
                    "a range read other bytes")
            } catch {
                precondition(!intact, "a range of the intact body did not read")
            }
        }
    }
}
