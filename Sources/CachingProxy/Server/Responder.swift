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
    /// What an access log learns of this response; `nil` when nobody asked. Set on the loop
    /// before the responder is handed to any other thread, changed under shared's lock.
    private var observation: Observation?

    init(loop: EventLoop, target: ResponseTarget) {
        self.loop = loop
        self.target = target
        self.shared = target.shared
    }

    deinit {
        // No lock for the common case: the last release orders every earlier write before this.
        if let observation, let completion = observation.end(completed: false) { observation.report(completion) }
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

    /// Has `report` called once, when the response ended, with its head, the body bytes
    /// handed to the connection and whether it was complete (for an access log). A complete
    /// response is reported before its last byte reaches the connection, so lines come in the
    /// order clients see the ends of their responses. Call it before answering, on the thread
    /// that got the request.
    /// - Parameter requestIsHead: the request was a `HEAD`: its answer has no body.
    package func observeCompletion(
        requestIsHead: Bool, _ report: @escaping @Sendable (ResponseCompletion) -> Void
    ) {
        observation = Observation(report: report, requestIsHead: requestIsHead)
    }

    /// Adds `seconds` to the time this request waited for an origin (an access log's origin
    /// time); nothing unless ``observeCompletion(requestIsHead:_:)`` was called.
    package func addOriginTime(_ seconds: Double) {
        guard let observation else { return }
        shared.withLock { _ in observation.completion.originTime = (observation.completion.originTime ?? 0) + seconds }
    }

    /// Ends the observation when a call came too late (the client is gone, or the response
    /// was over): reported as incomplete unless it was reported already.
    private func endIgnored() {
        guard let observation else { return }
        if let completion = shared.withLock({ _ in observation.end(completed: false) }) {
            observation.report(completion)
        }
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
        var completion: ResponseCompletion?
        let routed = route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            finished = true
            if let observation {
                observation.begin(head, framing)
                completion = observation.sent(body.count) ?? observation.end(completed: true)
            }
            return true
        })
        // Before the client can have the answer, so lines come in the order clients see them.
        if let completion { observation?.report(completion) }
        switch routed {
        case .direct: loop.respond(target, head, body, framing)
        case .mailbox: _ = loop.post(.respond(target, head, body, framing))
        case .ignored: endIgnored()
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
        switch route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            observation?.begin(head, framing)
            return true
        }) {
        case .direct: loop.start(target, head, framing)
        case .mailbox: _ = loop.post(.start(target, head, framing))
        case .ignored: endIgnored()
        }
    }

    /// Appends body bytes. Off the loop thread it blocks while too much waits to be sent.
    /// `false` once the client is gone.
    ///
    /// The bytes are copied before the call returns.
    @discardableResult package func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard loop.isCurrentThread else { return writeFromOtherThread(Array(bytes)) }
        switch routeWrite(bytes.count) {
        case .direct: return loop.write(target, bytes)
        case .mailbox: return loop.post(.write(target, Array(bytes), accounted: false))
        case .ignored: return false
        }
    }

    /// Appends body bytes (large arrays are sent without a copy). Off the loop thread it
    /// blocks while too much waits to be sent. `false` once the client is gone.
    @discardableResult package func write(_ bytes: [UInt8]) -> Bool {
        guard loop.isCurrentThread else { return writeFromOtherThread(bytes) }
        switch routeWrite(bytes.count) {
        case .direct: return loop.write(target, bytes, accounted: false)
        case .mailbox: return loop.post(.write(target, bytes, accounted: false))
        case .ignored: return false
        }
    }

    /// Routes a write of `count` bytes from the loop thread, counted for the observation (and
    /// reported, before they reach the connection, when they end a body of known length).
    private func routeWrite(_ count: Int) -> Route {
        var completion: ResponseCompletion?
        let routed = route({ () -> Bool in
            guard started && !finished else { return false }
            completion = observation?.sent(count)
            return true
        })
        if let completion { observation?.report(completion) }
        return routed
    }

    /// Back-pressure: waits while 256 KiB or more of this response is queued, then posts. The
    /// thread of another loop never waits (a loop must not stall on a client it does not serve).
    private func writeFromOtherThread(_ bytes: [UInt8]) -> Bool {
        let mayWait = !EventLoop.isOnAnyLoop
        var completion: ResponseCompletion?
        let queued =
            shared.withLock(when: { [self] in !(mayWait && holdsBack($0)) }) { [self] shared -> Bool? in
                guard !shared.gone && started && !finished else { return nil }
                guard !bytes.isEmpty else { return false }
                shared.queuedBytes += bytes.count
                shared.inMailbox += 1
                completion = observation?.sent(bytes.count)
                return true
            } ?? nil
        if let completion { observation?.report(completion) }
        guard let queued else { return false }
        return queued ? loop.post(.write(target, bytes, accounted: true)) : true
    }

    /// Whether a writer off the loops waits before it adds to this response: its client is
    /// there and 256 KiB or more of it waits to be sent.
    private func holdsBack(_ shared: ConnectionShared) -> Bool {
        !shared.gone && started && !finished && shared.queuedBytes >= EventLoop.backPressureLimit
    }

    /// Off the loops' threads: waits while ``write(_:)-([UInt8])`` would, at most until
    /// `deadline` (``MonotonicClock/seconds()``); `false` when it passed with the client still
    /// behind. On a loop's thread it only tells whether the client is behind.
    package func waitWhileBackedUp(until deadline: Double) -> Bool {
        guard !EventLoop.isOnAnyLoop else { return !isBackedUp }
        return shared.withLock(when: { [self] in !holdsBack($0) }, deadline: deadline) { _ in true } ?? false
    }

    /// Whether at least 256 KiB of this response waits to be sent to the client: a writer on a
    /// loop thread, which never waits in ``write(_:)-(UnsafeRawBufferPointer)``, stops producing
    /// (or hands the rest to a thread that may wait) rather than let it grow.
    package var isBackedUp: Bool {
        if shared.withLock({ $0.queuedBytes }) >= EventLoop.backPressureLimit { return true }
        return loop.isCurrentThread && loop.queuedOutput(target) >= EventLoop.backPressureLimit
    }

    /// Ends the body.
    package func finish() {
        var completion: ResponseCompletion?
        let routed = route({ () -> Bool in
            guard started && !finished else { return false }
            finished = true
            completion = observation?.end(completed: true)
            return true
        })
        if let completion { observation?.report(completion) }
        switch routed {
        case .direct: loop.finish(target)
        case .mailbox: _ = loop.post(.finish(target))
        case .ignored: endIgnored()
        }
    }

    /// Ends the response early by closing the connection.
    package func abort() {
        var completion: ResponseCompletion?
        let routed = route({ () -> Bool in
            guard !finished else { return false }
            finished = true
            completion = observation?.end(completed: false)
            return true
        })
        if let completion { observation?.report(completion) }
        switch routed {
        case .direct: loop.abort(target)
        case .mailbox: _ = loop.post(.abort(target))
        case .ignored: endIgnored()
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
        var completion: ResponseCompletion?
        let routed = route({ () -> Bool in
            guard !started && !finished else { return false }
            started = true
            finished = true
            if let observation {
                observation.begin(ServerResponseHead(status: 200), .none)
                completion = observation.end(completed: true)
            }
            return true
        })
        if let completion { observation?.report(completion) }
        switch routed {
        case .direct: loop.tunnel(target, to: fd)
        case .mailbox: if !loop.post(.tunnel(target, fd)) { Glibc.close(fd) }
        case .ignored:
            Glibc.close(fd)
            endIgnored()
        }
    }

    /// One response as an access log sees it, while it is being sent. Changed under the
    /// responder's lock (or in its `deinit`).
    private final class Observation: @unchecked Sendable {
        let report: @Sendable (ResponseCompletion) -> Void
        let requestIsHead: Bool
        var completion = ResponseCompletion()
        /// Body bytes the framing still takes; `nil`: no bound (streamed).
        var remaining: Int64?
        /// The status, method and framing allow a body.
        var bodyAllowed = false
        var reported = false

        init(report: @escaping @Sendable (ResponseCompletion) -> Void, requestIsHead: Bool) {
            self.report = report
            self.requestIsHead = requestIsHead
        }

        func begin(_ head: ServerResponseHead, _ framing: BodyFraming) {
            completion.head = head
            // RFC 9112 §6.3: no body after HEAD, 1xx, 204, 304.
            bodyAllowed = !requestIsHead && head.status >= 200 && head.status != 204 && head.status != 304
            switch framing {
            case .none: bodyAllowed = false
            case .length(let length): remaining = length
            case .streamed: remaining = nil
            }
        }

        /// Counts `count` bytes written; the completion to report when they end a body of
        /// known length.
        func sent(_ count: Int) -> ResponseCompletion? {
            guard bodyAllowed, !reported else { return nil }
            guard let left = remaining else {
                completion.bodyBytes += Int64(count)
                return nil
            }
            let taken = min(Int64(count), left)
            completion.bodyBytes += taken
            remaining = left - taken
            return taken > 0 && left == taken ? end(completed: true) : nil
        }

        /// The completion to report, once: `completed` only when no byte the framing
        /// announced is missing.
        func end(completed: Bool) -> ResponseCompletion? {
            guard !reported else { return nil }
            reported = true
            completion.completed = completed && (!bodyAllowed || (remaining ?? 0) == 0)
            return completion
        }
    }
}
#endif
