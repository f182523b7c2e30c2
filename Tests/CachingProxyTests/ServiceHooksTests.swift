#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// What `httpcache serve` needs of the proxy to run as a service: a hook between binding and
/// opening the store (`--user`), and a liveness check of every event loop (the watchdog).
@Suite(.timeLimit(.minutes(2)))
struct ServiceHooksTests {
    let origin: LoopbackOrigin

    init() throws { origin = try LoopbackOrigin() }

    func configuration(loops: Int = 3) -> CachingProxy.Configuration {
        var configuration = CachingProxy.Configuration(mode: .reverse(origin: origin.baseURL))
        configuration.port = 0
        configuration.loops = loops
        configuration.log = { _ in }
        return configuration
    }

    /// A port free now.
    func freePort() throws -> UInt16 {
        let listener = try Socket.listening(on: try #require(SocketAddress(host: "127.0.0.1", port: 0)), backlog: 1)
        close(listener.fd)
        return listener.port
    }

    func accepts(_ port: UInt16) -> Bool {
        guard case .success(let fd) = Socket.connected(host: "127.0.0.1", port: port, timeout: 2) else { return false }
        close(fd)
        return true
    }

    @Test(
        "afterListening runs once the port is bound and before the store opens; its error is the proxy's, the port closed"
    )
    func afterListeningSeesTheBoundPort() async throws {
        struct Refused: Error {}
        try await offPool {
            let directory = TemporaryDirectory("service-hooks")
            var configuration = configuration()
            configuration.port = try freePort()
            configuration.cacheDirectory = directory.path + "/cache"
            let port = configuration.port
            let seen = Locked<(listening: Bool, store: Bool)?>(nil)
            configuration.afterListening = {
                seen.withLock {
                    $0 = (accepts(port), FileManager.default.fileExists(atPath: directory.path + "/cache"))
                }
                throw Refused()
            }
            #expect(throws: Refused.self) { try CachingProxy(configuration) }
            #expect(
                seen.withLock { $0 }.map { $0.listening && !$0.store } == true,
                "\(String(describing: seen.withLock { $0 }))")
            #expect(!accepts(port), "the listener is closed with the failed start")
        }
    }

    @Test("A replaced admin token is the one a client off loopback must send from then on; nil leaves loopback only")
    func adminTokenIsReplaced() throws {
        var configuration = configuration()
        configuration.adminToken = "old"
        let handler = try ProxyHandler(configuration)
        func allowed(_ token: String?, loopback: Bool = false) -> Bool {
            var fields: HeaderFields = [:]
            if let token { fields[.authorization] = "Bearer \(token)" }
            return handler.mayAdminister(
                ServerRequest(method: "PURGE", target: "/a", fields: fields, peerIsLoopback: loopback))
        }
        #expect(allowed("old") && !allowed("new") && !allowed(nil))
        handler.adminToken.withLock { $0 = "new" }
        #expect(allowed("new") && !allowed("old"))
        handler.adminToken.withLock { $0 = nil }
        #expect(!allowed("new") && !allowed(nil) && allowed(nil, loopback: true))
    }

    @Test("whenLoopsAnswer is called once every loop has taken a turn; never before start or after shutdown")
    func loopsAnswer() async throws {
        try await offPool {
            let proxy = try CachingProxy(configuration(loops: 3))
            let answers = Locked(0)
            proxy.whenLoopsAnswer { answers.withLock { $0 += 1 } }
            usleep(200_000)
            #expect(answers.withLock { $0 } == 0, "no loop runs before start")
            proxy.start()
            for _ in 0..<3 { proxy.whenLoopsAnswer { answers.withLock { $0 += 1 } } }
            let deadline = MonotonicClock.seconds() + 5
            while answers.withLock({ $0 }) < 3, MonotonicClock.seconds() < deadline { usleep(10_000) }
            usleep(100_000)
            #expect(answers.withLock { $0 } == 3, "one answer per call, not per loop")
            proxy.shutdown(timeout: 1)
            proxy.whenLoopsAnswer { answers.withLock { $0 += 1 } }
            usleep(200_000)
            #expect(answers.withLock { $0 } == 3, "stopped loops do not answer")
        }
    }
}
#endif
