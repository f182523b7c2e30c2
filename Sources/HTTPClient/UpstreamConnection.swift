#if os(Linux)
import CacheSystem
import Glibc

/// One connection to an origin (a plain socket or TLS, ``UpstreamStream``) and the bytes
/// received on it and not yet consumed, used by one thread for one exchange: from the pool or a
/// new connect, then back to the pool (``detach()``) or closed.
///
/// Every wait is a `poll` bounded by the stall timeout: no byte in either direction for that
/// long ends the exchange.
final class UpstreamConnection {
    /// What a wait for bytes ended with.
    enum Received: Equatable {
        /// This many more bytes are in ``pending``.
        case bytes(Int)
        /// The origin closed its side: a FIN, or TLS's `close_notify` (`.orderly`), or a TLS
        /// connection cut without `close_notify`.
        case closed(StreamClosure)
        /// Reading failed (`ECONNRESET` for a reset; a TLS alert or a bad record).
        case failed(StreamFailure)
        /// Nothing arrived within the stall timeout.
        case stalled
    }

    /// Why sending stopped.
    enum SendFailure: Equatable, CustomStringConvertible {
        /// Sending failed (`EPIPE`, `ECONNRESET`, a TLS failure).
        case failed(StreamFailure)
        /// The origin read nothing for the stall timeout.
        case stalled

        var description: String {
            switch self {
            case .failed(let failure): "sending failed: \(failure)"
            case .stalled: "sending stalled"
            }
        }
    }

    /// Whether this connection came from the pool (it carried a response before).
    let reused: Bool
    private var stream: (any UpstreamStream)?
    /// Milliseconds a `poll` may wait; -1: no limit.
    private let pollTimeout: Int32
    /// The most bytes one read asks for.
    private let readSize: Int
    private var storage: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0

    /// - Parameters:
    ///   - stream: A connected stream, owned from now on.
    ///   - stallTimeout: Seconds a wait may take; 0 or less: no limit.
    ///   - readSize: The most bytes one read asks for (the fuzzer makes it small).
    init(stream: any UpstreamStream, reused: Bool, stallTimeout: Double, readSize: Int = 64 * 1024) {
        self.stream = stream
        self.reused = reused
        pollTimeout = Self.pollTimeout(stallTimeout)
        self.readSize = max(1, readSize)
        storage = ByteBuffer.allocateRaw(64 * 1024)
    }

    deinit {
        ByteBuffer.free(storage.baseAddress)
        stream?.close()
    }

    /// `seconds` as a `poll` timeout in milliseconds: -1 (no limit) for 0 or less.
    static func pollTimeout(_ seconds: Double) -> Int32 {
        seconds > 0 && seconds.isFinite ? Int32(min(seconds * 1000, 86_400_000).rounded(.up)) : -1
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

    /// Closes the connection now.
    func close() {
        stream?.close()
        stream = nil
    }

    /// The stream, for the pool or for TLS over it; this object no longer owns it. `nil` when
    /// bytes are pending (they belong to no response, and such a connection is never reused)
    /// or it was closed.
    func detach() -> (any UpstreamStream)? {
        guard start == end else { return nil }
        defer { stream = nil }
        return stream
    }

    /// Sends all of `bytes`, waiting while the connection cannot take more.
    func send(_ bytes: UnsafeRawBufferPointer) -> SendFailure? {
        var offset = 0
        while offset < bytes.count {
            switch trySend(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .sent(let count): offset += count
            case .wait(let events): guard wait(for: events) else { return .stalled }
            case .failed(let failure): return .failed(failure)
            }
        }
        return nil
    }

    /// Sends some of `bytes` without waiting.
    func trySend(_ bytes: UnsafeRawBufferPointer) -> StreamWrite {
        guard let stream else { return .failed(.system(EBADF)) }
        return stream.write(bytes)
    }

    /// Receives more bytes into ``pending``, waiting for them (after calling `beforeWaiting`
    /// when none are there yet).
    func receive(beforeWaiting: () -> Void = {}) -> Received {
        while true {
            switch tryReceive() {
            case .bytes(let count): return .bytes(count)
            case .wait(let events):
                beforeWaiting()
                guard wait(for: events) else { return .stalled }
            case .closed(let closure): return .closed(closure)
            case .failed(let failure): return .failed(failure)
            }
        }
    }

    /// Receives more bytes into ``pending`` if some are there, without waiting.
    func tryReceive() -> StreamRead {
        guard let stream else { return .failed(.system(EBADF)) }
        makeRoom()
        let room = UnsafeMutableRawBufferPointer(rebasing: storage[end..<min(storage.count, end + readSize)])
        let read = stream.read(into: room)
        if case .bytes(let count) = read { end += count }
        return read
    }

    /// Waits until the connection is ready for `events` (`POLLIN`, `POLLOUT`); false after the
    /// stall timeout.
    func wait(for events: Int16) -> Bool {
        guard let stream else { return true }
        var poller = pollfd(fd: stream.fd, events: events, revents: 0)
        while true {
            let ready = poll(&poller, 1, pollTimeout)
            if ready < 0 && errno == EINTR { continue }
            // Ready, or an error or hang-up that the next call reports.
            return ready != 0
        }
    }

    /// The socket underneath, for an event loop to watch; -1 once closed or detached.
    var fd: Int32 { stream?.fd ?? -1 }

    /// Room at the end of the storage for another read: pending bytes moved to the front,
    /// or a larger storage when they fill it (a head or chunk line still incomplete).
    private func makeRoom() {
        guard end == storage.count else { return }
        let count = end - start
        if start > 0 {
            storage.baseAddress!.copyMemory(from: storage.baseAddress! + start, byteCount: count)
        } else {
            let larger = ByteBuffer.allocateRaw(storage.count * 2)
            larger.baseAddress!.copyMemory(from: storage.baseAddress!, byteCount: count)
            ByteBuffer.free(storage.baseAddress)
            storage = larger
        }
        start = 0
        end = count
    }
}

@available(*, unavailable)
extension UpstreamConnection: Sendable {}
#endif
