#if os(Linux)
import CacheSystem
import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
@_spi(Wire) import HTTPWire
import LoopbackOrigin
import Testing

@testable import CachingProxy
@testable import HTTPClient

/// `httpcache serve` processes started together, each killed when the last reference to it goes.
///
/// A class, not an array: `Array` may be released right after its last use in an optimized
/// build (it is `@_eagerMove`), and its nodes with it. Under `swift build -c release` (as
/// `scripts/tsan` builds) a test that read `nodes[0].baseURL` and then sent a request found
/// the node already killed. A class held by a `let` lives to the end of its scope.
final class ServeNodes: RandomAccessCollection, Sendable {
    private let nodes: [ServeProcess]

    init(_ nodes: [ServeProcess]) { self.nodes = nodes }

    var startIndex: Int { nodes.startIndex }
    var endIndex: Int { nodes.endIndex }
    subscript(position: Int) -> ServeProcess { nodes[position] }
}

/// A real `httpcache serve` child process in front of a loopback origin, with its own store
/// directory. SIGTERMed (then SIGKILLed if need be) when released.
final class ServeProcess: @unchecked Sendable {
    let process = ChildProcess()
    let directory = TemporaryDirectory("httpcache-serve-test")
    private(set) var port: UInt16 = 0
    private let errorPath: String

    /// Where its store is.
    let cacheDirectory: String?
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts `httpcache serve ARGUMENTS --listen 127.0.0.1:0 --cache-dir DIR` (a directory of
    /// its own unless `store` names one; `--memory-only` when `memoryOnly`) and waits for its
    /// "listening on" line; `environment` is added to this process's.
    init(_ arguments: [String], store: String? = nil, memoryOnly: Bool = false, environment: [String: String] = [:])
        throws
    {
        try requireOffPool("ServeProcess(\(arguments.first ?? ""))")
        errorPath = directory.path + "/stderr"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
        var full = ["serve"] + arguments + ["--listen", "127.0.0.1:0"]
        cacheDirectory = memoryOnly ? nil : store ?? directory.path + "/cache"
        full += cacheDirectory.map { ["--cache-dir", $0] } ?? ["--memory-only"]
        process.arguments = full
        var variables = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        variables["no_proxy"] = "*"
        variables.merge(environment) { $1 }
        process.environment = variables
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read the first line on another thread, bounded.
        let line = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let handle = output.fileHandleForReading
        Thread.detachNewThread {
            var bytes: [UInt8] = []
            while let chunk = try? handle.read(upToCount: 1), let byte = chunk.first, byte != 0x0A {
                bytes.append(byte)
            }
            line.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 30) == .success, let text = line.withLock({ $0 }),
            let portText = text.split(separator: ":").last, let port = UInt16(portText)
        else {
            process.terminate()
            throw ServeFailure(description: "httpcache serve did not start: \(standardError)")
        }
        self.port = port
    }

    deinit {
        if process.send(signal: SIGKILL) { process.waitUntilExit() }
    }

    /// What the process wrote on standard error so far.
    var standardError: String {
        (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
    }

    /// `SIGTERM`, then waits for the exit (SIGKILL after `timeout` seconds); the exit status.
    @discardableResult func terminate(timeout: Double = 20) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        process.send(signal: SIGTERM)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.send(signal: SIGKILL) {
            process.waitUntilExit()
            return -1
        }
        return process.terminationStatus
    }

    struct ServeFailure: Error, CustomStringConvertible {
        var description: String
    }
}

/// A response as a test client received it: exact field lines and body.
struct Received: Sendable {
    var status: Int
    var fields: HeaderFields
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    subscript(name: String) -> String? { fields[name] }
    /// The `Cache-Status` member this proxy added (the last one, RFC 9211 §2).
    var cacheStatus: String? { fields.listMembers(named: "Cache-Status").last.map(String.init) }
    var isHit: Bool { cacheStatus?.contains("; hit") == true }
}

/// Sends requests with the proxy's own upstream client (fields passed exactly).
final class TestClient: Sendable {
    private let client: UpstreamClient

    /// A client trusting the system's store and the tests' CA (`https` origins of the tests).
    init() throws {
        var configuration = UpstreamClient.Configuration()
        configuration.extraTrustRoots = [try TestCertificates.shared().caFile]
        client = try UpstreamClient(configuration: configuration)
    }

    /// `method url` with `fields` (a `Host` is added from the URL when absent).
    func send(
        _ method: String = "GET", _ url: String, _ fields: [(String, String)] = [], body: [UInt8]? = nil
    ) throws -> Received {
        try requireOffPool("TestClient.send(\(method) \(url))")
        var lines = HeaderFields(fields)
        if !lines.contains("Host"),
            let host = URL(string: url).flatMap({ url in url.port.map { "\(url.host!):\($0)" } })
        {
            lines = HeaderFields([HeaderField(name: "Host", value: host)] + Array(lines))
        }
        let collector = ResponseCollector()
        try client.perform(UpstreamRequest(method: method, url: url, fields: lines, body: body), collector)
        let head = try #require(collector.heads.first)
        return Received(status: head.status, fields: head.fields, body: collector.body)
    }
}

/// A proxy a test talks to: in this process, or a real `httpcache serve`.
protocol RunningProxy: AnyObject, Sendable {
    var port: UInt16 { get }
    /// Where its store is; `nil` in memory.
    var cacheDirectory: String? { get }
    /// Stops it gracefully (responses in flight finish); its exit status, 0 for a clean stop.
    @discardableResult func terminate(timeout: Double) -> Int32
}

extension RunningProxy {
    var baseURL: String { "http://127.0.0.1:\(port)" }
    @discardableResult func terminate() -> Int32 { terminate(timeout: 20) }
}

extension ServeProcess: RunningProxy {}

/// The caching proxy in this process on port 0, as `httpcache serve` runs it, with a store
/// directory of its own, on a clock the test moves (so what it stores stays fresh however
/// long the machine takes between requests).
final class InProcessProxy: RunningProxy, @unchecked Sendable {
    private let proxy: CachingProxy
    private let directory = TemporaryDirectory("httpcache-proxy-test")
    let cacheDirectory: String?
    private let stopped = Locked(false)

    init(
        origin: String, clock: ManualClock = ManualClock(),
        configure: (inout CachingProxy.Configuration) -> Void = { _ in }
    ) throws {
        var configuration = CachingProxy.Configuration(mode: .reverse(origin: origin))
        configuration.port = 0
        configuration.cacheDirectory = directory.path + "/cache"
        configuration.clock = clock.function
        configuration.log = { _ in }
        configure(&configuration)
        cacheDirectory = configuration.cacheDirectory
        proxy = try CachingProxy(configuration)
        proxy.start()
    }

    deinit { terminate(timeout: 5) }

    var port: UInt16 { proxy.port }

    @discardableResult func terminate(timeout: Double) -> Int32 {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return 0 }
        proxy.shutdown(timeout: timeout)
        return 0
    }
}

/// A loopback origin, a running proxy in front of it (in process unless a real `httpcache
/// serve` is asked for) and a client.
final class ProxyHarness: @unchecked Sendable {
    let origin: LoopbackOrigin
    let proxy: any RunningProxy
    let client: TestClient
    /// The in-process proxy's clock (a real `httpcache serve` runs on the real one).
    let clock = ManualClock()

    /// The proxy in this process, configured by `configure`.
    init(configure: (inout CachingProxy.Configuration) -> Void = { _ in }) throws {
        origin = try LoopbackOrigin()
        proxy = try InProcessProxy(origin: origin.baseURL, clock: clock, configure: configure)
        client = try TestClient()
    }

    /// A real `httpcache serve ARGUMENTS` in front of the origin.
    init(process arguments: [String], memoryOnly: Bool = false) throws {
        origin = try LoopbackOrigin()
        proxy = try ServeProcess(["--origin", origin.baseURL] + arguments, memoryOnly: memoryOnly)
        client = try TestClient()
    }

    deinit {
        proxy.terminate()
        origin.stop()
    }

    /// GET (or `method`) `path` through the proxy.
    func get(
        _ path: String, _ fields: [(String, String)] = [], method: String = "GET", body: [UInt8]? = nil
    ) throws -> Received {
        try client.send(method, proxy.baseURL + path, fields, body: body)
    }

    /// Routes `path` to a fixed response.
    func serve(_ path: String, status: Int = 200, _ headers: [(String, String)], body: String = "body") {
        origin.route(path) { _ in LoopbackOrigin.Response(status: status, headers: headers, body: body) }
    }
}
#endif
