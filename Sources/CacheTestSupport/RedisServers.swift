import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` (Debian's `redis-server` package) on a free loopback port with a
/// temporary directory, for the tests of the Redis store: started, killed, restarted and
/// stopped by the test. A watchdog kills it when the test process dies first.
public final class RedisServer: @unchecked Sendable {
    /// Its port on 127.0.0.1.
    public let port: Int
    /// Its working directory (cluster state file).
    public let directory: TemporaryDirectory
    private let arguments: [String]
    private let process = Locked<ChildProcess?>(nil)

    /// Why a Redis server could not be started.
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts a server with `arguments` added to the defaults (no persistence, loopback only).
    public init(arguments: [String] = []) throws {
        port = try Self.freePort()
        directory = TemporaryDirectory("redis")
        self.arguments = arguments
        try start()
    }

    deinit { stop() }

    /// `host:port` for `--redis-cluster`, `redis://127.0.0.1:port` for `--redis`.
    public var address: String { "127.0.0.1:\(port)" }
    public var url: String { "redis://127.0.0.1:\(port)" }

    /// Starts it again on the same port (after ``kill()``). Blocks until it answers: call it
    /// off the cooperative pool (``offPool(_:)``), as every method here that throws.
    public func start() throws {
        try requireOffPool("RedisServer.start()")
        let executable = try Self.find("redis-server")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments =
            [
                "--port", String(port), "--bind", "127.0.0.1", "--dir", directory.path, "--save", "",
                "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
            ] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        Self.watch(process.processIdentifier, directory: directory.path)
        self.process.withLock { $0 = process }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            // A server that asks for a password answers NOAUTH: it is up all the same.
            if let answer = try? cli(["PING"]), answer.contains("PONG") || answer.contains("NOAUTH") { return }
            usleep(20_000)
        }
        throw StartFailure(description: "redis-server on port \(port) did not answer PING within 10 s")
    }

    /// SIGKILL: it dies at once, as in a crash.
    public func kill() {
        guard let running = process.withLock({ $0 }) else { return }
        running.send(signal: SIGKILL)
        running.waitUntilExit()
        process.withLock { $0 = nil }
    }

    /// Stops it (SIGKILL: nothing it holds matters).
    public func stop() { kill() }

    /// Runs `redis-cli -p PORT arguments` and returns its output.
    @discardableResult
    public func cli(_ arguments: [String]) throws -> String {
        try requireOffPool("RedisServer.cli(\(arguments.prefix(2).joined(separator: " ")))")
        return try Self.run(try Self.find("redis-cli"), ["-h", "127.0.0.1", "-p", String(port)] + arguments)
    }

    /// Sends one command whose arguments may hold any bytes (NUL too, which `redis-cli`'s
    /// argument list cannot carry) and returns the reply as RESP text (`+OK`, `:1`, `$3 abc`,
    /// `-ERR …`); arrays are not parsed. For tests that damage what a store wrote.
    @discardableResult
    public func command(_ arguments: [[UInt8]]) throws -> String {
        try requireOffPool("RedisServer.command(\(arguments.first.map { String(decoding: $0, as: UTF8.self) } ?? ""))")
        let fd: Int32
        switch Socket.connected(host: "127.0.0.1", port: UInt16(port), timeout: 5) {
        case .success(let connected): fd = connected
        case .failure(let failure):
            throw StartFailure(description: "cannot connect to redis-server on port \(port): \(failure)")
        }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments { request += Array("$\(argument.count)\r\n".utf8) + argument + [13, 10] }
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw StartFailure(description: "could not send a command to redis-server on port \(port)")
        }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !Self.isComplete(reply) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw StartFailure(description: "redis-server on port \(port) did not answer") }
            reply += buffer[0..<count]
        }
        return String(decoding: reply, as: UTF8.self).replacingOccurrences(of: "\r\n", with: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    /// The same, with text arguments.
    @discardableResult
    public func command(_ arguments: String...) throws -> String { try command(arguments.map { Array($0.utf8) }) }

    /// Whether `reply` holds one whole simple reply or bulk string.
    private static func isComplete(_ reply: [UInt8]) -> Bool {
        guard let end = reply.firstIndex(of: 10) else { return false }
        guard reply.first == UInt8(ascii: "$"), let length = Int(String(decoding: reply[1..<(end - 1)], as: UTF8.self)),
            length >= 0
        else { return true }
        return reply.count >= end + 1 + length + 2
    }

    /// Whether Debian's `redis-server` is installed (`scripts/setup` installs it).
    public static var isInstalled: Bool { (try? find("redis-server")) != nil }

    static func find(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin", "/usr/local/bin"] {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw StartFailure(description: "\(name) is not installed; run scripts/setup (it installs redis-server)")
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Kills `pid` when this process is gone (a test runner killed mid-run leaves no server),
    /// and then removes `directory`: a server shared by the tests of a process
    /// (``shared()``, ``RedisCluster/shared()``) is never released, so only this cleans up its
    /// directory (cluster state, a replica's RDB). First the children it forked (an RDB save
    /// for a replica), which would otherwise write on into the directory.
    private static func watch(_ pid: Int32, directory: String) {
        let watchdog = ChildProcess()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        watchdog.arguments = [
            "-c",
            """
            while kill -0 \(getpid()) 2>/dev/null && kill -0 \(pid) 2>/dev/null; do sleep 1; done
            kill -0 \(getpid()) 2>/dev/null && exit 0
            pkill -9 -P \(pid) 2>/dev/null; kill -9 \(pid) 2>/dev/null
            i=0; while kill -0 \(pid) 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
            rm -rf '\(directory)'
            """,
        ]
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
    }

    /// A port free on 127.0.0.1, whose cluster bus port (port + 10000) is free too.
    static func freePort() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<30_000)
            if isFree(port) && isFree(port + 10_000) { return port }
        }
        throw StartFailure(description: "no free loopback port pair found for redis-server")
    }

    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// One standalone server for the tests of this process that only read and write (each
    /// with a key prefix of its own); tests that kill or slow Redis start their own.
    public static func shared() throws -> RedisServer {
        // Even when it runs: the first caller starts it with the lock held, and others wait.
        try requireOffPool("RedisServer.shared()")
        return try sharedServer.withLock { server in
            if let server { return server }
            let started = try RedisServer()
            server = started
            return started
        }
    }

    private static let sharedServer = Locked<RedisServer?>(nil)
}

/// A Redis Cluster of three masters with one replica each (`redis-cli --cluster create`), on
/// free loopback ports.
public final class RedisCluster: @unchecked Sendable {
    /// The six servers; which are masters changes with failovers.
    public let servers: [RedisServer]

    /// Starts the six servers, each with `arguments` added (e.g. `--maxmemory`), and creates
    /// the cluster.
    public init(arguments: [String] = []) throws {
        try requireOffPool("RedisCluster()")
        var servers: [RedisServer] = []
        for _ in 0..<6 {
            servers.append(
                try RedisServer(
                    arguments: [
                        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
                        "1000", "--cluster-replica-validity-factor", "0",
                    ] + arguments))
        }
        self.servers = servers
        let output = try servers[0].cli(
            ["--cluster", "create"] + servers.map(\.address) + ["--cluster-replicas", "1", "--cluster-yes"])
        guard output.contains("All 16384 slots covered") else {
            throw RedisServer.StartFailure(description: "redis-cli --cluster create failed:\n\(output)")
        }
        try waitUntilHealthy()
    }

    /// `HOST:PORT,...` of every server, for `--redis-cluster`.
    public var seeds: String { servers.map(\.address).joined(separator: ",") }

    /// Waits until every running server says `cluster_state:ok` (after creation or a failover).
    public func waitUntilHealthy(timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var healthy = true
            for server in servers {
                guard let info = try? server.cli(["CLUSTER", "INFO"]) else { continue }
                if info.isEmpty || info.contains("Connection refused") { continue }
                if !info.contains("cluster_state:ok") { healthy = false }
            }
            if healthy { return }
            usleep(100_000)
        }
        throw RedisServer.StartFailure(description: "the Redis Cluster did not reach cluster_state:ok in \(timeout) s")
    }

    /// The server that is master for `key`'s slot now.
    public func master(of key: String) throws -> RedisServer {
        let slot = try servers[0].cli(["CLUSTER", "KEYSLOT", key]).trimmingCharacters(in: .whitespacesAndNewlines)
        for server in servers {
            guard let role = try? server.cli(["ROLE"]), role.hasPrefix("master") else { continue }
            let nodes = try server.cli(["CLUSTER", "NODES"])
            for line in nodes.split(separator: "\n") where line.contains("myself") {
                for range in line.split(separator: " ").dropFirst(8) {
                    let bounds = range.split(separator: "-").compactMap { Int($0) }
                    guard let low = bounds.first, let value = Int(slot) else { continue }
                    if value >= low && value <= (bounds.last ?? low) { return server }
                }
            }
        }
        throw RedisServer.StartFailure(description: "no master holds the slot of \(key)")
    }

    /// The one cluster the tests of this process share (each with a key prefix of its own).
    public static func shared() throws -> RedisCluster {
        try requireOffPool("RedisCluster.shared()")
        return try sharedCluster.withLock { cluster in
            if let cluster { return cluster }
            let started = try RedisCluster()
            cluster = started
            return started
        }
    }

    private static let sharedCluster = Locked<RedisCluster?>(nil)
}
