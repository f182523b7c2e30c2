internal import COpenSSLHTTPCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket a connection's BIO reads and writes, and the `errno` of its last failure (kept
/// here because OpenSSL may make other calls before the caller reads `errno`).
struct SocketState {
    var fd: Int32
    /// The `errno` of the last `recv` or `send` that failed other than for `EAGAIN`; 0 if none.
    var lastErrno: Int32 = 0
    /// Whether `recv` met the end of the stream (what `BIO_eof` reports, and OpenSSL 3 turns
    /// into `SSL_R_UNEXPECTED_EOF_WHILE_READING` when no close_notify came first).
    var sawEOF = false
    /// Whether a `recv` since the connection's last read began gave fewer bytes than asked for
    /// (or none): the socket held nothing more at that moment, so an edge-triggered reader may
    /// wait for its next readiness.
    var drained = false
    /// Whether writes are being gathered (``SocketBIO`` keeps them in `pending` instead of
    /// sending each record on its own), and flushes wait for the gathering to end.
    var corked = false
    /// Whether the buffer of `pending` stays when all of it is sent (more records are sure to
    /// follow soon; see ``TLSConnection/keepsBuffer``).
    var keepsBuffer = false
    /// Records written and not yet sent: `pending[pendingStart..<pendingEnd]` (no buffer while
    /// nothing waits).
    var pending: UnsafeMutableRawBufferPointer?
    var pendingStart = 0
    var pendingEnd = 0

    var pendingCount: Int { pendingEnd - pendingStart }

    /// Gives back the buffer of records gathered (sent or not).
    mutating func releasePending() {
        pending?.deallocate()
        (pending, pendingStart, pendingEnd) = (nil, 0, 0)
    }
}

/// How sending the gathered records went.
enum PendingSend: Equatable {
    /// Everything gathered is sent (or nothing was).
    case sent
    /// The socket took part of it, or nothing: wait until it is writable.
    case blocked
    /// The socket failed with this `errno`.
    case failed(Int32)
}

/// OpenSSL's I/O over a socket, as its own socket BIO does it, but sending with `MSG_NOSIGNAL`:
/// a peer that went away gives `EPIPE`, never a SIGPIPE that kills the process (OpenSSL's
/// socket BIO calls `write`). On Apple systems the socket has `SO_NOSIGPIPE` instead.
///
/// Records may be gathered and leave in one `send` (``SocketState/corked``): a response of
/// several 16 KB records, or the session tickets with the first response, is one system call
/// and one wake-up of the peer rather than one per record. At most ``gatherLimit`` bytes wait;
/// a write that would go past it sends what waits first, and waits for the socket (retry) when
/// that cannot all go. While records wait and the socket is not corked, a write first sends
/// them, so that bytes never leave out of order.
///
/// The BIO never closes the socket: its owner does.
enum SocketBIO {
    /// The most bytes gathered before they are sent: four full records and change.
    static let gatherLimit = 64 * 1024
    #if canImport(Glibc)
    private static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    private static let sendFlags: Int32 = 0
    #endif

    private struct Method: @unchecked Sendable {  // an immutable table OpenSSL only reads
        let pointer: OpaquePointer?
    }

    private static let method = Method(pointer: makeMethod())

    /// A BIO over `state`'s socket; nil when OpenSSL could not make one. `state` must outlive it.
    static func make(_ state: UnsafeMutablePointer<SocketState>) -> OpaquePointer? {
        guard let method = method.pointer, let bio = BIO_new(method) else { return nil }
        BIO_set_data(bio, UnsafeMutableRawPointer(state))
        BIO_set_init(bio, 1)
        return bio
    }

    private static func makeMethod() -> OpaquePointer? {
        let index = BIO_get_new_index()
        guard index > 0, let method = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "httpcache socket") else {
            return nil
        }
        BIO_meth_set_write(method) { bio, bytes, count in
            guard let bio, let bytes, count > 0, let state = SocketBIO.state(bio) else { return 0 }
            let fits = state.pointee.corked && state.pointee.pendingCount + Int(count) <= SocketBIO.gatherLimit
            // What waits goes first; this record waits for the socket when it cannot all go.
            if state.pointee.pendingCount > 0 && !fits && !SocketBIO.drain(bio, state) { return -1 }
            if state.pointee.corked {
                BIO_clear_flags(bio, SocketBIO.retryFlags)
                SocketBIO.gather(state, bytes, Int(count))
                return count
            }
            return SocketBIO.transfer(bio, count: count, retry: BIO_FLAGS_WRITE) { state in
                send(state.pointee.fd, bytes, Int(count), SocketBIO.sendFlags)
            }
        }
        BIO_meth_set_read(method) { bio, bytes, count in
            SocketBIO.transfer(bio, count: count, retry: BIO_FLAGS_READ) { state in
                let received = recv(state.pointee.fd, bytes, Int(count), 0)
                if received == 0 { state.pointee.sawEOF = true }
                state.pointee.drained = received < Int(count)
                return received
            }
        }
        BIO_meth_set_ctrl(method) { bio, command, _, _ in
            switch command {
            case BIO_CTRL_FLUSH:
                if let bio, let state = SocketBIO.state(bio) { SocketBIO.flush(bio, state) } else { 1 }
            case BIO_CTRL_EOF: bio.flatMap(SocketBIO.state).map { $0.pointee.sawEOF ? 1 : 0 } ?? 0
            default: 0  // not supported
            }
        }
        BIO_meth_set_create(method) { _ in 1 }
        BIO_meth_set_destroy(method) { _ in 1 }
        return method
    }

    /// One `send` or `recv` (`io`) for the BIO `bio`, again after `EINTR`: the count, or -1
    /// with the `retry` flag set when the socket would block, or -1 with the `errno` kept.
    private static func transfer(
        _ bio: OpaquePointer?, count: Int32, retry: Int32, _ io: (UnsafeMutablePointer<SocketState>) -> Int
    ) -> Int32 {
        guard let bio, count > 0, let state = state(bio) else { return 0 }
        BIO_clear_flags(bio, retryFlags)
        while true {
            let done = io(state)
            if done >= 0 { return Int32(done) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: BIO_set_flags(bio, retry | BIO_FLAGS_SHOULD_RETRY)
            case let code: state.pointee.lastErrno = code
            }
            return -1
        }
    }

    /// OpenSSL's flush (the end of a handshake flight): while corked the records stay gathered
    /// (the owner sends them when it uncorks); otherwise what waits is sent, 1 once all of it
    /// is, -1 (and retry when the socket is full) otherwise.
    private static func flush(_ bio: OpaquePointer, _ state: UnsafeMutablePointer<SocketState>) -> Int {
        guard !state.pointee.corked, state.pointee.pendingCount > 0 else { return 1 }
        return drain(bio, state) ? 1 : -1
    }

    /// Sends what waits, for OpenSSL: `true` once all of it is sent; otherwise `false`, with the
    /// retry flags set when the socket is full, or the `errno` kept when it failed.
    private static func drain(_ bio: OpaquePointer, _ state: UnsafeMutablePointer<SocketState>) -> Bool {
        BIO_clear_flags(bio, retryFlags)
        // Corked, the buffer stays: records go on being gathered into it until the owner uncorks.
        switch sendPending(state, keepingBuffer: state.pointee.corked) {
        case .sent: return true
        case .blocked: BIO_set_flags(bio, BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY)
        case .failed(let code): state.pointee.lastErrno = code
        }
        return false
    }

    /// Appends `count` bytes to what waits, moving or growing the buffer as needed.
    private static func gather(_ state: UnsafeMutablePointer<SocketState>, _ bytes: UnsafeRawPointer, _ count: Int) {
        let live = state.pointee.pendingCount
        let capacity = state.pointee.pending?.count ?? 0
        if state.pointee.pendingEnd + count > capacity {
            if let buffer = state.pointee.pending?.baseAddress, live + count <= capacity {
                memmove(buffer, buffer + state.pointee.pendingStart, live)
            } else {
                // Whole records (application data) take the limit at once: gathering them
                // would otherwise grow the buffer, and copy what waits, again and again.
                let wanted = live + count
                let grown = UnsafeMutableRawBufferPointer.allocate(
                    byteCount: wanted > 8192 ? max(wanted, gatherLimit) : max(4096, wanted * 2), alignment: 16)
                if let old = state.pointee.pending {
                    memcpy(grown.baseAddress!, old.baseAddress! + state.pointee.pendingStart, live)
                    old.deallocate()
                }
                state.pointee.pending = grown
            }
            state.pointee.pendingStart = 0
            state.pointee.pendingEnd = live
        }
        memcpy(state.pointee.pending!.baseAddress! + state.pointee.pendingEnd, bytes, count)
        state.pointee.pendingEnd += count
    }

    /// Sends what waits, as much as the socket takes; the buffer is given back once all is sent
    /// unless `keepingBuffer` (more records are about to be gathered).
    static func sendPending(_ state: UnsafeMutablePointer<SocketState>, keepingBuffer: Bool = false) -> PendingSend {
        while state.pointee.pendingCount > 0 {
            let sent = send(
                state.pointee.fd, state.pointee.pending!.baseAddress! + state.pointee.pendingStart,
                state.pointee.pendingCount, sendFlags)
            if sent < 0 {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return .blocked
                case let code: return .failed(code)
                }
            }
            state.pointee.pendingStart += sent
        }
        if keepingBuffer || state.pointee.keepsBuffer {
            (state.pointee.pendingStart, state.pointee.pendingEnd) = (0, 0)
        } else {
            state.pointee.releasePending()
        }
        return .sent
    }

    private static let retryFlags = BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY

    private static func state(_ bio: OpaquePointer) -> UnsafeMutablePointer<SocketState>? {
        BIO_get_data(bio)?.assumingMemoryBound(to: SocketState.self)
    }
}
