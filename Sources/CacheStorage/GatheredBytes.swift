/// Bytes gathered from the chunks of a body being written. A first chunk is kept as it is, its
/// storage shared with the caller's array, so that a body that comes in one chunk is not
/// copied. Before anything is added to it, it is copied into storage of its own.
///
/// Adding in place (`+=`) to the shared storage is safe once the caller's array is gone: the
/// runtime's reference count orders the last reads of the thread that sent that array to a
/// client before the write. But ThreadSanitizer does not see the runtime's atomics and reported
/// each such write as a race, hiding the real ones `scripts/tsan` is for.
package struct GatheredBytes {
    package private(set) var bytes: [UInt8] = []
    /// Whether `bytes` is a chunk as it was given, its storage shared with the caller's array.
    private var isShared = false

    package init() {}

    package var count: Int { bytes.count }
    package var isEmpty: Bool { bytes.isEmpty }

    package mutating func append(_ chunk: [UInt8]) {
        guard !bytes.isEmpty else {
            bytes = chunk
            isShared = true
            return
        }
        ownStorage(adding: chunk.count)
        bytes += chunk
    }

    mutating func append(_ part: ArraySlice<UInt8>) {
        ownStorage(adding: part.count)
        bytes += part
    }

    /// Empties it, keeping the storage when it is its own.
    mutating func removeAll() {
        if isShared {
            bytes = []
            isShared = false
        } else {
            bytes.removeAll(keepingCapacity: true)
        }
    }

    private mutating func ownStorage(adding count: Int) {
        guard isShared else { return }
        bytes = [UInt8](copying: bytes, capacity: bytes.count + count)
        isShared = false
    }
}

extension [UInt8] {
    /// `bytes` in a new allocation for at least `capacity` bytes, shared with no other array.
    init(copying bytes: [UInt8], capacity: Int) {
        let capacity = Swift.max(capacity, bytes.count)
        // Not `Array(unsafeUninitializedCapacity: 0)`: it writes a count into the storage every
        // empty array shares, a write ThreadSanitizer reports against other threads' reads.
        guard capacity > 0 else {
            self = []
            return
        }
        self.init(unsafeUninitializedCapacity: capacity) { buffer, initialized in
            initialized = bytes.withUnsafeBufferPointer { buffer.initialize(fromContentsOf: $0) }
        }
    }
}
