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
package final class StreamingTransfer: Sendable {
    /// How the exchange ended, once it has.
    private enum End {
        case complete
        case failed(any Error)
    }

    private typealias HeadWaiter = CheckedContinuation<UpstreamResponseHead, any Error>
    private typealias BodyWaiter = CheckedContinuation<[UInt8]?, any Error>

    private struct State {
        var head: UpstreamResponseHead?
        var headWaiter: HeadWaiter?
        var pieces: [[UInt8]] = []
        /// Where the next unread piece is in `pieces` (read pieces are dropped in batches).
        var next = 0
        var bufferedBytes = 0
        var bodyWaiter: BodyWaiter?
        var end: End?
        var cancelled = false
    }

    /// The most body bytes waiting unread before the performing thread waits.
    package let capacity: Int
    private let state = Locked(State())

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Whether the awaiting side went away.
    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    // MARK: The performing thread

    /// Hands over the final head; `false` when the transfer was cancelled.
    package func deliver(head: UpstreamResponseHead) -> Bool {
        let (waiter, cancelled) = state.withLock { state in
            state.head = head
            defer { state.headWaiter = nil }
            return (state.headWaiter, state.cancelled)
        }
        waiter?.resume(returning: head)
        return !cancelled
    }

    /// Adds body bytes, waiting while ``capacity`` bytes are unread; `false` when the
    /// transfer was cancelled (the bytes are dropped).
    package func push(_ piece: UnsafeRawBufferPointer) -> Bool {
        guard !piece.isEmpty else { return !isCancelled }
        let bytes = [UInt8](piece)
        let outcome: (accepted: Bool, waiter: BodyWaiter?)? = state.withLock(
            when: { $0.cancelled || $0.bufferedBytes < capacity }
        ) { state in
            guard !state.cancelled else { return (false, nil) }
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                return (true, waiter)
            }
            state.pieces.append(bytes)
            state.bufferedBytes += bytes.count
            return (true, nil)
        }
        guard let outcome else { return false }
        outcome.waiter?.resume(returning: bytes)
        return outcome.accepted
    }

    /// The exchange ended: completely (`error` nil) or not. Before the head, the error goes to
    /// the task awaiting the head; after it, to the body's reader once it has read what came.
    package func finish(_ error: (any Error)?) {
        let end: End = error.map { .failed($0) } ?? .complete
        let (headWaiter, bodyWaiter) = state.withLock { state -> (HeadWaiter?, BodyWaiter?) in
            guard state.end == nil else { return (nil, nil) }
            state.end = end
            defer {
                state.headWaiter = nil
                state.bodyWaiter = nil
            }
            return (state.headWaiter, state.bodyWaiter)
        }
        switch end {
        case .complete:
            headWaiter?.resume(throwing: Self.noHead)
            bodyWaiter?.resume(returning: nil)
        case .failed(let error):
            headWaiter?.resume(throwing: error)
            bodyWaiter?.resume(throwing: error)
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
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: HeadWaiter) in
                let ready: Result<UpstreamResponseHead, any Error>? = state.withLock { state in
                    if let head = state.head { return .success(head) }
                    if state.cancelled { return .failure(CancellationError()) }
                    switch state.end {
                    case .failed(let error): return .failure(error)
                    case .complete: return .failure(Self.noHead)
                    case nil:
                        state.headWaiter = continuation
                        return nil
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The next piece of the body (in order), or nil at its end.
    /// - Throws: Why the exchange failed (after the pieces that came before); `CancellationError`
    ///   when the task was cancelled (the transfer is then stopped).
    package func next() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: BodyWaiter) in
                let ready: Result<[UInt8]?, any Error>? = state.withLock { state in
                    if state.next < state.pieces.count {
                        let piece = state.pieces[state.next]
                        state.pieces[state.next] = []
                        state.next += 1
                        state.bufferedBytes -= piece.count
                        if state.next == state.pieces.count {
                            state.pieces.removeAll(keepingCapacity: true)
                            state.next = 0
                        }
                        return .success(piece)
                    }
                    if state.cancelled { return .failure(CancellationError()) }
                    switch state.end {
                    case .complete: return .success(nil)
                    case .failed(let error): return .failure(error)
                    case nil:
                        state.bodyWaiter = continuation
                        return nil
                    }
                }
                guard let ready else { return }
                // Room was made: the performing thread may go on.
                state.wakeWaiters()
                continuation.resume(with: ready)
            }
        } onCancel: {
            cancel()
        }
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
