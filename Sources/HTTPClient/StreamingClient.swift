#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTLS
@_spi(Wire) import HTTPWire

/// ``UpstreamClient`` for async callers, such as an app's cache (HTTPCache's transport on
/// Linux): each exchange is performed on a thread of its own, from a bounded set; the caller
/// gets the head as soon as it arrives and reads the body as it streams, through a bounded
/// buffer (``StreamingTransfer``), decoded when asked (``ContentDecoder``).
///
/// ```swift
/// let client = StreamingClient()
/// let response = try await client.send(request, decodesContent: true)
/// while let piece = try await response.body.next() { … }
/// ```
package final class StreamingClient: Sendable {
    /// Threads, buffering and the client's own settings.
    package struct Configuration: Sendable {
        /// Timeouts and pooling; the timeouts are those of requests sent without their own.
        package var client = UpstreamClient.Configuration()
        /// The most exchanges performed at once, each on a thread of its own; more wait, in
        /// order, for one to end (a thread is held until its body is read to the end, stopped or
        /// dropped).
        package var maximumConcurrentTransfers = 64
        /// Body bytes (decoded) an exchange holds for a reader who has not taken them yet;
        /// beyond them its thread waits, and reads nothing more from the origin.
        package var bufferedBodyBytes = 256 * 1024
        /// Seconds a thread with nothing to do waits for another exchange before it ends.
        package var idleThreadLifetime = 10.0

        package init() {}
    }

    /// A request's own timeouts, in seconds (0 or less: none).
    package struct Timeouts: Hashable, Sendable {
        /// To connect (``UpstreamClient/Configuration/connectTimeout``).
        package var connect: Double
        /// Without a byte moving (``UpstreamClient/Configuration/stallTimeout``).
        package var stall: Double

        package init(connect: Double, stall: Double) {
            self.connect = connect
            self.stall = stall
        }
    }

    /// A response whose head has arrived.
    package struct Response: Sendable {
        /// The final head (interim 1xx heads are skipped). When the body is decoded, its
        /// `Content-Encoding` and `Content-Length` are gone: they described the coded bytes.
        package var head: UpstreamResponseHead
        /// The body, to read with ``StreamingTransfer/next()``; ``StreamingTransfer/cancel()``
        /// stops it.
        package var body: StreamingTransfer
        /// The `Content-Encoding` tokens of the codings the body is decoded from; empty when
        /// it is delivered as sent.
        package var decodedCodings: [String] { body.decodedCodings }
    }

    /// Compression Dictionary Transport for one request (RFC 9842).
    package struct Dictionaries: Sendable {
        /// The dictionary the request offers (`Available-Dictionary`): a `dcz` body is decoded
        /// with it. Without one, a `dcz` body is delivered as sent.
        package var offered: CompressionDictionary?
        /// Where a response with `Use-As-Dictionary` is kept (its decoded content) for later
        /// requests, fresh for its `max-age` from `now` (seconds since 1970).
        package var store: CompressionDictionaryStore
        package var url: String
        package var now: Double

        package init(offered: CompressionDictionary?, store: CompressionDictionaryStore, url: String, now: Double) {
            self.offered = offered
            self.store = store
            self.url = url
            self.now = now
        }
    }

    /// A request's own timeouts get a client of their own (its pool too); beyond this many
    /// sets of timeouts, a request gets a client that keeps no connection.
    static let pooledTimeoutSets = 8

    private let configuration: Configuration
    private let defaultClient: UpstreamClient
    /// Shared by the clients of every set of timeouts: trusted authorities, sessions (OpenSSL
    /// and the system's trust store are set up by the first `https` connection).
    private let tls: TLSClientContext
    private let clients = Locked<[Timeouts: UpstreamClient]>([:])
    private let threads: TransferThreads

    /// - Throws: ``UpstreamError/Kind/tls`` when an extra trust root cannot be read or holds no
    ///   certificate (see ``UpstreamClient/init(configuration:)``).
    package init(configuration: Configuration = .init()) throws(UpstreamError) {
        self.configuration = configuration
        tls = try UpstreamClient.tlsContext(configuration.client)
        defaultClient = UpstreamClient(configuration: configuration.client, tls: tls)
        threads = TransferThreads(
            maximum: max(1, configuration.maximumConcurrentTransfers), idleLifetime: configuration.idleThreadLifetime)
    }

    /// Sends `request` and returns when the final response head has arrived.
    ///
    /// Cancelling the calling task stops the exchange: at once for the caller, and for the
    /// thread at its next event (the next bytes from the origin, or its stall timeout).
    /// - Parameters:
    ///   - timeouts: The request's own timeouts; nil for the configuration's.
    ///   - decodesContent: Whether a body in content codings this module decodes (gzip,
    ///     deflate, br, RFC 9110 §8.4.1) is decoded; a `206` is never decoded (a range of coded
    ///     bytes cannot be decoded alone), nor is content in a coding not decoded here (its
    ///     fields stay as they are).
    ///   - dictionaries: The dictionary offered and where new ones are kept (RFC 9842).
    /// - Throws: ``UpstreamError`` or ``ContentDecodingError`` when no head came;
    ///   `CancellationError`.
    package func send(
        _ request: UpstreamRequest, timeouts: Timeouts? = nil, decodesContent: Bool, dictionaries: Dictionaries? = nil
    ) async throws -> Response {
        let transfer = StreamingTransfer(capacity: configuration.bufferedBodyBytes)
        let client = client(for: timeouts)
        do {
            try threads.run {
                Self.perform(request, on: client, transfer, decodesContent: decodesContent, dictionaries: dictionaries)
            }
        } catch {
            throw UpstreamError(
                kind: .other,
                description: "could not start a thread to send the request to \(request.url) (\(error)); "
                    + "nothing was sent: the process may have too many threads",
                receivedHead: false)
        }
        return Response(head: try await transfer.head(), body: transfer)
    }

    /// The blocking exchange, on its thread.
    private static func perform(
        _ request: UpstreamRequest, on client: UpstreamClient, _ transfer: StreamingTransfer, decodesContent: Bool,
        dictionaries: Dictionaries?
    ) {
        guard !transfer.isCancelled else { return }
        let receiver = TransferReceiver(transfer, decodesContent: decodesContent, dictionaries: dictionaries)
        do {
            try client.perform(request, receiver)
            transfer.finish(receiver.finishDecoding())
        } catch {
            transfer.finish(receiver.decodingError ?? (transfer.isCancelled ? CancellationError() : error))
        }
    }

    /// The client for `timeouts`.
    private func client(for timeouts: Timeouts?) -> UpstreamClient {
        let defaults = Timeouts(connect: configuration.client.connectTimeout, stall: configuration.client.stallTimeout)
        guard let timeouts, timeouts != defaults else { return defaultClient }
        return clients.withLock { clients in
            if let client = clients[timeouts] { return client }
            var settings = configuration.client
            settings.connectTimeout = timeouts.connect
            settings.stallTimeout = timeouts.stall
            guard clients.count < Self.pooledTimeoutSets else {
                settings.maxIdleConnections = 0
                return UpstreamClient(configuration: settings, tls: tls)
            }
            let client = UpstreamClient(configuration: settings, tls: tls)
            clients[timeouts] = client
            return client
        }
    }
}

/// Passes what the client receives to a ``StreamingTransfer``, decoding the body on the way.
private final class TransferReceiver: UpstreamReceiver {
    private let transfer: StreamingTransfer
    private let decodesContent: Bool
    private var decoder: ContentDecoder?
    private let dictionaries: StreamingClient.Dictionaries?
    /// The decoded content of a response offered as a dictionary (RFC 9842 §2.1), with its
    /// fields and when it stops being fresh; dropped past the store's limit.
    private var dictionary: (fields: HeaderFields, expires: Double, content: [UInt8])?
    /// Why decoding failed, when it did (the exchange was then stopped).
    private(set) var decodingError: ContentDecodingError?

    init(_ transfer: StreamingTransfer, decodesContent: Bool, dictionaries: StreamingClient.Dictionaries?) {
        self.transfer = transfer
        self.decodesContent = decodesContent
        self.dictionaries = dictionaries
    }

    func receive(head: UpstreamResponseHead) -> Bool {
        var head = head
        var codings = decodesContent && head.status != 206 ? ContentCoding.applied(in: head.fields) : nil
        // dcz is decoded with the dictionary offered, or not at all (delivered as sent).
        if codings?.contains(.dictionaryZstandard) == true && dictionaries?.offered == nil { codings = nil }
        if let codings, !codings.isEmpty {
            // The fields describe the decoded bytes from here on, as URLSession hands them on.
            transfer.decodedCodings = head.fields.listMembers(named: .contentEncoding).map(String.init)
            head.fields.removeAll(namedAnyOf: [HeaderField.Name.contentEncoding, .contentLength])
            do { decoder = try ContentDecoder(codings, dictionary: dictionaries?.offered) } catch {
                decodingError = error
                return false
            }
        }
        // A dictionary is kept for as long as its response is fresh (RFC 9842 §2.2.1): its
        // max-age less its Age (RFC 9111 §4.2.1, §4.2.3).
        if let dictionaries, codings != nil, head.status == 200,
            head.fields.contains(CompressionDictionaries.useAsDictionary),
            let maxAge = ResponseCacheControl(fields: head.fields).maxAge
        {
            let age = head.fields[.age].flatMap { Double($0) } ?? 0
            dictionary = (head.fields, dictionaries.now + Double(maxAge) - age, [])
        }
        return transfer.deliver(head: head)
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        guard let decoder else {
            keep(body)
            return transfer.push(body)
        }
        do {
            return try decoder.decode(body) { piece in
                keep(piece)
                return transfer.push(piece)
            }
        } catch {
            decodingError = error
            return false
        }
    }

    /// Adds decoded bytes to the dictionary being received, if one is.
    private func keep(_ piece: UnsafeRawBufferPointer) {
        guard dictionary != nil, let limit = dictionaries?.store.maxContentBytes else { return }
        dictionary!.content += piece
        if dictionary!.content.count > limit { dictionary = nil }
    }

    func willWait() { transfer.publish() }

    /// The body ended: what the decoder still holds goes out, and a coded stream that did not
    /// end is the error returned.
    func finishDecoding() -> ContentDecodingError? {
        do {
            try decoder?.finish { piece in
                keep(piece)
                return transfer.push(piece)
            }
        } catch {
            return error
        }
        if let dictionaries, let dictionary {
            dictionaries.store.record(
                url: dictionaries.url, fields: dictionary.fields, content: dictionary.content,
                expires: dictionary.expires)
        }
        return nil
    }
}

/// Threads that perform exchanges: at most `maximum`, started when an exchange has none
/// waiting for it, ending after `idleLifetime` seconds with nothing to do. Exchanges beyond
/// `maximum` wait, in order.
private final class TransferThreads: Sendable {
    private struct Job {
        var number: Int
        var body: @Sendable () -> Void
    }

    private struct State {
        var jobs: [Job] = []
        var started = 0
        var threads = 0
        /// Threads waiting for a job.
        var idle = 0
    }

    private let state = Locked(State())
    private let maximum: Int
    private let idleLifetime: Double

    init(maximum: Int, idleLifetime: Double) {
        self.maximum = maximum
        self.idleLifetime = idleLifetime
    }

    /// Runs `body` on one of the threads, now or when one is free.
    /// - Throws: ``SystemError`` when no thread runs and none could be started; `body` never runs then.
    func run(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        let (number, starts) = state.withLock { state in
            state.started += 1
            state.jobs.append(Job(number: state.started, body: body))
            guard state.jobs.count > state.idle, state.threads < maximum else { return (state.started, false) }
            state.threads += 1
            return (state.started, true)
        }
        guard starts else {
            state.wakeOne()
            return
        }
        do {
            try SystemThread.detached(name: "httpcache-fetch") { [self] in work() }
        } catch {
            // The job waits for a thread that is running, or fails when there is none.
            let orphaned = state.withLock { state in
                state.threads -= 1
                guard state.threads == 0, let index = state.jobs.firstIndex(where: { $0.number == number }) else {
                    return false
                }
                state.jobs.remove(at: index)
                return true
            }
            if orphaned { throw error }
        }
    }

    private func work() {
        while true {
            state.withLock { $0.idle += 1 }
            let deadline = MonotonicClock.seconds() + idleLifetime
            let job =
                state.withLock(when: { !$0.jobs.isEmpty }, deadline: deadline) { state in
                    state.idle -= 1
                    return state.jobs.removeFirst()
                }
                ?? state.withLock { state in
                    // Timed out; a job may have come in just then.
                    state.idle -= 1
                    guard !state.jobs.isEmpty else {
                        state.threads -= 1
                        return nil
                    }
                    return state.jobs.removeFirst()
                }
            guard let job else { return }
            job.body()
        }
    }
}
#endif
