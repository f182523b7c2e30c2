#if os(Linux)
// Bytes waiting to be sent to one client, in order: small pieces (heads, small bodies, chunk
// framing) copied into one owned buffer, large bodies kept as the arrays they came in.
// Flushed with sendmsg, several pieces per call.
import CEpollHTTPCache
import CacheSemantics
import CacheSystem
import Glibc

struct OutputQueue {
    /// Bodies up to this size are copied next to their head so that both leave in one piece.
    static let copyThreshold = 4 * 1024
    private static let initialCapacity = 4096
    private static let maxIOVectors = 64

    private struct Segment {
        /// Bytes still to send in this segment.
        var count: Int
        /// `nil`: the next `count` bytes of the owned buffer.
        var array: [UInt8]?
        var offset: Int
        /// Whether the bytes count against the back-pressure limit of writes from other threads.
        var accounted: Bool
    }

    private var buffer: UnsafeMutablePointer<UInt8>?
    private var capacity = 0
    private var readIndex = 0
    private var writeIndex = 0
    /// Segments in order, then `trailingOwned` owned bytes after the last of them (kept out of
    /// the array so that heads and small bodies cost no array operations).
    private var segments: [Segment] = []
    private var firstSegment = 0
    private var trailingOwned = 0
    /// All bytes waiting, `sealed` included.
    private(set) var count = 0
    /// Bytes of this queue already through TLS and waiting in the connection's gathered records
    /// (the socket was full): counted in `count`, so that the queue is not empty while they wait.
    private(set) var sealed = 0

    /// Whether the buffer stays when everything has been sent: set while more output is sure to
    /// follow (an HTTP/2 session with open streams), so that a busy connection grows its buffer
    /// once instead of allocating, faulting in and giving back a fresh one for every flush.
    /// Cleared, it gives back an empty queue's buffer at once.
    var keepsBuffer = false {
        didSet {
            if !keepsBuffer && count == 0 && buffer != nil { release() }
        }
    }

    var isEmpty: Bool { count == 0 }
    /// Whether it holds a buffer now (an idle connection's queue holds none).
    var holdsBuffer: Bool { buffer != nil }

    /// Records the bytes waiting in the TLS connection, sent or not since the last call.
    mutating func setSealed(_ bytes: Int) {
        count += bytes - sealed
        sealed = bytes
    }

    mutating func release() {
        sealed = 0
        ByteBuffer.free(buffer)
        buffer = nil
        capacity = 0
        readIndex = 0
        writeIndex = 0
        segments = []
        firstSegment = 0
        trailingOwned = 0
        count = 0
    }

    /// Room for `count` more owned bytes at the returned pointer; ``commit(_:)`` what was written.
    @inline(__always)
    mutating func reserve(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        if let buffer, capacity - writeIndex >= count { return buffer + writeIndex }
        makeRoom(count)
        return buffer! + writeIndex
    }

    @inline(never)
    private mutating func makeRoom(_ count: Int) {
        let live = writeIndex - readIndex
        if readIndex > 0 && capacity - live >= count && live <= capacity / 2 {
            if live > 0 { memmove(buffer!, buffer! + readIndex, live) }
        } else {
            var newCapacity = max(capacity * 2, Self.initialCapacity)
            while newCapacity - live < count { newCapacity *= 2 }
            let newBuffer = ByteBuffer.allocate(newCapacity)
            if live > 0 { newBuffer.update(from: buffer! + readIndex, count: live) }
            ByteBuffer.free(buffer)
            buffer = newBuffer
            capacity = newCapacity
        }
        readIndex = 0
        writeIndex = live
    }

    /// Queues `written` bytes put at the pointer ``reserve(_:)`` returned.
    @inline(__always)
    mutating func commit(_ written: Int) {
        guard written > 0 else { return }
        writeIndex += written
        count += written
        trailingOwned += written
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let destination = reserve(bytes.count)
        memcpy(destination, base, bytes.count)
        commit(bytes.count)
    }

    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func append(_ text: String) {
        ASCII.withUTF8(text) { append(UnsafeRawBufferPointer($0)) }
    }

    /// Queues `bytes`: copied when small, kept as the array when large.
    mutating func append(_ bytes: [UInt8], accounted: Bool) {
        guard !bytes.isEmpty else { return }
        if bytes.count <= Self.copyThreshold && !accounted {
            bytes.withUnsafeBytes { append($0) }
            return
        }
        closeTrailingOwned()
        segments.append(Segment(count: bytes.count, array: bytes, offset: 0, accounted: accounted))
        count += bytes.count
    }

    /// The queued bytes, all of them owned (no array appended by reference), and the queue
    /// emptied.
    mutating func takeOwnedBytes() -> [UInt8] {
        precondition(segments.isEmpty, "takeOwnedBytes on a queue holding arrays")
        let bytes =
            buffer.map { Array(UnsafeBufferPointer(start: $0 + readIndex, count: writeIndex - readIndex)) } ?? []
        release()
        return bytes
    }

    /// Appends `value` in decimal.
    mutating func appendDecimal(_ value: Int64) {
        let destination = reserve(20)
        var digits = value < 0 ? 0 : value
        var length = 0
        repeat {
            length += 1
            digits /= 10
        } while digits > 0
        digits = value < 0 ? 0 : value
        // Last digit first, counting down by hand: a debug build iterates `stride` in the
        // standard library's unspecialized code, a type-metadata lookup per step, and under
        // ThreadSanitizer each is a process-wide lock (this writes responses' Content-Length).
        var index = length
        while index > 0 {
            index -= 1
            destination[index] = UInt8(truncatingIfNeeded: 0x30 + digits % 10)
            digits /= 10
        }
        commit(length)
    }

    /// Appends `value` in lower-case hex (a chunk size).
    mutating func appendHex(_ value: Int) {
        let destination = reserve(16)
        var length = 0
        var rest = value
        repeat {
            length += 1
            rest >>= 4
        } while rest > 0
        rest = value
        let digits: StaticString = "0123456789abcdef"
        // Counting down by hand, as in appendDecimal (here for every chunk).
        var index = length
        while index > 0 {
            index -= 1
            destination[index] = digits.utf8Start[rest & 15]
            rest >>= 4
        }
        commit(length)
    }

    enum FlushResult {
        /// Everything was sent.
        case done
        /// The socket's buffer is full; wait for EPOLLOUT.
        case blocked
        /// The connection is broken (`errno` kept).
        case failed(Int32)
    }

    private mutating func closeTrailingOwned() {
        if trailingOwned > 0 {
            segments.append(Segment(count: trailingOwned, array: nil, offset: 0, accounted: false))
            trailingOwned = 0
        }
    }

    /// Sends as much as the socket takes. `accountedSent` grows by the accounted bytes that left.
    mutating func flush(_ fd: Int32, _ vectors: UnsafeMutablePointer<iovec>, accountedSent: inout Int) -> FlushResult {
        while count > 0 {
            var used = 0
            var ownedOffset = readIndex
            var index = firstSegment
            var attempted = 0
            // Owned bytes up to the next array segment (or the end, trailing bytes included).
            func addOwnedRun() {
                while index < segments.count && segments[index].array == nil && used < Self.maxIOVectors {
                    vectors[used] = iovec(
                        iov_base: UnsafeMutableRawPointer(buffer! + ownedOffset), iov_len: segments[index].count)
                    ownedOffset += segments[index].count
                    attempted += segments[index].count
                    used += 1
                    index += 1
                }
                if index == segments.count && trailingOwned > 0 && used < Self.maxIOVectors {
                    vectors[used] = iovec(
                        iov_base: UnsafeMutableRawPointer(buffer! + ownedOffset), iov_len: trailingOwned)
                    attempted += trailingOwned
                    used += 1
                }
            }
            addOwnedRun()
            let sent: Int
            if index < segments.count && used < Self.maxIOVectors, let array = segments[index].array {
                // One array per call: its pointer is valid only inside withUnsafeBytes.
                let offset = segments[index].offset
                let arrayCount = segments[index].count
                sent = array.withUnsafeBytes { raw -> Int in
                    vectors[used] = iovec(
                        iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + offset), iov_len: arrayCount)
                    attempted += arrayCount
                    used += 1
                    index += 1
                    addOwnedRun()
                    return Self.send(fd, vectors, used)
                }
            } else {
                sent = Self.send(fd, vectors, used)
            }
            if sent < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { return .blocked }
                return .failed(code)
            }
            consume(sent, accountedSent: &accountedSent)
            if sent < attempted { return .blocked }
        }
        return .done
    }

    /// What a writer of one piece did with it.
    enum PieceResult {
        /// Took this many bytes (at least one).
        case wrote(Int)
        /// Took nothing now; the same bytes go again later.
        case blocked
        /// The connection is broken (`errno`).
        case failed(Int32)
    }

    /// Sends as much as `write` takes, one contiguous piece at a time: a run of owned bytes or
    /// one large body (TLS, where each piece becomes records, rather than `sendmsg`). A piece
    /// offered again after ``PieceResult/blocked`` starts at the same byte and is no shorter.
    mutating func flush(
        accountedSent: inout Int, through write: (UnsafeRawBufferPointer) -> PieceResult
    ) -> FlushResult {
        while count > sealed {
            let result: PieceResult
            if firstSegment < segments.count, let array = segments[firstSegment].array {
                let (offset, length) = (segments[firstSegment].offset, segments[firstSegment].count)
                result = array.withUnsafeBytes { write(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + length])) }
            } else {
                // Owned bytes: the run of owned segments (and trailing bytes) up to the next array.
                var length = 0
                var index = firstSegment
                while index < segments.count && segments[index].array == nil {
                    length += segments[index].count
                    index += 1
                }
                if index == segments.count { length += trailingOwned }
                result = write(UnsafeRawBufferPointer(start: buffer! + readIndex, count: length))
            }
            switch result {
            case .wrote(let sent): consume(sent, accountedSent: &accountedSent)
            case .blocked: return .blocked
            case .failed(let code): return .failed(code)
            }
        }
        return .done
    }

    private static func send(_ fd: Int32, _ vectors: UnsafeMutablePointer<iovec>, _ used: Int) -> Int {
        if used == 1 {
            return Glibc.send(fd, vectors[0].iov_base, vectors[0].iov_len, Int32(MSG_NOSIGNAL))
        }
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = used
        return sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
    }

    private mutating func consume(_ sent: Int, accountedSent: inout Int) {
        var rest = sent
        count -= sent
        while rest > 0 && firstSegment < segments.count {
            let take = min(rest, segments[firstSegment].count)
            rest -= take
            if segments[firstSegment].array == nil {
                readIndex += take
            } else {
                segments[firstSegment].offset += take
                if segments[firstSegment].accounted { accountedSent += take }
            }
            if take == segments[firstSegment].count {
                segments[firstSegment].array = nil
                firstSegment += 1
            } else {
                segments[firstSegment].count -= take
            }
        }
        if rest > 0 {
            readIndex += rest
            trailingOwned -= rest
        }
        if count == sealed {
            if !segments.isEmpty { segments.removeAll(keepingCapacity: segments.capacity <= 16) }
            firstSegment = 0
            readIndex = 0
            writeIndex = 0
            // Given back once sent: an idle keep-alive connection then holds no buffer (10,000
            // of them would otherwise keep 40 MB), for a malloc per response.
            if !keepsBuffer {
                ByteBuffer.free(buffer)
                buffer = nil
                capacity = 0
            }
        } else if firstSegment > 32 && firstSegment * 2 > segments.count {
            segments.removeFirst(firstSegment)
            firstSegment = 0
        }
    }

    /// The accounted bytes still queued (given back when the connection closes).
    var accountedCount: Int {
        var total = 0
        for index in firstSegment..<segments.count where segments[index].accounted { total += segments[index].count }
        return total
    }
}
#endif
