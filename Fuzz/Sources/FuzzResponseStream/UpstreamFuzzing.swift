// The upstream client's response framing (HTTPWire's ResponseFramer), alone and with the
// client over sockets the fuzzer feeds (HTTPClient's `FuzzingUpstreamClient`), as the fuzzer
// drives them. What the answers should be is decided by ResponseOracle, not here.
import CacheSemantics
import CacheTLS
@_spi(Fuzzing) import HTTPClient
@_spi(Wire) import HTTPWire

/// The framer fed in pieces, and the client, in terms the fuzzer compares.
///
/// ```swift
/// let framed = UpstreamFuzzing.frame(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8), ends: [27], method: "GET")
/// // framed.events == [.head(…), .end], framed.consumed == 27
/// ```
enum UpstreamFuzzing {
    /// ``ResponseFramer/Limits``: the defaults, or small ones so that short inputs reach them.
    public struct Limits: Sendable, Equatable {
        public var maxHeadBytes: Int
        public var maxFieldCount: Int
        public var maxInterimResponses: Int

        /// The limits the proxy runs with.
        public static var standard: Limits {
            let limits = ResponseFramer.Limits()
            return Limits(
                maxHeadBytes: limits.maxHeadBytes, maxFieldCount: limits.maxFieldCount,
                maxInterimResponses: limits.maxInterimResponses)
        }

        public init(maxHeadBytes: Int, maxFieldCount: Int, maxInterimResponses: Int) {
            self.maxHeadBytes = maxHeadBytes
            self.maxFieldCount = maxFieldCount
            self.maxInterimResponses = maxInterimResponses
        }

        var framerLimits: ResponseFramer.Limits {
            var limits = ResponseFramer.Limits()
            limits.maxHeadBytes = maxHeadBytes
            limits.maxFieldCount = maxFieldCount
            limits.maxInterimResponses = maxInterimResponses
            return limits
        }
    }

    /// A response head as the receiver gets it.
    public struct Head: Sendable, Equatable, CustomStringConvertible {
        public var status: Int
        public var reason: String
        public var fields: [HeaderField]

        public init(status: Int, reason: String, fields: [HeaderField]) {
            self.status = status
            self.reason = reason
            self.fields = fields
        }

        init(_ head: UpstreamResponseHead) {
            self.init(status: head.status, reason: head.reason, fields: Array(head.fields))
        }

        public var description: String {
            "\(status) \(reason.debugDescription) \(fields.map { "\($0.name): \($0.value)" })"
        }
    }

    /// What the framer reported; adjacent body pieces joined, since splits move their borders.
    public enum Event: Sendable, Equatable {
        case interim(Head)
        case head(Head)
        case body([UInt8])
        case end
        /// The reason, in words.
        case error(String)
    }

    /// Everything the framer reported for some bytes.
    public struct Framing: Sendable, Equatable, CustomStringConvertible {
        public var events: [Event] = []
        /// Bytes that belonged to the response (consumed by the framer).
        public var consumed = 0
        /// Whether the connection may carry another request, as the framer says.
        public var keepsAlive = false

        public var description: String { "\(events) consumed \(consumed) keepsAlive \(keepsAlive)" }
    }

    /// Frames the response to a `method` request in `bytes`, received in pieces that end at
    /// `ends`; then, when `closed`, the connection closes. Stops at the end or an error.
    public static func frame(
        _ bytes: [UInt8], ends: [Int], method: String, closed: Bool = false, limits: Limits = .standard
    ) -> Framing {
        var framer = ResponseFramer(requestMethod: method, limits: limits.framerLimits)
        var framing = Framing()
        var pending: [UInt8] = []
        var received = 0
        func record(_ event: Event) {
            if case .body(let more) = event, case .body(let earlier) = framing.events.last {
                framing.events[framing.events.count - 1] = .body(earlier + more)
            } else {
                framing.events.append(event)
            }
        }
        pieces: for end in ends {
            pending += bytes[received..<end]
            received = end
            while true {
                let (event, consumed) = pending.withUnsafeBytes { framer.parse($0) }
                switch event {
                case .needMore: break
                case .interim(let head): record(.interim(Head(head)))
                case .head(let head): record(.head(Head(head)))
                case .body(let range): record(.body(Array(pending[range])))
                case .end: record(.end)
                case .error(let error): record(.error(error.description))
                }
                pending.removeFirst(consumed)
                framing.consumed += consumed
                switch event {
                case .needMore: continue pieces
                case .end, .error: break pieces
                default: continue
                }
            }
        }
        if closed, framing.events.last != .end, !framing.events.contains(where: \.isError) {
            switch framer.finish() {
            case .end: record(.end)
            case .error(let error): record(.error(error.description))
            default: preconditionFailure("finish() returns the end or an error")
            }
        }
        framing.keepsAlive = framer.keepsAlive
        return framing
    }

    /// How ``Client/perform(method:stopAtHead:stopAfterBodyBytes:)`` ended.
    public struct Outcome: Sendable, Equatable, CustomStringConvertible {
        /// The final head the receiver got.
        public var head: Head?
        /// The body the receiver got.
        public var body: [UInt8] = []
        /// ``UpstreamError/Kind`` in words (`closed`, `protocolError`…), nil after success.
        public var error: String?
        public var errorDescription: String?
        /// ``UpstreamError/receivedHead``.
        public var receivedHead = false

        public var description: String {
            "head \(head.map(\.description) ?? "none"), body \(body.count) bytes, "
                + (error.map { "\($0) (\(errorDescription ?? "")), receivedHead \(receivedHead)" } ?? "complete")
        }
    }

    /// The proxy's upstream client whose connections are the sockets `connect` returns (one
    /// end of a socketpair the fuzzer writes to), pooled as usual.
    public final class Client: Sendable {
        private let client: FuzzingUpstreamClient

        /// - Parameters:
        ///   - limits: The framer's limits.
        ///   - readSize: The most bytes one `recv` asks for.
        ///   - stallTimeout: Seconds without a byte before an exchange fails.
        ///   - tls: TLS over each socket, trusting this context's authorities; nil: plain.
        ///   - connect: A connected socket, or nil for a refused connection.
        public init(
            limits: Limits, readSize: Int, stallTimeout: Double, tls: TLSClientContext? = nil,
            connect: @escaping @Sendable () -> Int32?
        ) {
            client = FuzzingUpstreamClient(
                limits: limits.framerLimits, readSize: readSize, stallTimeout: stallTimeout, tls: tls,
                connect: connect)
        }

        /// Sends `method` (no body, `Host` only) and collects the response;
        /// the receiver says stop at the head, or once it has `stopAfterBodyBytes` bytes.
        public func perform(method: String, stopAtHead: Bool, stopAfterBodyBytes: Int?) -> Outcome {
            let answer = client.perform(
                method: method, stopAtHead: stopAtHead, stopAfterBodyBytes: stopAfterBodyBytes)
            var outcome = Outcome()
            outcome.head = answer.head.map(Head.init)
            outcome.body = answer.body
            if let error = answer.error {
                outcome.error = error.kind
                outcome.errorDescription = error.description
                outcome.receivedHead = error.receivedHead
            }
            return outcome
        }
    }
}

extension UpstreamFuzzing.Event {
    var isError: Bool {
        if case .error = self { return true }
        return false
    }
}
