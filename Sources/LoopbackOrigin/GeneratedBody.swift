import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension LoopbackOrigin {
    /// A body of deterministic pseudo-random bytes, made while it is sent instead of held in
    /// memory: byte `i` of the resource is a function of the seed and `i` alone, so a test can
    /// serve a gigabyte, serve any part of it (`offset`), and check a downloaded file against
    /// ``bytes(seed:from:count:)`` or ``firstMismatch(inFileAt:seed:length:)`` later.
    ///
    /// ```swift
    /// origin.route("/big") { _ in .init(generatedLength: 1 << 30, seed: 7) }
    /// // …download it to `path`, then:
    /// #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 7, length: 1 << 30) == nil)
    /// ```
    public struct GeneratedBody: Hashable, Sendable {
        /// Chooses the byte sequence; different seeds give unrelated bytes.
        public var seed: UInt64
        /// The index in the resource of the first byte sent (a range's first byte).
        public var offset: Int64
        /// How many bytes are sent.
        public var length: Int64

        /// Bytes `offset ..< offset + length` of the resource generated from `seed`.
        ///
        /// A negative `offset` or `length` is taken as 0.
        public init(seed: UInt64, offset: Int64 = 0, length: Int64) {
            self.seed = seed
            self.offset = max(0, offset)
            self.length = max(0, length)
        }

        /// The 8 bytes of the resource at `8 * index ..< 8 * index + 8` (little-endian): SplitMix64
        /// of the seed and the index, so every byte depends on its position.
        @inline(__always)
        static func word(_ index: UInt64, seed: UInt64) -> UInt64 {
            var z = seed &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z &>> 31)
        }

        /// Byte `index` of the resource generated from `seed` (0 for a negative index).
        public static func byte(at index: Int64, seed: UInt64) -> UInt8 {
            guard index >= 0 else { return 0 }
            let position = UInt64(index)
            return UInt8(truncatingIfNeeded: word(position &>> 3, seed: seed) &>> ((position & 7) &* 8))
        }

        /// Fills `buffer` with the resource's bytes starting at index `start` (a negative start
        /// is taken as 0).
        public static func fill(_ buffer: UnsafeMutableRawBufferPointer, from start: Int64, seed: UInt64) {
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            let count = buffer.count
            var position = UInt64(max(0, start))
            var written = 0
            // Up to the next multiple of 8 one byte at a time, then whole words, then the tail.
            while written < count, position & 7 != 0 {
                base.storeBytes(
                    of: UInt8(truncatingIfNeeded: word(position &>> 3, seed: seed) &>> ((position & 7) &* 8)),
                    toByteOffset: written, as: UInt8.self)
                written &+= 1
                position &+= 1
            }
            var index = position &>> 3
            while count &- written >= 8 {
                base.storeBytes(of: word(index, seed: seed).littleEndian, toByteOffset: written, as: UInt64.self)
                written &+= 8
                index &+= 1
            }
            position = index &<< 3
            while written < count {
                base.storeBytes(
                    of: UInt8(truncatingIfNeeded: word(position &>> 3, seed: seed) &>> ((position & 7) &* 8)),
                    toByteOffset: written, as: UInt8.self)
                written &+= 1
                position &+= 1
            }
        }

        /// `count` bytes of the resource generated from `seed`, from index `start`. For small
        /// ranges: the bytes are returned in memory.
        public static func bytes(seed: UInt64, from start: Int64 = 0, count: Int) -> [UInt8] {
            // Not `Array(unsafeUninitializedCapacity: 0)`: it writes a count into the storage
            // every empty array shares, a write ThreadSanitizer reports against other threads.
            guard count > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                fill(UnsafeMutableRawBufferPointer(buffer), from: start, seed: seed)
                initialized = count
            }
        }

        /// The bytes this body sends.
        public var bytes: [UInt8] { Self.bytes(seed: seed, from: offset, count: Int(length)) }

        /// Why a file could not be compared with a generated resource.
        public struct FileError: Error, Sendable, CustomStringConvertible {
            /// The file.
            public var path: String
            /// What went wrong, with the system's reason.
            public var reason: String

            /// `cannot compare PATH: REASON`.
            public var description: String { "cannot compare \(path) with the generated bytes: \(reason)" }
        }

        /// Compares the file at `path` with the first `length` bytes of the resource generated
        /// from `seed`, reading it a mebibyte at a time (memory stays small for any size).
        ///
        /// - Returns: `nil` when the file holds exactly those bytes; otherwise the index of the
        ///   first byte that differs (the file's size when it is shorter, `length` when longer).
        /// - Throws: ``FileError`` when the file cannot be opened or read.
        public static func firstMismatch(inFileAt path: String, seed: UInt64, length: Int64) throws(FileError)
            -> Int64?
        {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw FileError(path: path, reason: errnoText()) }
            defer { close(fd) }
            let blockSize = 1 << 20
            let actual = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 8)
            let expected = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 8)
            defer {
                actual.deallocate()
                expected.deallocate()
            }
            var position: Int64 = 0
            while true {
                var filled = 0
                while filled < blockSize {
                    let got = read(fd, actual.baseAddress! + filled, blockSize - filled)
                    if got < 0 {
                        if errno == EINTR { continue }
                        throw FileError(path: path, reason: errnoText())
                    }
                    if got == 0 { break }
                    filled += got
                }
                let wanted = Int(min(Int64(blockSize), max(0, length - position)))
                if filled > wanted {
                    // Longer than the resource: the first extra byte, unless an earlier one differs.
                    if let mismatch = firstDifference(
                        UnsafeRawBufferPointer(rebasing: actual[0..<wanted]), at: position, seed: seed,
                        scratch: expected)
                    {
                        return mismatch
                    }
                    return length
                }
                if let mismatch = firstDifference(
                    UnsafeRawBufferPointer(rebasing: actual[0..<filled]), at: position, seed: seed, scratch: expected)
                {
                    return mismatch
                }
                position += Int64(filled)
                if filled < blockSize { return position == length ? nil : position }
            }
        }

        /// The position of the first of `actual`'s bytes that differs from the resource
        /// generated from `seed`, `actual` standing at `position` in it; `nil` when all match.
        /// `scratch` (at least `actual.count` bytes) receives the expected bytes, so a caller
        /// comparing a stream chunk by chunk allocates it once.
        public static func firstDifference(
            _ actual: UnsafeRawBufferPointer, at position: Int64, seed: UInt64, scratch: UnsafeMutableRawBufferPointer
        ) -> Int64? {
            let count = actual.count
            guard count > 0 else { return nil }
            precondition(scratch.count >= count, "the scratch buffer is smaller than the bytes compared")
            fill(UnsafeMutableRawBufferPointer(rebasing: scratch[0..<count]), from: position, seed: seed)
            guard memcmp(actual.baseAddress!, scratch.baseAddress!, count) != 0 else { return nil }
            var index = 0
            while actual[index] == scratch[index] { index += 1 }
            return position + Int64(index)
        }
    }
}
