import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The generated bodies and range answers of `LoopbackOrigin` the download tests rely on, over
/// a real URLSession.
@Suite("LoopbackOrigin generated resources", .timeLimit(.minutes(1)))
struct GeneratedResourceTests {
    static let resource = LoopbackOrigin.GeneratedResource(
        length: 300_000, seed: 42, etag: "\"g1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")

    /// Sends a GET for `/r` with `headers` and returns the status, fields and body.
    static func fetch(
        _ origin: LoopbackOrigin, _ headers: [String: String] = [:]
    ) async throws -> (status: Int, fields: [AnyHashable: Any], body: [UInt8]) {
        var request = URLRequest(url: origin.url("/r"))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let response = try await URLSessionTransport().send(request)
        var body: [UInt8] = []
        for try await chunk in response.body { body += chunk }
        return (response.response.statusCode, response.response.allHeaderFields, body)
    }

    static func origin(chunked: Bool = false) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.route("/r") { request in
            var response = resource.response(to: request)
            response.chunked = chunked
            return response
        }
        return origin
    }

    @Test("byte(at:), fill and bytes agree at any offset, and differ between seeds")
    func generatorIsConsistent() {
        let whole = LoopbackOrigin.GeneratedBody.bytes(seed: 9, count: 1000)
        for start in [0, 1, 7, 8, 13, 500] {
            let part = LoopbackOrigin.GeneratedBody.bytes(seed: 9, from: Int64(start), count: 300)
            #expect(part == Array(whole[start..<start + 300]), "from \(start)")
        }
        #expect((0..<1000).allSatisfy { LoopbackOrigin.GeneratedBody.byte(at: Int64($0), seed: 9) == whole[$0] })
        #expect(LoopbackOrigin.GeneratedBody.bytes(seed: 10, count: 1000) != whole)
        #expect(Set(whole).count > 200)  // not a short repeating pattern
        #expect(LoopbackOrigin.GeneratedBody(seed: 9, offset: 100, length: 50).bytes == Array(whole[100..<150]))
    }

    @Test("firstMismatch finds a changed byte, a short file and a long file")
    func firstMismatch() throws {
        let directory = TemporaryDirectory("generated-test")
        let path = directory.path + "/f"
        var bytes = LoopbackOrigin.GeneratedBody.bytes(seed: 3, count: 3_000_000)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_000) == nil)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 4, length: 3_000_000) == 0)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_001) == 3_000_000)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 2_000_000) == 2_000_000)
        bytes[2_500_123] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_000) == 2_500_123)
        #expect(throws: LoopbackOrigin.GeneratedBody.FileError.self) {
            try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: directory.path + "/none", seed: 3, length: 1)
        }
    }

    @Test("The whole resource, with Content-Length or chunked")
    func wholeResource() async throws {
        for chunked in [false, true] {
            let origin = try Self.origin(chunked: chunked)
            let (status, fields, body) = try await Self.fetch(origin)
            #expect(status == 200)
            #expect(body == Self.resource.bytes)
            #expect(fields["Accept-Ranges"] as? String == "bytes")
            #expect(fields["Etag"] as? String ?? fields["ETag"] as? String == "\"g1\"")
            #expect((fields["Content-Length"] as? String) == (chunked ? nil : "300000"))
            origin.stop()
        }
    }

    @Test(
        "Range answers: 206 with Content-Range, 416, and the whole 200 when If-Range does not match",
        arguments: [
            (range: "bytes=1000-", ifRange: nil, status: 206, first: 1000, last: 299_999),
            (range: "bytes=10-19", ifRange: nil, status: 206, first: 10, last: 19),
            (range: "bytes=-5", ifRange: nil, status: 206, first: 299_995, last: 299_999),
            (range: "bytes=299999-400000", ifRange: "\"g1\"", status: 206, first: 299_999, last: 299_999),
            (range: "bytes=5-", ifRange: "Sun, 06 Nov 1994 08:49:37 GMT", status: 206, first: 5, last: 299_999),
            (range: "bytes=5-", ifRange: "\"g0\"", status: 200, first: 0, last: 299_999),
            (range: "bytes=5-", ifRange: "W/\"g1\"", status: 200, first: 0, last: 299_999),
            (range: "bytes=0-1, 5-6", ifRange: nil, status: 200, first: 0, last: 299_999),
            (range: "items=0-1", ifRange: nil, status: 200, first: 0, last: 299_999),
            (range: "bytes=300000-", ifRange: nil, status: 416, first: 0, last: -1),
        ] as [(range: String, ifRange: String?, status: Int, first: Int, last: Int)])
    func rangeAnswers(range: String, ifRange: String?, status: Int, first: Int, last: Int) async throws {
        let origin = try Self.origin()
        var headers = ["Range": range]
        if let ifRange { headers["If-Range"] = ifRange }
        let (received, fields, body) = try await Self.fetch(origin, headers)
        #expect(received == status)
        switch status {
        case 206:
            #expect(fields["Content-Range"] as? String == "bytes \(first)-\(last)/300000")
            #expect(body == Array(Self.resource.bytes[first...last]))
        case 416:
            #expect(fields["Content-Range"] as? String == "bytes */300000")
        default:
            #expect(fields["Content-Range"] == nil)
            #expect(body == Self.resource.bytes)
        }
        origin.stop()
    }

    @Test("pauseAfterBodyBytes sends that much, then nothing until the connection goes away", arguments: [true, false])
    func pauseStallsTheBody(generated: Bool) async throws {
        let origin = try LoopbackOrigin()
        origin.route("/p") { _ in
            if generated { return .init(generatedLength: 100_000, seed: 1, pauseAfterBodyBytes: 30_000) }
            var response = LoopbackOrigin.Response(body: LoopbackOrigin.GeneratedBody.bytes(seed: 1, count: 100_000))
            response.pauseAfterBodyBytes = 30_000
            return response
        }
        let response = try await URLSessionTransport().send(URLRequest(url: origin.url("/p")))
        #expect(response.response.expectedContentLength == 100_000)
        let received = Locked<[UInt8]>([])
        let reader = Task {
            for try await chunk in response.body { received.withLock { $0 += chunk } }
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while received.withLock({ $0.count }) < 30_000, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(received.withLock { $0 } == LoopbackOrigin.GeneratedBody.bytes(seed: 1, count: 30_000))
        origin.stop()  // shuts the stalled connection down: the body ends with an error
        let result = await reader.result
        #expect(throws: (any Error).self) { try result.get() }
    }
}
