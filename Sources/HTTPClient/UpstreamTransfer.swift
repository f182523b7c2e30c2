#if os(Linux)
import CacheSystem
import Glibc

/// A request on a kept-alive connection taken from the pool, advanced by the caller's event
/// loop rather than by a blocked thread: ``advance()`` whenever the connection is ready for what
/// the last step asked, then ``finish()``. The same exchange as ``UpstreamClient/perform(_:_:)``,
/// byte for byte and error for error; only the waiting differs.
///
/// Made only on a pooled connection, so nothing here blocks: no name lookup, no connect, no TLS
/// handshake (a connection is pooled after its handshake). What may block (a new connection, the
/// second attempt after a kept-alive connection closed unanswered) is left to a thread that may
/// wait (``Ending/sendAgain``); so is the rest of a transfer whose client reads slower than the
/// origin sends (``finishBlocking()``).
///
/// Used by one thread at a time: the loop's, or the worker it hands the rest to.
package final class UpstreamTransfer {
    /// What ``advance()`` came to.
    package enum Step: Equatable {
        /// Call ``advance()`` again when ``fd`` is ready for this (or after the stall timeout,
        /// ``timedOut()``).
        case wait(readable: Bool, writable: Bool)
        /// Part of the body was delivered and more may be buffered: call ``advance()`` again
        /// without waiting once the client had its turn.
        case more
        /// Over: call ``finish()``.
        case done
    }

    /// How a finished transfer ended, when it did not fail.
    package enum Ending: Equatable {
        /// The response was delivered.
        case complete
        /// The kept-alive connection closed before any byte of the response and the request is
        /// idempotent: send it again with ``UpstreamClient/perform(_:_:)`` (on a new connection,
        /// which may block; RFC 9110 §9.2.2). The receiver got nothing.
        case sendAgain
    }

    private let client: UpstreamClient
    private let exchange: UpstreamExchange
    private var outcome: UpstreamExchange.Outcome?

    init(client: UpstreamClient, exchange: UpstreamExchange) {
        self.client = client
        self.exchange = exchange
    }

    /// The connection's socket, for the loop to watch; -1 once finished.
    package var fd: Int32 { exchange.connection.fd }

    /// Seconds without a byte either way after which ``timedOut()`` is to be called; 0 or less:
    /// never.
    package var stallTimeout: Double { client.configuration.stallTimeout }

    /// Sends and receives what can move now, delivering the response to the receiver.
    package func advance() -> Step {
        guard outcome == nil else { return .done }
        switch exchange.advance() {
        case .wait(let events):
            return .wait(readable: events & Int16(POLLIN) != 0, writable: events & Int16(POLLOUT) != 0)
        case .more:
            return .more
        case .done(let ended):
            outcome = ended
            return .done
        }
    }

    /// The connection was not ready for the stall timeout: the transfer is over, as it would be
    /// in ``UpstreamClient/perform(_:_:)``.
    package func timedOut() {
        if outcome == nil { outcome = exchange.stalled() }
    }

    /// Ends the transfer: the connection goes back to the pool or is closed (stop watching
    /// ``fd`` first).
    /// - Throws: ``UpstreamError`` as ``UpstreamClient/perform(_:_:)`` does.
    package func finish() throws(UpstreamError) -> Ending {
        let ended = outcome ?? exchange.stalled()
        if case .unanswered(let detail) = ended {
            exchange.connection.close()
            try client.checkIdempotent(exchange.request, detail)
            return .sendAgain
        }
        try client.conclude(ended, exchange.connection, exchange.wire, exchange.request)
        return .complete
    }

    /// Advances to the end on this thread, waiting with `poll` (stop watching ``fd`` first), and
    /// finishes, sending the request again if it must be: what
    /// ``UpstreamClient/perform(_:_:)`` would have done from here.
    package func finishBlocking() throws(UpstreamError) {
        if outcome == nil { outcome = exchange.run() }
        if try finish() == .sendAgain { try client.perform(exchange.request, exchange.receiver) }
    }
}

@available(*, unavailable)
extension UpstreamTransfer: Sendable {}

extension UpstreamClient {
    /// `request` started on an idle kept-alive connection to its origin, for an event loop to
    /// advance; `nil` when the pool holds none (use ``perform(_:_:)`` on a thread that may block).
    /// Nothing has been sent yet: the first ``UpstreamTransfer/advance()`` sends.
    /// - Throws: ``UpstreamError`` when the request cannot be sent at all (its URL, say).
    package func transferOnPooledConnection(_ request: UpstreamRequest, _ receiver: any UpstreamReceiver)
        throws(UpstreamError) -> UpstreamTransfer?
    {
        let wire = try request.wire()
        guard let stream = pool.take(wire.poolKey) else { return nil }
        let connection = UpstreamConnection(
            stream: stream, reused: true, stallTimeout: configuration.stallTimeout, readSize: readSize)
        return UpstreamTransfer(client: self, exchange: exchange(on: connection, wire, request, receiver))
    }
}
#endif
