#if os(Linux)
import CacheSystem
import Glibc

/// One non-blocking connection to an origin and the bytes received on it and not yet consumed,
/// used by one thread for one exchange: from the pool or a new connect, then back to the pool
/// (``detach()``) or closed.
///
/// Every wait is a `poll` bounded by the stall timeout: no byte in either direction for that
/// long ends the exchange.
final class UpstreamConnection {
    /// What a wait for bytes ended with.
    enum Received: Equatable {
        /// This many more bytes are in ``pending``.
        case bytes(Int)
        /// The origin closed its side (EOF).
        case closed
        /// `recv` failed with this `errno` (`ECONNRESET` for a reset).
        case failed(Int32)
        /// Nothing arrived within the stall timeout.
        case stalled
    }

    /// Why sending stopped.
    enum SendFailure: Equatable, CustomStringConvertible {
        /// `send` failed with this `errno` (`EPIPE`, `ECONNRESET`).
        case failed(Int32)
        /// The origin read nothing for the stall timeout.
        case stalled

        var description: String {
            switch self {
            case .failed(let code): "sending failed: " + errnoText(code)
            case .stalled: "sending stalled"
            }
        }
    }

    /// Whether this connection came from the pool (it carried a response before).
    let reused: Bool
    private var fd: Int32
    /// Milliseconds a `poll` may wait; -1: no limit.
    private let pollTimeout: Int32
    /// The most bytes one `recv` asks for.
    private let readSize: Int
    private var storage: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0

    /// - Parameters:
    ///   - fd: A connected, non-blocking socket, owned from now on.
    ///   - stallTimeout: Seconds a wait may take; 0 or less: no limit.
    ///   - readSize: The most bytes one `recv` asks for (the fuzzer makes it small).
    init(fd: Int32, reused: Bool, stallTimeout: Double, readSize: Int = 64 * 1024) {
        self.fd = fd
        self.reused = reused
        pollTimeout =
            stallTimeout > 0 && stallTimeout.isFinite ? Int32(min(stallTimeout * 1000, 86_400_000).rounded(.up)) : -1
        self.readSize = max(1, readSize)
        storage = .allocate(byteCount: 64 * 1024, alignment: 1)
    }

    deinit {
        storage.deallocate()
        if fd >= 0 { _ = closeSocket(fd) }
    }

    /// The bytes received and not yet consumed.
    var pending: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[start..<end]) }

    /// Drops the first `count` pending bytes.
    func consume(_ count: Int) {
        start += count
        if start == end {
            start = 0
            end = 0
        }
    }

    /// Closes the socket now.
    func close() {
        if fd >= 0 { _ = closeSocket(fd) }
        fd = -1
    }

    /// The socket, for the pool; this object no longer owns it. Only when nothing is pending.
    func detach() -> Int32 {
        precondition(start == end, "a connection with unread bytes is never pooled")
        defer { fd = -1 }
        return fd
    }

    /// Sends all of `bytes`, waiting while the socket buffer is full.
    func send(_ bytes: UnsafeRawBufferPointer) -> SendFailure? {
        var offset = 0
        while offset < bytes.count {
            let sent = sendSocket(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if sent > 0 {
                offset += sent
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                guard wait(for: POLLOUT) else { return .stalled }
            case let code: return .failed(code)
            }
        }
        return nil
    }

    /// Receives more bytes into ``pending``, waiting for them.
    func receive() -> Received {
        makeRoom()
        while true {
            let count = recv(fd, storage.baseAddress! + end, min(readSize, storage.count - end), 0)
            if count > 0 {
                end += count
                return .bytes(count)
            }
            if count == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                guard wait(for: POLLIN) else { return .stalled }
            case let code: return .failed(code)
            }
        }
    }

    /// Whether a pooled socket is still idle: nothing to read, no EOF, no error. An origin
    /// that sent bytes after a complete response (RFC 9112 §6.3) or closed the connection
    /// fails this, and the socket must be closed rather than used.
    static func isIdle(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Waits until the socket is ready for `events`; false after the stall timeout.
    private func wait(for events: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(events), revents: 0)
        while true {
            let ready = poll(&poller, 1, pollTimeout)
            if ready < 0 && errno == EINTR { continue }
            // Ready, or an error or hang-up that the next call reports.
            return ready != 0
        }
    }

    /// Room at the end of the storage for another `recv`: pending bytes moved to the front,
    /// or a larger storage when they fill it (a head or chunk line still incomplete).
    private func makeRoom() {
        guard end == storage.count else { return }
        let count = end - start
        if start > 0 {
            storage.baseAddress!.copyMemory(from: storage.baseAddress! + start, byteCount: count)
        } else {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: storage.count * 2, alignment: 1)
            larger.baseAddress!.copyMemory(from: storage.baseAddress!, byteCount: count)
            storage.deallocate()
            storage = larger
        }
        start = 0
        end = count
    }
}

@available(*, unavailable)
extension UpstreamConnection: Sendable {}

private func sendSocket(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL))
}
private func closeSocket(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#endif
