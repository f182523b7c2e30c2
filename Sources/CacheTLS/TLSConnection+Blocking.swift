import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The blocking layer, for a thread that serves one exchange at a time (the proxy's upstream
/// workers, the CLI): each call loops over the non-blocking core, waiting with `poll(2)` for
/// what it asks, every wait bounded by a stall timeout (no byte either way for that long ends
/// the call). Its results have the shapes of a plain socket's (the upstream connection's
/// `Received` and `SendFailure`), so a caller can take either.
extension TLSConnection {
    /// What a wait for bytes ended with.
    public enum Received: Sendable, Equatable {
        /// This many bytes were read into the buffer.
        case bytes(Int)
        /// The peer closed with `close_notify`: nothing more will come.
        case closed
        /// The connection ended without `close_notify` (EOF or reset): what was being received
        /// is truncated (RFC 9112 §9.8).
        case closedWithoutNotify
        /// Reading failed: the connection is unusable.
        case failed(TLSError)
        /// Nothing arrived within the stall timeout.
        case stalled
    }

    /// Why sending stopped.
    public enum SendFailure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Writing failed (the peer went away, an alert): the connection is unusable.
        case failed(TLSError)
        /// The peer read nothing for the stall timeout.
        case stalled

        public var description: String {
            switch self {
            case .failed(let error): "sending failed: \(error)"
            case .stalled: "sending stalled"
            }
        }
    }

    /// Performs the handshake, waiting for the socket as it needs.
    /// - Parameter timeout: Seconds for the whole handshake; 0 or less: no limit.
    /// - Throws: ``TLSError``: the chain refused, a protocol version too old, a timeout, …
    public func handshake(timeout: Double) throws(TLSError) {
        let deadline = timeout > 0 ? MonotonicClock.seconds() + timeout : Double.infinity
        while true {
            switch handshake() {
            case .done: return
            case .failed(let error): throw error
            case .wantRead:
                guard Self.wait(fd, for: POLLIN, until: deadline) else { throw .timedOut(peer: peer) }
            case .wantWrite:
                guard Self.wait(fd, for: POLLOUT, until: deadline) else { throw .timedOut(peer: peer) }
            }
        }
    }

    /// Reads bytes into `buffer`, waiting for them: bytes already decrypted come at once.
    /// - Parameter stallTimeout: Seconds each wait may take; 0 or less: no limit.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, stallTimeout: Double) -> Received {
        while true {
            switch read(into: buffer) {
            case .bytes(let count): return .bytes(count)
            case .closed: return .closed
            case .closedWithoutNotify: return .closedWithoutNotify
            case .failed(let error): return .failed(error)
            case .wantRead:
                guard Self.wait(fd, for: POLLIN, stallTimeout: stallTimeout) else { return .stalled }
            case .wantWrite:
                guard Self.wait(fd, for: POLLOUT, stallTimeout: stallTimeout) else { return .stalled }
            }
        }
    }

    /// Sends all of `bytes`, waiting while the socket buffer is full.
    /// - Parameter stallTimeout: Seconds each wait may take; 0 or less: no limit.
    /// - Returns: nil when everything was sent, else why not.
    public func send(_ bytes: UnsafeRawBufferPointer, stallTimeout: Double) -> SendFailure? {
        var offset = 0
        while offset < bytes.count {
            switch write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .wrote(let count): offset += count
            case .failed(let error): return .failed(error)
            case .wantRead:
                guard Self.wait(fd, for: POLLIN, stallTimeout: stallTimeout) else { return .stalled }
            case .wantWrite:
                guard Self.wait(fd, for: POLLOUT, stallTimeout: stallTimeout) else { return .stalled }
            }
        }
        return nil
    }

    /// Sends `close_notify`, waiting while the socket buffer is full: whether it was sent (or
    /// needed not be: a connection that failed sends none).
    /// - Parameter stallTimeout: Seconds each wait may take; 0 or less: no limit.
    @discardableResult
    public func shutdown(stallTimeout: Double) -> Bool {
        while true {
            switch shutdown() {
            case .done: return true
            case .failed: return false
            case .wantRead:
                guard Self.wait(fd, for: POLLIN, stallTimeout: stallTimeout) else { return false }
            case .wantWrite:
                guard Self.wait(fd, for: POLLOUT, stallTimeout: stallTimeout) else { return false }
            }
        }
    }

    /// Waits until `fd` is ready for `events` (or has an error or hang-up, which the next call
    /// reports); false when `stallTimeout` seconds passed first.
    private static func wait(_ fd: Int32, for events: Int32, stallTimeout: Double) -> Bool {
        wait(fd, for: events, until: stallTimeout > 0 ? MonotonicClock.seconds() + stallTimeout : .infinity)
    }

    /// Waits until `fd` is ready for `events`, or `deadline` on ``MonotonicClock`` passed
    /// (false). A signal does not end the wait early.
    private static func wait(_ fd: Int32, for events: Int32, until deadline: Double) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(events), revents: 0)
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { return false }
            let milliseconds = left.isFinite ? Int32(min(left * 1000, 86_400_000).rounded(.up)) : -1
            let ready = poll(&poller, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return true }  // let the next call report the socket's error
        }
    }
}
