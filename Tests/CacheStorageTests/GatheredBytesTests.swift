import Testing

@testable import CacheStorage

// A body's chunks gathered by its writers: a lone chunk is kept as given (no copy), and
// nothing is ever added into storage shared with the caller's array (ThreadSanitizer cannot
// see what orders such a write after another thread's reads).
@Suite("GatheredBytes: a lone chunk kept as given, storage of its own before more is added")
struct GatheredBytesTests {
    private static func address(_ bytes: [UInt8]) -> UnsafeRawPointer? {
        bytes.withUnsafeBytes { $0.baseAddress }
    }

    @Test("The first chunk is kept without a copy; the bytes are the chunks in order")
    func firstChunkShared() {
        var chunk: [UInt8] = Array(repeating: 7, count: 100)
        chunk.reserveCapacity(4096)  // room to add in place, as a read buffer has
        var gathered = GatheredBytes()
        gathered.append(chunk)
        #expect(Self.address(gathered.bytes) == Self.address(chunk))
        gathered.append([1, 2, 3])
        gathered.append(chunk[0..<2])
        #expect(gathered.bytes == chunk + [1, 2, 3, 7, 7])
        #expect(gathered.count == 105)
    }

    @Test("Adding to a kept chunk copies it first, even when its storage has room and nothing else holds it")
    func addedIntoStorageOfItsOwn() {
        var gathered = GatheredBytes()
        var sharedAddress: UnsafeRawPointer?
        do {
            var chunk: [UInt8] = Array(repeating: 1, count: 10)
            chunk.reserveCapacity(4096)
            gathered.append(chunk)
            sharedAddress = Self.address(chunk)
        }
        // The caller's array is gone: `+=` would find the storage unique and add in place.
        gathered.append([2])
        #expect(Self.address(gathered.bytes) != sharedAddress)
        #expect(gathered.bytes == Array(repeating: 1, count: 10) + [2])
    }

    @Test("removeAll empties a kept chunk without touching it, and keeps storage of its own")
    func removeAll() {
        let chunk: [UInt8] = [1, 2, 3]
        var gathered = GatheredBytes()
        gathered.append(chunk)
        gathered.removeAll()
        #expect(gathered.isEmpty && chunk == [1, 2, 3])
        gathered.append(chunk[0..<2])
        gathered.append(chunk[2..<3])
        let own = Self.address(gathered.bytes)
        gathered.removeAll()
        gathered.append(chunk[0..<1])
        #expect(Self.address(gathered.bytes) == own)
    }

    @Test("A copy has the bytes and at least the capacity asked for; none of nothing is the empty array")
    func copying() {
        let bytes: [UInt8] = [9, 8, 7]
        let copy = [UInt8](copying: bytes, capacity: 64)
        #expect(copy == bytes && copy.capacity >= 64 && Self.address(copy) != Self.address(bytes))
        #expect([UInt8](copying: bytes, capacity: 0) == bytes)
        #expect([UInt8](copying: [], capacity: 0).isEmpty)
    }
}
