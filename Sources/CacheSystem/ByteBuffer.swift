#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte buffers straight from `malloc`, given back with ``free(_:)``: for the buffers made and
/// given back on every request (a client connection's input and output, an origin exchange's
/// reads). The standard library's `allocate` takes the Swift runtime's aligned path on Linux even
/// for bytes (`posix_memalign`: about 300 instructions a call against `malloc`'s 60, two a proxy
/// hit; callgrind, 2026-12-06).
package enum ByteBuffer {
    /// `count` uninitialized bytes (at least one). Memory exhausted traps, as `allocate` does.
    package static func allocate(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        guard let raw = malloc(Swift.max(count, 1)) else { fatalError("out of memory allocating \(count) bytes") }
        return raw.bindMemory(to: UInt8.self, capacity: count)
    }

    /// ``allocate(_:)`` as a raw buffer of `count` bytes.
    package static func allocateRaw(_ count: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: allocate(count), count: count)
    }

    /// Gives back what ``allocate(_:)`` or ``allocateRaw(_:)`` returned; nothing for `nil`.
    package static func free(_ pointer: UnsafeMutableRawPointer?) {
        #if canImport(Glibc)
        Glibc.free(pointer)
        #elseif canImport(Darwin)
        Darwin.free(pointer)
        #endif
    }
}
