#if os(Linux)
import CacheSystem
import CacheSemantics
import CacheStorage
import CacheTestSupport
import CachingProxy
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One table of cases through both hosts of the exchange core: `HTTPCache` in shared mode and
/// the caching proxy (in process), each in front of an origin of its own scripted alike, on a
/// clock moved by hand. Each request's status, body, `Cache-Status` and `Age` presence, and the
/// requests each origin received, must be the same for both; each case also states what it
/// expects, so both cannot agree on something wrong. The proxy is asked over HTTP/1.1 and over
/// HTTP/2 (cleartext, prior knowledge: RFC 9113 §3.3), so one table holds both protocols to the
/// same answers.
@Suite("Both hosts answer alike: HTTPCache (shared mode) and httpcache serve over HTTP/1.1 and HTTP/2", .serialized)
struct HostDifferentialTests {
    @Test(arguments: DifferentialCase.all + DifferentialCase.standards, ProxyHost.Wire.allCases)
    func bothHostsAnswerAlike(_ testCase: DifferentialCase, _ wire: ProxyHost.Wire) async throws {
        try await offPool {
            let viaLibrary = try await LibraryHost().run(testCase)
            let viaProxy = try await ProxyHost(wire).run(testCase)
            #expect(
                viaLibrary.answers == viaProxy.answers,
                "answers: HTTPCache \(viaLibrary.answers), proxy \(viaProxy.answers)")
            #expect(
                viaLibrary.originLog == viaProxy.originLog,
                "origin: HTTPCache \(viaLibrary.originLog), proxy \(viaProxy.originLog)")
            testCase.check(viaLibrary)
        }
    }
}

/// What a client saw of one response.
struct Answer: Equatable, CustomStringConvertible {
    var status: Int
    var body: String
    var cacheStatus: String?
    var hasAge: Bool
    /// Which of the representation metadata and cache fields came (RFC 9110 §8, §15.4.5).
    var metadata: Set<String> = []

    /// The names of ``metadataNames`` present in `value(name)`'s answer.
    static func metadata(_ value: (String) -> String?) -> Set<String> {
        Set(metadataNames.filter { value($0) != nil })
    }

    static let metadataNames = [
        "Content-Type", "Content-Encoding", "Content-Language", "Content-Location", "ETag", "Last-Modified",
        "Vary", "Cache-Control", "Expires", "Cache-Groups",
    ]

    /// No response: the library's transport error, or the proxy's own 502/504 for it.
    static let failed = Answer(status: -1, body: "", cacheStatus: nil, hasAge: false)

    var description: String {
        status == -1
            ? "failed" : "\(status) \(body.prefix(24).debugDescription) [\(cacheStatus ?? "-")]\(hasAge ? " Age" : "")"
    }
}

/// What one host did with a case.
struct Transcript {
    var answers: [Answer] = []
    /// One line per request the origin received: method, target and the preconditions.
    var originLog: [String] = []
}

/// A clock that moves only when told: both hosts see the same times, so the same ages and ttls.
final class FixedClock: Sendable {
    /// The time every case starts at.
    static let start = 1_800_000_000.0
    private let time = Locked(FixedClock.start)
    var now: Double { time.withLock { $0 } }
    var function: @Sendable () -> Double { { [self] in now } }
    func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
    var date: String { HTTPDate.format(Timestamp(secondsSince1970: now)) }
}

/// The world a case runs in: an origin and a clock.
struct World: Sendable {
    let origin: LoopbackOrigin
    let clock: FixedClock

    /// Routes `path`: each request gets `respond(request, n)` (n counts from 1), dated by the clock.
    func route(_ path: String, _ respond: @escaping @Sendable (LoopbackOrigin.Request, Int) -> LoopbackOrigin.Response)
    {
        let count = Locked(0)
        origin.route(path) { [clock] request in
            let number = count.withLock { count -> Int in
                count += 1
                return count
            }
            var response = respond(request, number)
            if response.addsDate, !response.headers.contains(where: { $0.name.lowercased() == "date" }) {
                response.headers.insert((name: "Date", value: clock.date), at: 0)
            }
            return response
        }
    }

    /// Routes `path` to the same response each time.
    func serve(_ path: String, status: Int = 200, _ headers: [(String, String)], body: String = "body") {
        route(path) { _, _ in LoopbackOrigin.Response(status: status, headers: headers, body: Array(body.utf8)) }
    }

    /// Routes `path` to a response with `etag` that answers a matching `If-None-Match` with `304`.
    func serveValidated(_ path: String, etag: String, _ headers: [(String, String)], body: String = "body") {
        route(path) { request, _ in
            let matches = request.header("If-None-Match")?.contains(etag) == true
            return LoopbackOrigin.Response(
                status: matches ? 304 : 200, headers: headers + [("ETag", etag)],
                body: matches ? [] : Array(body.utf8))
        }
    }
}

/// One step of a case.
enum Step: Sendable {
    /// A request; `Content-Length` etc. are the client's business.
    case request(String, method: String = "GET", headers: [(String, String)] = [], body: String? = nil)
    /// `count` identical requests at once.
    case concurrent(String, count: Int)
    case advance(Double)
    case originDown
    /// Waits until the stale-while-revalidate revalidations in the background are done.
    case waitForBackgroundWork
}

/// A case: how the origin answers, what the client does, and a check of its own.
struct DifferentialCase: Sendable, CustomTestStringConvertible {
    var name: String
    var setup: @Sendable (World) -> Void
    var steps: [Step]
    /// What this case expects of either host (both agree, checked separately).
    var expect: @Sendable (Transcript) -> Bool

    var testDescription: String { name }

    func check(_ transcript: Transcript, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            expect(transcript), "\(name): \(transcript.answers) origin \(transcript.originLog)",
            sourceLocation: sourceLocation)
    }
}

/// Something that answers requests through a cache in front of a world's origin.
protocol Host: AnyObject, Sendable {
    func start(_ world: World) async throws
    func send(_ path: String, method: String, headers: [(String, String)], body: String?) async -> Answer
    /// `count` GETs of `path` at once, their answers in any order.
    func sendConcurrently(_ path: String, count: Int) async -> [Answer]
    func waitForBackgroundWork() async
    func stop()
}

extension Host {
    func run(_ testCase: DifferentialCase) async throws -> Transcript {
        let world = World(origin: try LoopbackOrigin(), clock: FixedClock())
        testCase.setup(world)
        try await start(world)
        defer {
            stop()
            world.origin.stop()
        }
        var transcript = Transcript()
        for step in testCase.steps {
            switch step {
            case .request(let path, let method, let headers, let body):
                transcript.answers.append(await send(path, method: method, headers: headers, body: body))
            case .concurrent(let path, let count):
                let answers = await sendConcurrently(path, count: count)
                // Which one led is a race: compare them in a fixed order.
                transcript.answers += answers.sorted { $0.description < $1.description }
            case .advance(let seconds):
                world.clock.advance(seconds)
            case .originDown:
                world.origin.stop()
            case .waitForBackgroundWork:
                await waitForBackgroundWork()
            }
        }
        transcript.originLog = world.origin.requests.map { request in
            var line = "\(request.method) \(request.target)"
            for name in ["If-None-Match", "If-Modified-Since", "Range", "If-Range"] {
                if let value = request.header(name) { line += " \(name): \(value)" }
            }
            return line
        }
        return transcript
    }

    /// `count` GETs of `path`, each sent by a task of its own.
    func sendInTasks(_ path: String, count: Int) async -> [Answer] {
        await withTaskGroup(of: Answer.self) { group in
            for _ in 0..<count { group.addTask { await self.send(path, method: "GET", headers: [], body: nil) } }
            var answers: [Answer] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
    }
}

/// The multipart boundary is random: compare bodies without it.
func normalizedBody(_ data: Data, contentType: String?) -> String {
    var text = String(decoding: data, as: UTF8.self)
    if let contentType, let range = contentType.range(of: "boundary=") {
        text = text.replacingOccurrences(of: String(contentType[range.upperBound...]), with: "BOUNDARY")
    }
    return text
}

/// `HTTPCache` in shared mode, in memory.
final class LibraryHost: Host, @unchecked Sendable {
    private var cache: HTTPCache?
    private var world: World?

    func start(_ world: World) async throws {
        var configuration = HTTPCache.Configuration.memoryOnly
        configuration.isShared = true
        configuration.name = "cache"
        configuration.clock = world.clock.function
        configuration.followsRedirects = false
        configuration.log = { _ in }
        cache = try HTTPCache(configuration: configuration)
        self.world = world
    }

    func send(_ path: String, method: String, headers: [(String, String)], body: String?) async -> Answer {
        guard let cache, let world else { return .failed }
        var request = URLRequest(url: world.origin.url(path))
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        guard let response = try? await cache.data(for: request) else { return .failed }
        let fields = response.response
        return Answer(
            status: response.statusCode,
            body: normalizedBody(response.data, contentType: fields.value(forHTTPHeaderField: "Content-Type")),
            cacheStatus: fields.value(forHTTPHeaderField: "Cache-Status"),
            hasAge: fields.value(forHTTPHeaderField: "Age") != nil,
            metadata: Answer.metadata { fields.value(forHTTPHeaderField: $0) })
    }

    func sendConcurrently(_ path: String, count: Int) async -> [Answer] { await sendInTasks(path, count: count) }

    func waitForBackgroundWork() async { await cache?.waitForBackgroundWork() }

    func stop() {}
}

/// The caching proxy in process, in reverse mode, in memory, reached over HTTP/1.1 with
/// URLSession or over HTTP/2 with ``HTTP2Client``.
final class ProxyHost: Host, @unchecked Sendable {
    /// The protocol the proxy is asked in.
    enum Wire: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case http1 = "HTTP/1.1"
        /// Cleartext with prior knowledge (RFC 9113 §3.3), a connection per request; concurrent
        /// requests go on streams of one connection.
        case http2 = "HTTP/2"

        var testDescription: String { rawValue }
    }

    private let wire: Wire
    private var proxy: CachingProxy?
    private let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.connectionProxyDictionary = [:]
        return URLSession(configuration: configuration, delegate: RedirectsReturned(), delegateQueue: nil)
    }()

    init(_ wire: Wire) {
        self.wire = wire
    }

    func start(_ world: World) async throws {
        var configuration = CachingProxy.Configuration(mode: .reverse(origin: world.origin.baseURL))
        configuration.port = 0
        configuration.name = "cache"
        configuration.clock = world.clock.function
        configuration.originConnectTimeout = 2
        configuration.log = { _ in }
        let proxy = try CachingProxy(configuration)
        proxy.start()
        self.proxy = proxy
    }

    func send(_ path: String, method: String, headers: [(String, String)], body: String?) async -> Answer {
        guard let proxy else { return .failed }
        if wire == .http2 {
            return sendOverHTTP2([HTTP2Request(method, path, fields: headers, body: body.map { Array($0.utf8) })])[0]
        }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(proxy.port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        guard let (data, response) = try? await session.data(for: request), let http = response as? HTTPURLResponse
        else { return .failed }
        return Self.answer(status: http.statusCode, body: data) { http.value(forHTTPHeaderField: $0) }
    }

    func sendConcurrently(_ path: String, count: Int) async -> [Answer] {
        switch wire {
        case .http1: await sendInTasks(path, count: count)
        case .http2: sendOverHTTP2(Array(repeating: HTTP2Request("GET", path), count: count))
        }
    }

    /// `requests` at once on streams of a new connection; a stream that did not end with
    /// END_STREAM is an issue of its own (the server broke HTTP/2) and a failed answer.
    private func sendOverHTTP2(_ requests: [HTTP2Request]) -> [Answer] {
        guard let proxy, let client = try? HTTP2Client(port: proxy.port) else {
            Issue.record("no HTTP/2 connection to the proxy")
            return requests.map { _ in .failed }
        }
        return client.send(requests).map { response in
            guard response.end == .endStream else {
                Issue.record("HTTP/2 stream: \(response)")
                return .failed
            }
            return Self.answer(status: response.status, body: Data(response.body)) { response[$0] }
        }
    }

    /// What the client saw; the proxy's own 502/504 for a transport error is no answer, as
    /// the library's transport error is none.
    private static func answer(status: Int, body: Data, field: (String) -> String?) -> Answer {
        let cacheStatus = field("Cache-Status")
        if [502, 504].contains(status),
            cacheStatus?.contains("detail=origin-unreachable") == true
                || cacheStatus?.contains("detail=origin-timeout") == true
        {
            return .failed
        }
        return Answer(
            status: status, body: normalizedBody(body, contentType: field("Content-Type")), cacheStatus: cacheStatus,
            hasAge: field("Age") != nil, metadata: Answer.metadata(field))
    }

    func waitForBackgroundWork() async { _ = proxy?.waitForBackgroundWork(timeout: 10) }

    func stop() {
        proxy?.shutdown(timeout: 5)
        // Not invalidateAndCancel(): on Linux it reads the session's tasks off the session's own
        // queue, and trapped in a whole-suite run while a finished task was being taken out.
        session.finishTasksAndInvalidate()
    }
}

/// Hands redirects back unfollowed, as HTTPCache does with `followsRedirects` off.
final class RedirectsReturned: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
#endif
