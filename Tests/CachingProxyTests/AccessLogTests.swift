#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// The access log: one record per request once its response ended (bytes, duration, whether
/// it completed, origin time) over HTTP/1.1 and HTTP/2, and its three formats, the JSON one
/// read back by Python's parser.
@Suite("httpcache serve: access log records and formats", .timeLimit(.minutes(5)))
struct AccessLogTests {
    /// A proxy in this process in front of a fresh origin, keeping every record.
    final class Setup: @unchecked Sendable {
        let origin: LoopbackOrigin
        let proxy: InProcessProxy
        let records = Locked<[AccessLogRecord]>([])

        init() throws {
            origin = try LoopbackOrigin()
            let records = records
            proxy = try InProcessProxy(origin: origin.baseURL) {
                $0.accessLog = { record in records.withLock { $0.append(record) } }
            }
        }

        deinit { origin.stop() }

        /// The records for `target`, once there are `count` of them (10 s at most).
        func records(_ target: String, count: Int = 1) -> [AccessLogRecord] {
            let deadline = MonotonicClock.seconds() + 10
            while true {
                let found = records.withLock { $0 }.filter { $0.target == target }
                if found.count >= count || MonotonicClock.seconds() > deadline { return found }
                usleep(10_000)
            }
        }
    }

    /// Lines parsed by Python's `json.loads`, one object each, printed back as JSON with sorted
    /// keys and ASCII only: a parser that is not ours.
    static func pythonParsed(_ lines: [String]) throws -> [[String: Any]] {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let script =
            "import sys, json\nfor line in sys.stdin.read().split('\\n'):\n    if line:\n"
            + "        print(json.dumps(json.loads(line), sort_keys=True))\n"
        process.arguments = ["-c", script]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(lines.map { $0 + "\n" }.joined().utf8))
        try input.fileHandleForWriting.close()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "python3 could not parse the lines: \(complaint)")
        return try String(decoding: printed, as: UTF8.self).split(separator: "\n").map { line in
            try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    static let sample = AccessLogRecord(
        time: 1_796_205_600.25, client: "192.0.2.7", method: "GET", target: "/a.css?v=1", status: 200, bodyBytes: 512,
        duration: 0.00125, cacheStatus: "httpcache; hit", userAgent: "curl/8.5.0")

    @Test(
        "The default format is the one before formats existed: TIME CLIENT METHOD TARGET PROTOCOL STATUS \"CACHE-STATUS\""
    )
    func defaultFormat() {
        var record = Self.sample
        record.clientIsLoopback = true
        #expect(
            record.formatted(.default) == "2026-12-02T10:00:00Z loopback GET /a.css?v=1 HTTP/1.1 200 \"httpcache; hit\""
        )
        record.clientIsLoopback = false
        record.cacheStatus = nil
        record.version = "2"
        record.isTLS = true
        #expect(record.formatted(.default) == "2026-12-02T10:00:00Z remote GET /a.css?v=1 HTTP/2+TLS 200 -")
    }

    @Test(
        "combined is NCSA combined with Cache-Status appended in quotes; quoted values escape \" \\ and control bytes as nginx does"
    )
    func combinedFormat() {
        #expect(
            Self.sample.formatted(.combined)
                == "192.0.2.7 - - [02/Dec/2026:10:00:00 +0000] \"GET /a.css?v=1 HTTP/1.1\" 200 512 \"-\" \"curl/8.5.0\" \"httpcache; hit\""
        )
        var record = Self.sample
        record.version = "2"
        record.bodyBytes = 0
        record.cacheStatus = nil
        record.referer = "http://a.test/\"x\""
        record.userAgent = "a\\b\nc"
        #expect(
            record.formatted(.combined)
                == "192.0.2.7 - - [02/Dec/2026:10:00:00 +0000] \"GET /a.css?v=1 HTTP/2.0\" 200 - \"http://a.test/\\x22x\\x22\" \"a\\x5cb\\x0ac\" \"-\""
        )
    }

    @Test(
        "json: one object per line that Python's json.loads reads back whole, whatever the strings hold (RFC 8259 §7)")
    func jsonFormat() throws {
        var hostile = Self.sample
        hostile.target = "/q?a=\"b\"&c=\\d\ne\u{01}\u{7F}é\u{2028}"
        hostile.userAgent = nil
        hostile.referer = "\u{FFFD}"
        hostile.originTime = 0.5
        hostile.completed = false
        let lines = [Self.sample, hostile].map { $0.formatted(.json) }
        #expect(lines.allSatisfy { !$0.contains("\n") })
        let objects = try Self.pythonParsed(lines)
        try #require(objects.count == 2)
        let first = objects[0]
        #expect(first["time"] as? String == "2026-12-02T10:00:00.250Z")
        #expect(first["client"] as? String == "192.0.2.7")
        #expect(first["method"] as? String == "GET")
        #expect(first["protocol"] as? String == "HTTP/1.1")
        #expect(first["status"] as? Int == 200)
        #expect(first["bytes"] as? Int == 512)
        #expect(first["duration"] as? Double == 0.00125)
        #expect(first["completed"] as? Bool == true)
        #expect(first["cache_status"] as? String == "httpcache; hit")
        #expect(first["origin_time"] is NSNull)
        #expect(first["user_agent"] as? String == "curl/8.5.0")
        #expect(first["referer"] is NSNull)
        let second = objects[1]
        #expect(second["target"] as? String == hostile.target)
        #expect(second["referer"] as? String == "\u{FFFD}")
        #expect(second["origin_time"] as? Double == 0.5)
        #expect(second["completed"] as? Bool == false)
        #expect(second["user_agent"] is NSNull)
    }

    @Test(
        "HTTP/1.1: a miss, a hit, a HEAD and a streamed body each make one record with their bytes, duration and origin time"
    )
    func http1Records() async throws {
        try await offPool {
            let setup = try Setup()
            let body = [UInt8](repeating: 0x61, count: 3000)
            setup.origin.route("/r") { _ in .init(headers: [("Cache-Control", "max-age=600")], body: body) }
            setup.origin.route("/chunked") { _ in .init(body: body, chunked: true) }
            let client = try TestClient()
            let url = setup.proxy.baseURL
            _ = try client.send("GET", url + "/r", [("User-Agent", "tester/1"), ("Referer", "http://a.test/")])
            _ = try client.send("GET", url + "/r")
            _ = try client.send("HEAD", url + "/r")
            _ = try client.send("GET", url + "/chunked")
            let records = setup.records("/r", count: 3)
            try #require(records.count == 3, "\(records)")
            let (miss, hit, head) = (records[0], records[1], records[2])
            #expect(miss.status == 200 && miss.bodyBytes == 3000 && miss.completed)
            #expect(miss.cacheStatus?.contains("fwd=uri-miss") == true)
            #expect(miss.originTime.map { $0 > 0 && $0 <= miss.duration } == true, "\(miss)")
            #expect(miss.userAgent == "tester/1" && miss.referer == "http://a.test/")
            #expect(miss.client == "127.0.0.1" && miss.clientIsLoopback && miss.protocolName == "HTTP/1.1")
            #expect(
                hit.bodyBytes == 3000 && hit.completed && hit.originTime == nil
                    && hit.cacheStatus?.contains("hit") == true)
            #expect(head.method == "HEAD" && head.bodyBytes == 0 && head.completed)
            #expect([miss, hit, head].allSatisfy { $0.duration >= 0 && $0.duration < 10 })
            let streamed = try #require(setup.records("/chunked").first)
            #expect(streamed.bodyBytes == 3000 && streamed.completed, "\(streamed)")
        }
    }

    @Test(
        "HTTP/1.1: a response the origin cuts off mid-body is recorded as not completed, with the bytes that went out")
    func http1CutOff() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/cut") { _ in
                .init(body: [UInt8](repeating: 0x62, count: 5000), cutAfterBodyBytes: 1000)
            }
            _ = try? TestClient().send("GET", setup.proxy.baseURL + "/cut")
            let record = try #require(setup.records("/cut").first)
            #expect(record.status == 200 && !record.completed, "\(record)")
            #expect(record.bodyBytes <= 1000, "\(record)")
        }
    }

    @Test(
        "HTTP/2: streams make records like HTTP/1.1 requests; a stream reset when the origin cuts off is not completed")
    func http2Records() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/h2") { _ in
                .init(headers: [("Cache-Control", "max-age=600")], body: [UInt8](repeating: 0x63, count: 20_000))
            }
            setup.origin.route("/h2cut") { _ in
                .init(body: [UInt8](repeating: 0x64, count: 50_000), cutAfterBodyBytes: 100)
            }
            let client = try HTTP2Client(port: setup.proxy.port)
            let responses = client.send([
                HTTP2Request("GET", "/h2"), HTTP2Request("GET", "/h2", fields: [("user-agent", "h2 tester")]),
            ])
            #expect(responses.map { $0.status } == [200, 200])
            let cut = try HTTP2Client(port: setup.proxy.port).send([HTTP2Request("GET", "/h2cut")])
            if case .reset = cut.first?.end {} else { Issue.record("the cut stream was not reset: \(cut)") }
            let records = setup.records("/h2", count: 2)
            try #require(records.count == 2)
            #expect(records.allSatisfy { $0.version == "2" && $0.protocolName == "HTTP/2" && $0.bodyBytes == 20_000 })
            #expect(records.allSatisfy { $0.completed })
            #expect(records.contains { $0.userAgent == "h2 tester" })
            let reset = try #require(setup.records("/h2cut").first)
            #expect(!reset.completed && reset.bodyBytes <= 100, "\(reset)")
        }
    }

    @Test(
        "Over the wire, a User-Agent with quotes, a backslash and a byte that is not UTF-8 still makes one JSON line Python reads"
    )
    func hostileFieldsOverTheWire() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/w") { _ in .init(body: "w") }
            let client = try RawHTTPClient(port: setup.proxy.port)
            var request = Array("GET /w?x=%22y%22 HTTP/1.1\r\nHost: a\r\nUser-Agent: say \"hi\" \\ ".utf8)
            request += [0xFF, 0xFE] + Array("\r\nConnection: close\r\n\r\n".utf8)
            try client.send(request)
            #expect(try client.readResponse().status == 200)
            let record = try #require(setup.records("/w?x=%22y%22").first)
            let objects = try Self.pythonParsed([record.formatted(.json)])
            let userAgent = try #require(objects.first?["user_agent"] as? String)
            #expect(userAgent.hasPrefix("say \"hi\" \\ "), "\(userAgent)")
            #expect(
                userAgent.unicodeScalars.contains("\u{FFFD}"), "bytes that are not UTF-8 become U+FFFD: \(userAgent)")
        }
    }

    @Test(
        "A request the server refuses itself (RFC 9112 §3, §5: malformed, too long) gets a line with its status and bytes, what was read of it or -, one per request"
    )
    func refusedRequestsAreLogged() async throws {
        try await offPool {
            let setup = try Setup()
            // Its request-line read, a field line malformed (RFC 9112 §5.1): 400 for GET /bad.
            let malformed = try RawHTTPClient(port: setup.proxy.port)
            try malformed.send("GET /bad HTTP/1.1\r\nHost: a\r\nNo Colon Here\r\n\r\n")
            let answer = try malformed.readResponse()
            #expect(answer.status == 400)
            let record = try #require(setup.records("/bad").first)
            #expect(record.method == "GET")
            #expect(record.status == 400)
            #expect(record.bodyBytes == Int64(answer.body.count))
            #expect(record.clientIsLoopback)
            // Nothing of the request-line read: five in a row, each its own line, though the
            // error log writes one a second.
            for _ in 0..<5 {
                let garbage = try RawHTTPClient(port: setup.proxy.port)
                try garbage.send([0x16, 0x03, 0x01, 0x00, 0x05])
                #expect(try garbage.readResponse().status == 400)
            }
            let unread = setup.records("-", count: 5)
            #expect(unread.count == 5)
            #expect(unread.allSatisfy { $0.method == "-" && $0.status == 400 && $0.bodyBytes > 0 })
            #expect(unread.first?.formatted(.default).hasSuffix(" loopback - - HTTP/1.1 400 -") == true)
        }
    }
}
#endif
