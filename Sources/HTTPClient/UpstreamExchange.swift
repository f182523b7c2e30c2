#if os(Linux)
import CacheSystem
@_spi(Wire) import HTTPWire

/// One request and its response on one connection, advanced as far as it goes without
/// blocking: the request sent, the response framed (``ResponseFramer``) and delivered to a
/// receiver. ``UpstreamClient/perform(_:_:)`` drives it with `poll` on its thread, an event loop
/// with its own readiness events (``UpstreamTransfer``); the bytes and the errors are the same.
final class UpstreamExchange {
    /// How one exchange on one connection ended.
    enum Outcome {
        /// The response is complete; whether the connection may carry another request.
        case complete(reusable: Bool)
        /// Not one byte of a response came before the connection closed or reset, or the
        /// request could not be sent (the detail says which).
        case unanswered(String)
        case failed(UpstreamError)
    }

    /// What ``advance()`` came to.
    enum Step {
        /// Call again once the connection is ready for these `poll` events.
        case wait(Int16)
        /// Call again without waiting: a share of the body was delivered
        /// (``bodyBytesPerAdvance``) and more may be buffered.
        case more
        case done(Outcome)
    }

    let connection: UpstreamConnection
    let wire: UpstreamRequest.Wire
    let request: UpstreamRequest
    let receiver: any UpstreamReceiver
    private let stallTimeout: Double
    private var framer: ResponseFramer
    /// What is still to be sent: the head, then the body when it goes apart; nil once all is out
    /// (or sending failed: a response may still have come, an early 413, say).
    private var sending: (bytes: [UInt8], offset: Int)?
    private var bodyToSend: [UInt8]?
    private var sendFailure: UpstreamConnection.SendFailure?
    private var receivedHead = false
    private var receivedAny = false

    init(
        on connection: UpstreamConnection, _ wire: UpstreamRequest.Wire, _ request: UpstreamRequest,
        _ receiver: any UpstreamReceiver, limits: ResponseFramer.Limits, stallTimeout: Double
    ) {
        self.connection = connection
        self.wire = wire
        self.request = request
        self.receiver = receiver
        self.stallTimeout = stallTimeout
        framer = ResponseFramer(requestMethod: request.method, limits: limits)
        sending = (wire.head, 0)
        bodyToSend = wire.sendsBodyApart ? request.body : nil
    }

    private func failure(_ kind: UpstreamError.Kind, _ description: String) -> Step {
        .done(.failed(UpstreamError(kind: kind, description: description, receivedHead: receivedHead)))
    }

    /// What ended the exchange when the connection was not ready for the stall timeout.
    func stalled() -> Outcome {
        let url = request.url
        let seconds = OriginSocket.seconds(stallTimeout)
        if sending != nil {
            return .failed(
                UpstreamError(
                    kind: .timeout,
                    description: "could not send the request to \(url) for \(seconds): the origin is not reading it",
                    receivedHead: false))
        }
        let what = receivedHead ? "the response body" : "a response"
        return .failed(
            UpstreamError(
                kind: .timeout, description: "no byte from \(url) for \(seconds) while waiting for \(what)",
                receivedHead: receivedHead))
    }

    /// Sends and receives until the connection must be waited for, or the exchange is over.
    func advance() -> Step {
        while let pending = sending {
            var (bytes, offset) = pending
            while offset < bytes.count {
                switch bytes.withUnsafeBytes({ connection.trySend(UnsafeRawBufferPointer(rebasing: $0[offset...])) }) {
                case .sent(let count):
                    offset += count
                case .wait(let events):
                    sending = (bytes, offset)
                    return .wait(events)
                case .failed(let failure):
                    // After a failed send a response may still have arrived (an early 413, say):
                    // read it.
                    sendFailure = .failed(failure)
                    bytes = []
                    bodyToSend = nil
                }
            }
            if let body = bodyToSend {
                sending = (body, 0)
                bodyToSend = nil
            } else {
                sending = nil
            }
        }
        return receive()
    }

    /// The most body bytes one ``advance()`` delivers before it returns ``Step/more``, so that
    /// whoever drives it can see to its client first.
    static let bodyBytesPerAdvance = 256 << 10

    private func receive() -> Step {
        let url = request.url
        var delivered = 0
        while true {
            let (event, consumed) = framer.parse(connection.pending)
            switch event {
            case .needMore:
                connection.consume(consumed)
                switch connection.tryReceive() {
                case .bytes:
                    receivedAny = true
                    continue
                case .wait(let events):
                    if receivedHead { receiver.willWait() }
                    return .wait(events)
                case .closed(let closure):
                    guard receivedAny else { return .done(.unanswered(sendFailure?.description ?? "EOF")) }
                    switch framer.finish() {
                    case .end where closure == .withoutCloseNotify:
                        // Only a body delimited by the close is still open here; under TLS it
                        // ends with close_notify, or it may have been cut (RFC 9112 §9.8).
                        return failure(
                            .closed,
                            "the response from \(url) ended without TLS close_notify, so its body, delimited by "
                                + "the close, may be cut short (RFC 9112 §9.8); it is incomplete and must not be "
                                + "used as complete")
                    case .error(let error):
                        return failure(
                            .closed,
                            "the response from \(url) was cut off: \(error); "
                                + "it is incomplete and must not be used as complete")
                    default:
                        return .done(.complete(reusable: false))
                    }
                case .failed(let reason):
                    guard receivedAny else {
                        return .done(.unanswered(sendFailure?.description ?? reason.description))
                    }
                    if case .tls = reason {
                        return failure(
                            .tls,
                            "the TLS connection to \(url) failed before the response was complete (\(reason)); "
                                + "it is incomplete and must not be used as complete")
                    }
                    return failure(
                        .closed,
                        "the connection to \(url) was reset (\(reason)) before the response was complete; "
                            + "it is incomplete and must not be used as complete")
                }
            case .interim(let head):
                connection.consume(consumed)
                receiver.receive(interim: head)
            case .head(let head):
                connection.consume(consumed)
                receivedHead = true
                guard receiver.receive(head: head) else {
                    return failure(.aborted, "the transfer from \(url) was stopped by its receiver")
                }
            case .body(let range):
                let bytes = UnsafeRawBufferPointer(rebasing: connection.pending[range])
                let wanted = receiver.receive(body: bytes)
                connection.consume(consumed)
                guard wanted else { return failure(.aborted, "the transfer from \(url) was stopped by its receiver") }
                delivered += bytes.count
                if delivered >= Self.bodyBytesPerAdvance { return .more }
            case .end:
                connection.consume(consumed)
                // Bytes beyond the response's end are not a response to anything: the
                // connection is closed rather than reused (RFC 9112 §6.3, last paragraph).
                let excess = !connection.pending.isEmpty
                return .done(
                    .complete(reusable: framer.keepsAlive && !excess && !wire.closesConnection && sendFailure == nil))
            case .error(let error):
                return failure(
                    .protocolError,
                    "the response from \(url) was refused: \(error); "
                        + "nothing of it is used or stored, and the connection was closed")
            }
        }
    }

    /// Advances to the end on this thread, waiting with `poll` between steps.
    func run() -> Outcome {
        while true {
            switch advance() {
            case .done(let outcome): return outcome
            case .more: continue
            case .wait(let events): guard connection.wait(for: events) else { return stalled() }
            }
        }
    }
}

@available(*, unavailable)
extension UpstreamExchange: Sendable {}
#endif
