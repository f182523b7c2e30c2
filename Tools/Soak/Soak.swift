#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import Glibc

/// What the clients saw, summed over all of them.
struct Tally: Sendable {
    var requests = 0
    var hits = 0
    var revalidated = 0
    var forwarded = 0
    var notModified = 0
    var partial = 0
    var heads = 0
    var purges = 0
    var bigBodies = 0
    var verifiedBytes: Int64 = 0
    /// 502, 503 or 504 whose `Cache-Status` says the origin failed (`detail=origin-…`, or
    /// `detail=stale-not-allowed`: it failed and what is stored may not be served stale): the
    /// origin's wrong framing, passed on as it should be.
    var gatewayErrors = 0
    /// 502, 503 or 504 that does not blame the origin (a stored response that could not be
    /// read, a proxy that refused): a store fault answered as an error, never right.
    var storeErrors = 0
    /// PURGEs answered `500 … could not purge …: Redis …`: the shared store did not answer.
    var purgesRefused = 0
    /// The first such answer, for the summary.
    var purgeRefusal: String?
    /// Responses that were a late stray the proxy's request crossed on its connection (see
    /// ``SoakOrigin/Counters/strayFollowUps``), and the first of them, for the summary.
    var strayRaces = 0
    var strayRace: String?
    /// The connection ended before the response was complete: a cut the client can see.
    var visibleCuts = 0
    /// A complete-looking response whose bytes are not the version its ETag names, or that
    /// belongs to another URL: what must never happen.
    var mismatches = 0
    var stalls = 0
    var malformed = 0
    var unexpectedStatus = 0
    var problems: [String] = []

    mutating func add(_ other: Tally) {
        requests += other.requests
        hits += other.hits
        revalidated += other.revalidated
        forwarded += other.forwarded
        notModified += other.notModified
        partial += other.partial
        heads += other.heads
        purges += other.purges
        bigBodies += other.bigBodies
        verifiedBytes += other.verifiedBytes
        gatewayErrors += other.gatewayErrors
        storeErrors += other.storeErrors
        purgesRefused += other.purgesRefused
        purgeRefusal = purgeRefusal ?? other.purgeRefusal
        strayRaces += other.strayRaces
        strayRace = strayRace ?? other.strayRace
        visibleCuts += other.visibleCuts
        mismatches += other.mismatches
        stalls += other.stalls
        malformed += other.malformed
        unexpectedStatus += other.unexpectedStatus
        problems += other.problems.prefix(max(0, 20 - problems.count))
    }

    mutating func problem(_ text: String) {
        if problems.count < 20 { problems.append(text) }
    }
}

/// One request a worker makes, and what its answer is checked against.
struct SoakRequest {
    var index: Int
    var method = "GET"
    var fields: [(String, String)] = []
    var range: (first: Int64, last: Int64)?
    var target: String { "/r/\(index)" }
}

/// One client thread: requests on a keep-alive connection to one proxy, every response checked.
/// Over HTTP/1.1 one request at a time; over HTTP/2 (SoakHTTP2.swift) 1 to 4 at once, on
/// streams of one connection.
final class SoakWorker: @unchecked Sendable {
    let origin: SoakOrigin
    let proxyPort: UInt16
    let big: Bool
    /// Set: the worker speaks HTTP/2 over TLS to `proxyPort` (the proxy's TLS port).
    let http2: HTTP2Client.TLSOptions?
    /// Cleared to end the run early (a proxy exited).
    let running: Locked<Bool>
    private var connection: SoakConnection?
    var http2Client: HTTP2Client?
    var tally = Tally()
    /// Shared with the reporter, which reads it once a second.
    let published = Locked(Tally())

    init(origin: SoakOrigin, proxyPort: UInt16, big: Bool, http2: HTTP2Client.TLSOptions?, running: Locked<Bool>) {
        self.origin = origin
        self.proxyPort = proxyPort
        self.big = big
        self.http2 = http2
        self.running = running
    }

    func run(until deadline: Double) {
        var sincePublished = 0
        while MonotonicClock.seconds() < deadline && running.withLock({ $0 }) {
            if big {
                send([
                    request(
                        index: [99, 199].filter { $0 < origin.urls }.randomElement() ?? 0, kind: Int.random(in: 0..<70))
                ])
                usleep(200_000)
            } else {
                let count = http2 == nil ? 1 : Int.random(in: 1...4)
                send((0..<count).map { _ in request(index: smallIndex(), kind: Int.random(in: 0..<100)) })
            }
            sincePublished += 1
            if sincePublished >= 50 {
                let tally = tally
                published.withLock { $0 = tally }
                sincePublished = 0
            }
        }
        let tally = tally
        published.withLock { $0 = tally }
    }

    /// A small resource, the low indices more often (a hot set, as real traffic has).
    private func smallIndex() -> Int {
        while true {
            let index = Int(Double(origin.urls) * pow(Double.random(in: 0..<1), 2))
            if !SoakOrigin.isBig(index) { return index }
        }
    }

    /// One request of the kind `kind` picks (0..<100): GET, GET with no-cache, a conditional
    /// GET, HEAD, a range, or PURGE.
    private func request(index: Int, kind: Int) -> SoakRequest {
        var request = SoakRequest(index: index)
        switch kind {
        case 0..<70: break
        case 70..<78: request.fields = [("Cache-Control", "no-cache")]
        case 78..<84:
            let version = origin.currentVersion(index)
            request.fields = [("If-None-Match", SoakOrigin.etag(index, version &- UInt32.random(in: 0...1)))]
        case 84..<89: request.method = "HEAD"
        case 89..<97:
            let size = origin.size(index)
            let first = Int64.random(in: 0..<size)
            let last = min(size - 1, first + Int64.random(in: 0..<(64 << 10)))
            request.range = (first, last)
            request.fields = [("Range", "bytes=\(first)-\(last)")]
        default: request.method = "PURGE"
        }
        return request
    }

    private func send(_ requests: [SoakRequest]) {
        if http2 != nil {
            exchangeOverHTTP2(requests)
        } else {
            requests.forEach(exchange)
        }
    }

    /// One request over the worker's HTTP/1.1 connection, its answer checked.
    private func exchange(_ request: SoakRequest) {
        let (method, target) = (request.method, request.target)
        tally.requests += 1
        do {
            if connection == nil { connection = try SoakConnection(port: proxyPort, timeoutSeconds: 60) }
            guard let connection else { return }
            let fields = request.fields.map { "\($0.0): \($0.1)\r\n" }.joined()
            try connection.send("\(method) \(target) HTTP/1.1\r\nHost: soak.test\r\n\(fields)\r\n")
            let head = try connection.readHead()
            try check(head, request, body: HTTP1Body(connection: connection, head: head, method: method))
            if head.field("Connection")?.lowercased() == "close" { self.connection = nil }
        } catch {
            connection = nil
            switch error {
            case .closed: tally.visibleCuts += 1
            case .stalled:
                tally.stalls += 1
                tally.problem("\(method) \(target): nothing from the proxy for 60 s")
            case .malformed(let what):
                tally.malformed += 1
                tally.problem("\(method) \(target): \(what)")
            }
        }
    }

    /// Checks a response to `request`: its status, its ETag's URL and version, and its body
    /// byte for byte.
    func check(_ head: ResponseHead, _ request: SoakRequest, body: some CheckedBody) throws(ReadFailure) {
        let (method, index, range, target) = (request.method, request.index, request.range, request.target)
        let cacheStatus = head.field("Cache-Status") ?? ""
        if cacheStatus.contains("; hit") {
            tally.hits += 1
        } else if cacheStatus.contains("fwd=stale") {
            tally.revalidated += 1
        } else if !cacheStatus.isEmpty {
            tally.forwarded += 1
        }
        if method == "PURGE" {
            let text = try body.text()
            if head.status == 200 || head.status == 404 {
                tally.purges += 1
            } else if head.status == 500 && text.contains("could not purge") && text.contains("Redis") {
                // The shared store did not answer: the purge says it failed, as it must.
                tally.purgesRefused += 1
                if tally.purgeRefusal == nil { tally.purgeRefusal = text }
            } else {
                unexpected(head, method, target)
            }
            return
        }
        if [502, 503, 504].contains(head.status) {
            let text = try body.text()
            if cacheStatus.contains("detail=origin-") || cacheStatus.contains("detail=stale-not-allowed") {
                tally.gatewayErrors += 1
            } else {
                tally.storeErrors += 1
                tally.problem("\(method) \(target): \(text)")
            }
            return
        }
        guard [200, 206, 304].contains(head.status) else {
            try body.discard()
            unexpected(head, method, target)
            return
        }
        guard let etag = head.field("ETag"), let named = SoakOrigin.parse(etag: etag) else {
            try body.discard()
            mismatch("\(method) \(target): \(head.status) without an ETag of this origin")
            return
        }
        guard named.index == index else {
            try body.discard()
            let stray = head.field("Soak-Stray")
            // A late stray the proxy's next request on that connection crossed: the proxy found
            // the connection idle, then sent its request as the stray came (on a busy machine a
            // thread may wait milliseconds between the two). No HTTP/1.1 client can tell such
            // bytes from the response; the origin counts how often it happens (`strayFollowUps`).
            if let followUp = stray.flatMap(origin.followUp(ofStray:)) {
                tally.strayRaces += 1
                if tally.strayRace == nil {
                    tally.strayRace =
                        "\(method) \(target) on port \(proxyPort): /r/\(named.index)'s response, \(stray ?? "") (the "
                        + "request reached the origin \(String(format: "%.1f", followUp)) ms after it); Cache-Status "
                        + cacheStatus
                }
                return
            }
            mismatch(
                "\(method) \(target) on port \(proxyPort): got /r/\(named.index)'s response (ETag \(etag)"
                    + "\(stray.map { ", sent as \($0)" } ?? ""); Cache-Status \(cacheStatus))")
            return
        }
        guard named.version <= origin.currentVersion(index) else {
            mismatch("\(method) \(target): ETag \(etag) names a version the origin never served")
            return
        }
        let size = origin.size(index)
        switch (head.status, method) {
        case (304, _):
            tally.notModified += 1
        case (_, "HEAD"):
            tally.heads += 1
            if let length = head.field("Content-Length"), Int64(length) != size {
                mismatch("HEAD \(target): Content-Length \(length), the resource has \(size)")
            }
        case (206, _):
            tally.partial += 1
            let contentRange = head.field("Content-Range") ?? ""
            guard let range, contentRange == "bytes \(range.first)-\(range.last)/\(size)" else {
                try body.discard()
                mismatch("GET \(target) \(range.map { "\($0.first)-\($0.last)" } ?? ""): Content-Range \(contentRange)")
                return
            }
            try verifyBody(
                body, target: target, seed: SoakOrigin.seed(index, named.version), from: range.first,
                length: range.last - range.first + 1)
        default:
            if size == origin.bigSize { tally.bigBodies += 1 }
            try verifyBody(body, target: target, seed: SoakOrigin.seed(index, named.version), from: 0, length: size)
        }
    }

    private func verifyBody(
        _ body: some CheckedBody, target: String, seed: UInt64, from first: Int64, length: Int64
    ) throws(ReadFailure) {
        let comparison = try body.compare(seed: seed, from: first)
        let received = comparison.offset - first
        tally.verifiedBytes += received
        if received != length {
            mismatch("GET \(target): a complete-looking body of \(received) bytes, the version has \(length)")
        } else if let at = comparison.firstMismatch {
            mismatch("GET \(target): byte \(at) differs from the version its ETag names")
        }
    }

    func mismatch(_ text: String) {
        tally.mismatches += 1
        tally.problem(text)
    }

    private func unexpected(_ head: ResponseHead, _ method: String, _ target: String) {
        tally.unexpectedStatus += 1
        tally.problem("\(method) \(target): status \(head.status)")
    }
}

/// `httpcache serve` as a child process, its standard error written to a file (or to the soak's
/// own), its memory read from /proc.
final class ProxyProcess {
    let process = ChildProcess()
    let port: UInt16
    /// The TLS listener's port, when it was started with `--tls-listen`.
    let tlsPort: UInt16?
    /// Where its standard error (its log) goes; nil: to the soak's standard error.
    let logPath: String?

    init(executable: String, arguments: [String], logPath: String? = nil) throws {
        self.logPath = logPath
        var log: FileHandle?
        if let logPath {
            guard FileManager.default.createFile(atPath: logPath, contents: nil),
                let file = FileHandle(forWritingAtPath: logPath)
            else { throw SoakFailure("cannot create \(logPath) for a proxy's log") }
            log = file
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["serve", "--listen", "127.0.0.1:0"] + arguments
        let output = Pipe()
        process.standardOutput = output
        if let log { process.standardError = log }
        try process.run()
        try? log?.close()
        Self.register(process.processIdentifier)
        do {
            port = try Self.readPort(from: output.fileHandleForReading)
            tlsPort = arguments.contains("--tls-listen") ? try Self.readPort(from: output.fileHandleForReading) : nil
        } catch {
            process.terminate()
            process.waitUntilExit()
            throw error
        }
        // Whatever else it prints is read and dropped, so that a full pipe never stops it.
        Thread.detachNewThread {
            while !output.fileHandleForReading.readData(ofLength: 4096).isEmpty {}
        }
    }

    /// The children to stop when the soak itself is interrupted (SIGINT, SIGTERM); 0 for a free
    /// slot. A fixed array, which the signal handler can read.
    nonisolated(unsafe) private static let running: UnsafeMutablePointer<pid_t> = {
        let pids = UnsafeMutablePointer<pid_t>.allocate(capacity: 64)
        pids.initialize(repeating: 0, count: 64)
        return pids
    }()

    private static func register(_ pid: pid_t) {
        if let slot = (0..<64).first(where: { running[$0] == 0 }) { running[slot] = pid }
    }

    /// Stops the children when the soak is interrupted, so that no proxy outlives it (the
    /// Redis servers' watchdogs stop those within a second).
    static func stopOnInterrupt() {
        _ = running
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber) { _ in
                for slot in 0..<64 where ProxyProcess.running[slot] > 0 { kill(ProxyProcess.running[slot], SIGTERM) }
                _exit(130)
            }
        }
    }

    /// The port in the next line `httpcache serve` prints ("listening on http://127.0.0.1:PORT",
    /// then "listening on https://127.0.0.1:PORT" with a TLS listener).
    private static func readPort(from output: FileHandle) throws -> UInt16 {
        var line = Data()
        while !line.contains(0x0A) {
            let byte = output.readData(ofLength: 1)
            guard !byte.isEmpty else { throw SoakFailure("httpcache serve exited before it listened") }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.lastIndex(of: ":"),
            let port = UInt16(text[text.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw SoakFailure("httpcache serve printed \(text.debugDescription), not its address") }
        return port
    }

    /// VmRSS or VmHWM (peak) from /proc/PID/status, in bytes.
    func memory(_ field: String) -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kilobytes = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int64(kilobytes).map { $0 * 1024 }
        }
        return nil
    }

    /// The lines of its log so far (none when it goes to the soak's standard error).
    var logLines: [Substring] {
        let text = logPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
        return text.split(separator: "\n")
    }

    /// How it ended ("exit status 1", "signal 6"); nil while it runs.
    var exitDescription: String? {
        guard !process.isRunning else { return nil }
        return process.terminationReason == .uncaughtSignal
            ? "killed by signal \(process.terminationStatus)" : "exit status \(process.terminationStatus)"
    }

    /// Its metrics page (`GET /_httpcache/metrics`): each sample's name and value; empty when
    /// it does not answer.
    func metrics() -> [String: Double] {
        var page: [UInt8] = []
        do {
            let connection = try SoakConnection(port: port, timeoutSeconds: 10)
            try connection.send("GET /_httpcache/metrics HTTP/1.1\r\nHost: soak.test\r\nConnection: close\r\n\r\n")
            let head = try connection.readHead()
            try connection.readBody(head, method: "GET") { page += $0 }
        } catch {
            return [:]
        }
        var samples: [String: Double] = [:]
        for line in String(decoding: page, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let words = line.split(separator: " ")
            if words.count == 2, let value = Double(words[1]) { samples[String(words[0])] = value }
        }
        return samples
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        let pid = process.processIdentifier
        if let slot = (0..<64).first(where: { Self.running[$0] == pid }) { Self.running[slot] = 0 }
    }
}

struct SoakFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
#endif
