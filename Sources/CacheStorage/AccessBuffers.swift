import CacheSystem
import Foundation

/// Accesses recorded and not yet applied (to a ``MemoryStore``'s recency list, to a
/// ``DiskStore``'s buffered access times), in buffers chosen by the recording thread, each under
/// a lock of its own: two threads recording hits at once (a caching proxy's event loops) rarely
/// meet on one, and neither waits for the store's lock.
final class AccessBuffers: Sendable {
    struct Access {
        var id: EntryID
        var time: Double
    }

    /// Accesses a buffer holds before they are applied.
    static let batch = 64
    private let buffers = (0..<8).map { _ in Locked<[Access]>([]) }

    /// Adds `access` to the calling thread's buffer; returns the buffer's accesses, taken out,
    /// when it is full.
    func add(_ access: Access) -> [Access]? {
        buffers[Self.threadIndex % buffers.count].withLock { buffer -> [Access]? in
            buffer.append(access)
            guard buffer.count >= Self.batch else { return nil }
            defer { buffer.removeAll(keepingCapacity: true) }
            return buffer
        }
    }

    /// Every buffer's accesses, taken out.
    func drain() -> [Access] {
        var all: [Access] = []
        for buffer in buffers {
            buffer.withLock { buffer in
                guard !buffer.isEmpty else { return }
                all += buffer
                buffer.removeAll(keepingCapacity: true)
            }
        }
        return all
    }

    /// A number for the calling thread, stable while it lives: its thread control block's address,
    /// hashed (Fibonacci hashing, the top bits of the product), so that the choice of buffer does
    /// not hang on how far apart the threads' stacks were mapped.
    private static var threadIndex: Int {
        #if canImport(Darwin)
        let address = UInt(bitPattern: pthread_self())
        #else
        let address = UInt(pthread_self())
        #endif
        return Int(truncatingIfNeeded: (UInt64(address) &* 0x9E37_79B9_7F4A_7C15) >> 32)
    }
}
