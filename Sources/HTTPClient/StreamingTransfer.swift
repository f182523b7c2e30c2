#if os(Linux)
import CacheSystem
@_spi(Wire) import HTTPWire

/// One exchange between the thread that performs it (``StreamingClient``) and the task that
/// awaits it: the head handed over once, then the body in pieces through a bounded buffer.
///
/// Back-pressure: the performing thread blocks in ``push(_:)`` while ``capacity`` bytes wait
/// unread, so the socket is not read, the kernel's buffers fill and TCP slows the origin down;
/// a slow reader never makes memory grow. Cancellation, from the awaiting task or from a body
/// dropped unread, makes every push return `false` at once, which stops the transfer.
///
/// Wake-ups: what the performing thread hands over reaches a waiting task at the next
/// ``publish()`` (which the thread calls before it waits for the origin), when the buffer is
/// full, or at the end; what is here already is taken without suspending. A response that
/// arrives whole, as most of a page's resources do, so wakes its task once rather than once for
/// the head and once for each piece: on a busy machine each wake-up waits for a core.
package final class StreamingTransfer: Sendable {
    /// How the exchange ended, once it has.
    private enum End {
        case complete
        case failed(any Error)
    }

    private typealias HeadWaiter = CheckedContinuation<UpstreamResponseHead, any Error>
    private typealias BodyWaiter = CheckedContinuation<[UInt8]?, any Error>
    /// Waiting tasks that can go on, each with what it gets.
    private typealias WakeUps = (
        head: (HeadWaiter, Result<UpstreamResponseHead, any Error>)?, body: (BodyWaiter, Result<[UInt8]?, any Error>)?
    )

    private struct State {
        var head: UpstreamResponseHead?
        var decodedCodings: [String] = []
        var headWaiter: HeadWaiter?
        var pieces: [[UInt8]] = []
        /// Where the next unread piece is in `pieces` (read pieces are dropped in batches).
        var next = 0
        var bufferedBytes = 0
        var bodyWaiter: BodyWaiter?
        var end: End?
        var cancelled = false

        /// The head for the awaiting task, or why there is none; `nil` while it may still come.
        func head(noHead: UpstreamError) -> Result<UpstreamResponseHead, any Error>? {
            if let head { return .success(head) }
            if cancelled { return .failure(CancellationError()) }
            switch end {
            case .failed(let error): return .failure(error)
            case .complete: return .failure(noHead)
            case nil: return nil
            }
        }

        /// Takes the next piece of the body for the reader (`nil` in the result at its end), or
        /// why there is none; `nil` while more may come.
        mutating func takePiece() -> Result<[UInt8]?, any Error>? {
            if next < pieces.count {
                let piece = pieces[next]
                pieces[next] = []
                next += 1
                bufferedBytes -= piece.count
                if next == pieces.count {
                    pieces.removeAll(keepingCapacity: true)
                    next = 0
                }
                return .success(piece)
            }
            if cancelled { return .failure(CancellationError()) }
            switch end {
            case .complete: return .success(nil)
            case .failed(let error): return .failure(error)
            case nil: return nil
            }
        }

        /// Takes the waiting tasks that can go on: the head's when it is here (or will never
        /// come), the body's when a piece is here (or the body ended).
        mutating func wakeUps(noHead: UpstreamError) -> WakeUps {
            var wakeUps: WakeUps = (nil, nil)
            if let waiter = headWaiter, let result = head(noHead: noHead) {
                headWaiter = nil
                wakeUps.head = (waiter, result)
            }
            if let waiter = bodyWaiter, let result = takePiece() {
                bodyWaiter = nil
                wakeUps.body = (waiter, result)
            }
            return wakeUps
        }
    }

    /// The most body bytes waiting unread before the performing thread waits.
    package let capacity: Int
    private let state = Locked(State())

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Whether the awaiting side went away.
    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The `Content-Encoding` tokens of the codings the body is decoded from, set before the
    /// head is delivered; empty when the body is delivered as sent.
    package var decodedCodings: [String] {
        get { state.withLock { $0.decodedCodings } }
        set { state.withLock { $0.decodedCodings = newValue } }
    }

    // MARK: The performing thread

    /// Hands over the final head (a task awaiting it gets it at the next ``publish()``); `false`
    /// when the transfer was cancelled.
    package func deliver(head: UpstreamResponseHead) -> Bool {
        state.withLock { state in
            state.head = head
            return !state.cancelled
        }
    }

    /// Adds body bytes, waiting while ``capacity`` bytes are unread (a full buffer is published
    /// first, so its reader is awake); `false` when the transfer was cancelled (the bytes are
    /// dropped).
    package func push(_ piece: UnsafeRawBufferPointer) -> Bool {
        guard !piece.isEmpty else { return !isCancelled }
        let bytes = [UInt8](piece)
        let outcome: (accepted: Bool, full: Bool)? = state.withLock(
            when: { $0.cancelled || $0.bufferedBytes < capacity }
        ) { state in
            guard !state.cancelled else { return (false, false) }
            state.pieces.append(bytes)
            state.bufferedBytes += bytes.count
            return (true, state.bufferedBytes >= capacity)
        }
        guard let outcome, outcome.accepted else { return false }
        if outcome.full { publish() }
        return true
    }

    /// Wakes the task awaiting the head or body bytes when what it awaits is here: the
    /// performing thread calls it before it waits for the origin.
    package func publish() {
        resume(state.withLock { $0.wakeUps(noHead: Self.noHead) })
    }

    /// The exchange ended: completely (`error` nil) or not. Before the head, the error goes to
    /// the task awaiting the head; after it, to the body's reader once it has read what came.
    package func finish(_ error: (any Error)?) {
        let end: End = error.map { .failed($0) } ?? .complete
        resume(
            state.withLock { state in
                guard state.end == nil else { return (nil, nil) }
                state.end = end
                return state.wakeUps(noHead: Self.noHead)
            })
    }

    private func resume(_ wakeUps: WakeUps) {
        if let (waiter, result) = wakeUps.head { waiter.resume(with: result) }
        if let (waiter, result) = wakeUps.body {
            // Room was made: a push waiting for it may go on.
            state.wakeWaiters()
            waiter.resume(with: result)
        }
    }

    /// What a head awaited after a complete exchange without one gets; never in practice: the
    /// client delivers a head before it reports an exchange complete.
    private static let noHead = UpstreamError(
        kind: .protocolError, description: "the exchange ended without a response head", receivedHead: false)

    // MARK: The awaiting task

    /// The final response head, once it arrives.
    /// - Throws: Why the exchange failed before it; `CancellationError` when the task was cancelled
    ///   (the transfer is then stopped).
    package func head() async throws -> UpstreamResponseHead {
        if let ready = state.withLock({ $0.head(noHead: Self.noHead) }) { return try ready.get() }
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: HeadWaiter) in
                let ready: Result<UpstreamResponseHead, any Error>? = state.withLock { state in
                    let ready = state.head(noHead: Self.noHead)
                    if ready == nil { state.headWaiter = continuation }
                    return ready
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        seeHandOver()
        return head
    }

    /// The next piece of the body (in order), or nil at its end.
    /// - Throws: Why the exchange failed (after the pieces that came before); `CancellationError`
    ///   when the task was cancelled (the transfer is then stopped).
    package func next() async throws -> [UInt8]? {
        if let ready = state.withLock({ $0.takePiece() }) {
            // Room was made: a push waiting for it may go on.
            state.wakeWaiters()
            return try ready.get()
        }
        let piece = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: BodyWaiter) in
                let ready: Result<[UInt8]?, any Error>? = state.withLock { state in
                    let ready = state.takePiece()
                    if ready == nil { state.bodyWaiter = continuation }
                    return ready
                }
                guard let ready else { return }
                state.wakeWaiters()
                continuation.resume(with: ready)
            }
        } onCancel: {
            cancel()
        }
        seeHandOver()
        return piece
    }

    /// Takes the lock once after a resume that handed this task a value: the performing thread
    /// made the value before it released the lock, which orders the two for ThreadSanitizer. The
    /// resume orders them already, through the concurrency runtime and Dispatch, where TSan does
    /// not see it (it reported a body piece read by the task against its making, one run in nine).
    private func seeHandOver() {
        state.withLock { _ in }
    }

    /// Stops the transfer: the performing thread's next push or head delivery returns `false`,
    /// whoever awaits gets `CancellationError`, buffered bytes are dropped.
    package func cancel() {
        let (headWaiter, bodyWaiter) = state.withLock { state in
            state.cancelled = true
            state.pieces = []
            state.next = 0
            state.bufferedBytes = 0
            defer {
                state.headWaiter = nil
                state.bodyWaiter = nil
            }
            return (state.headWaiter, state.bodyWaiter)
        }
        state.wakeWaiters()
        headWaiter?.resume(throwing: CancellationError())
        bodyWaiter?.resume(throwing: CancellationError())
    }
}
#endif
