#if os(Linux)
import CacheSystem
import CacheSemantics
import Glibc

/// Answers one request; callable from any thread.
///
/// On the connection's loop thread (inside ``RequestHandler/handle(_:_:)``, say) every call
/// acts at once and never blocks. From any other thread calls are posted to the loop (woken
/// through an eventfd) in the order they are made, and ``write(_:)-(UnsafeRawBufferPointer)``
/// blocks while more than 1 MiB of this response waits to be sent to a slow client (except
/// on the thread of another of the server's loops, which never blocks).
///
/// ```swift
/// func handle(_ request: ServerRequest, _ responder: Responder) {
///     responder.respond(ServerResponseHead(status: 200, fields: ["Content-Type": "text/plain"]), body: Array("hi".utf8))
/// }
/// ```
///
/// Every request is answered exactly once: ``respond(_:body:framing:)``, or ``start(_:framing:)``
/// then writes and ``finish()``, or ``abort()``, or ``tunnel(to:)``. Calls after that, or after
/// the client went away, do nothing (writes return `false`). A responder released without an
/// answer closes its connection. Before the answer, ``interim(_:)`` may send `1xx` responses.
package final class Responder: @unchecked Sendable {
    private let loop: EventLoop
    private let target: ResponseTarget
    private let shared: Locked<ConnectionShared>
    // Guarded by shared's lock.
    private var started = false
    private var finished = false
    private var headObserver: (@Sendable (ServerResponseHead) -> Void)?

    init(loop: EventLoop, target: ResponseTarget) {
        self.loop = loop
        self.target = target
        self.shared = target.shared
    }

    deinit {
        // No lock for the common case: the last release orders every earlier write before this.
        guard !finished else { return }
        if !isClientGone { _ = loop.post(.abandoned(target)) }
    }

    /// How a call reaches the loop, decided under the lock.
    private enum Route {
        case direct
        case mailbox
        case ignored
    }

    /// Updates the responder's state under the lock (`update` returns `false` when the call
    /// comes too late or too early and is to be ignored) and says how the call goes on.
    private func route(_ update: () -> Bool) -> Route {
        let onLoop = loop.isCurrentThread
        return shared.withLock { shared in
            guard !shared.gone, update() else { return .ignored }
            // From the loop thread act at once unless earlier calls still wait in the mailbox.
            if onLoop && shared.inMailbox == 0 { return .direct }
            shared.inMailbox += 1
            return .mailbox
        }
    }

    /// Has `observer` called with the head of the final response as it is handed to the
    /// connection, before the client can read it (for an access log); set before answering.
    package func observeHead(_ observer: @escaping @Sendable (ServerResponseHead) -> Void) {
        shared.withLock { _ in headObserver = observer }
    }

    /// Sends a complete response: `body` with `Content-Length`, or no body when `framing` is
    /// `.none` (answers to HEAD, 204, 304).
    ///
    /// - Parameters:
    ///   - head: status, reason and fields; the server drops `Connection`, `Keep-Alive`,
    ///     `Transfer-Encoding` and (unless `framing` is `.none`) `Content-Length` from them.
    ///   - body: the body; not sent after HEAD or for 1xx, 204 and 304.
    ///   - framing: `nil` for `.length(body.count)`; `.streamed` sends `body` chunked (or
    ///     close-delimited to HTTP/1.0 clients).
    package func respond(_ head: ServerResponseHead, body: [UInt8], framing: BodyFraming? = nil) {
        let framing = framing ?? .length(Int64(body.count))
        var observer: (@Sendable (ServerResponseHead) -> Void)?
        let routed = route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            finished = true
            observer = headObserver
            return true
        })
        // Before the client can have the answer, so lines come in the order clients see them.
        observer?(head)
        switch routed {
        case .direct: loop.respond(target, head, body, framing)
        case .mailbox: _ = loop.post(.respond(target, head, body, framing))
        case .ignored: break
        }
    }

    /// Sends an interim `1xx` response (RFC 9110 §15.2; not `101`) before the final one; to an
    /// HTTP/1.0 client, or once the final response started, nothing is sent.
    package func interim(_ head: ServerResponseHead) {
        switch route({ !started && !finished }) {
        case .direct: loop.interim(target, head)
        case .mailbox: _ = loop.post(.interim(target, head))
        case .ignored: break
        }
    }

    /// Sends the head; the body follows through ``write(_:)-(UnsafeRawBufferPointer)`` and ``finish()``.
    ///
    /// `.length(n)` sends `Content-Length: n` (bytes past `n` are dropped; finishing short
    /// closes the connection); `.streamed` is chunked for HTTP/1.1 clients and delimited by
    /// closing the connection for HTTP/1.0 clients (RFC 9112 §6.3, §7.1).
    package func start(_ head: ServerResponseHead, framing: BodyFraming) {
        var observer: (@Sendable (ServerResponseHead) -> Void)?
        let routed = route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            observer = headObserver
            return true
        })
        observer?(head)
        switch routed {
        case .direct: loop.start(target, head, framing)
        case .mailbox: _ = loop.post(.start(target, head, framing))
        case .ignored: break
        }
    }

    /// Appends body bytes. Off the loop thread it blocks while too much waits to be sent.
    /// `false` once the client is gone.
    ///
    /// The bytes are copied before the call returns.
    @discardableResult package func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard loop.isCurrentThread else { return writeFromOtherThread(Array(bytes)) }
        switch route({ started && !finished }) {
        case .direct: return loop.write(target, bytes)
        case .mailbox: return loop.post(.write(target, Array(bytes), accounted: false))
        case .ignored: return false
        }
    }

    /// Appends body bytes (large arrays are sent without a copy). Off the loop thread it
    /// blocks while too much waits to be sent. `false` once the client is gone.
    @discardableResult package func write(_ bytes: [UInt8]) -> Bool {
        guard loop.isCurrentThread else { return writeFromOtherThread(bytes) }
        switch route({ started && !finished }) {
        case .direct: return loop.write(target, bytes, accounted: false)
        case .mailbox: return loop.post(.write(target, bytes, accounted: false))
        case .ignored: return false
        }
    }

    /// Back-pressure: waits while 256 KiB or more of this response is queued, then posts. The
    /// thread of another loop never waits (a loop must not stall on a client it does not serve).
    private func writeFromOtherThread(_ bytes: [UInt8]) -> Bool {
        let mayWait = !EventLoop.isOnAnyLoop
        let queued =
            shared.withLock(
                when: { [self] shared in
                    !(mayWait && !shared.gone && started && !finished
                        && shared.queuedBytes >= EventLoop.backPressureLimit)
                }
            ) { [self] shared -> Bool? in
                guard !shared.gone && started && !finished else { return nil }
                guard !bytes.isEmpty else { return false }
                shared.queuedBytes += bytes.count
                shared.inMailbox += 1
                return true
            } ?? nil
        guard let queued else { return false }
        return queued ? loop.post(.write(target, bytes, accounted: true)) : true
    }

    /// Ends the body.
    package func finish() {
        switch route({ () -> Bool in
            guard started && !finished else { return false }
            finished = true
            return true
        }) {
        case .direct: loop.finish(target)
        case .mailbox: _ = loop.post(.finish(target))
        case .ignored: break
        }
    }

    /// Ends the response early by closing the connection.
    package func abort() {
        switch route({ () -> Bool in
            guard !finished else { return false }
            finished = true
            return true
        }) {
        case .direct: loop.abort(target)
        case .mailbox: _ = loop.post(.abort(target))
        case .ignored: break
        }
    }

    /// Whether the connection is closed (the client went away, or the server closed it).
    package var isClientGone: Bool { shared.withLock { $0.gone } }

    /// Answers `200` to a `CONNECT` and relays bytes between the client and `fd` (a connected
    /// socket) until either side closes; the server owns `fd` from then on.
    ///
    /// Bytes the client sent after the CONNECT head are forwarded first. When one side ends
    /// its stream the other is half-closed (`shutdown(SHUT_WR)`); both are closed once both
    /// are done, on an error, after `idleTimeout` without traffic, or at shutdown.
    package func tunnel(to fd: Int32) {
        var observer: (@Sendable (ServerResponseHead) -> Void)?
        let routed = route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            finished = true
            observer = headObserver
            return true
        })
        observer?(ServerResponseHead(status: 200))
        switch routed {
        case .direct: loop.tunnel(target, to: fd)
        case .mailbox: if !loop.post(.tunnel(target, fd)) { Glibc.close(fd) }
        case .ignored: Glibc.close(fd)
        }
    }
}
#endif
