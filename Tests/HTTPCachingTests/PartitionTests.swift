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

/// Cache partitions (`Configuration.partition`, `FetchRequest.partition`, the
/// `HTTPCache-Partition` field of a `URLRequest`) and `Clear-Site-Data`.
@Suite("HTTPCache: partitions and Clear-Site-Data")
struct PartitionTests {
    @Test(
        "RFC 9111 §2: a response stored in one partition is served in it, never in another or in none, and the reverse",
        arguments: ["plain", "vary", "no-vary-search"], [["A", "B", nil], [nil, "A", "B"]] as [[String?]])
    func partitionsAreApart(kind: String, order: [String?]) async throws {
        let h = try Harness()
        var fields = [("Cache-Control", "max-age=600")]
        if kind == "vary" { fields.append(("Vary", "Accept-Language")) }
        if kind == "no-vary-search" { fields.append(("No-Vary-Search", "params=(\"utm\")")) }
        h.origin.route("/r") { [fields] request in
            LoopbackOrigin.Response(headers: fields, body: request.header("X-Who") ?? "")
        }
        let path = kind == "no-vary-search" ? "/r?id=1&utm=a" : "/r"
        let same = kind == "no-vary-search" ? "/r?id=1&utm=b" : "/r"
        let language = kind == "vary" ? ["Accept-Language": "en"] : [:]
        // Stored in the first partition, then asked for in the others (each a miss, stored
        // there), then again in each: its own response.
        for partition in order {
            let who = partition ?? "none"
            let response = try await h.get(path, in: partition, headers: language.merging(["X-Who": who]) { $1 })
            #expect(response.text == who, "\(kind): \(who)")
            #expect(response.outcome == .miss)
        }
        #expect(h.origin.count("/r") == 3)
        for partition in order.reversed() {
            let response = try await h.get(same, in: partition, headers: language.merging(["X-Who": "origin"]) { $1 })
            #expect(response.text == partition ?? "none", "\(kind): \(partition ?? "none")")
            #expect(response.outcome == .hit)
        }
        #expect(h.origin.count("/r") == 3)
        // A partition named like another key, or like the URL itself, is a partition of its own.
        let url = h.origin.url(path).absoluteString
        let named = try await h.get(path, in: url, headers: language.merging(["X-Who": "url"]) { $1 })
        #expect(named.text == "url")
        #expect(h.origin.count("/r") == 4)
    }

    @Test("the configured partition answers requests that name none; a request's own partition comes first")
    func configuredPartition() async throws {
        let h = try Harness { $0.partition = "user-1" }
        h.origin.route("/me") { request in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: request.header("X-Who") ?? "")
        }
        #expect(try await h.get("/me", in: nil, headers: ["X-Who": "one"]).text == "one")
        #expect(try await h.get("/me", in: "user-2", headers: ["X-Who": "two"]).text == "two")
        #expect(try await h.get("/me", in: "user-1", headers: ["X-Who": "x"]).text == "one")
        let fetched = try await h.cache.data(for: FetchRequest(url: h.origin.url("/me"), partition: "user-2"))
        #expect(fetched.text == "two")
        #expect(h.origin.count("/me") == 2)
        let infos = try h.cache.entries()
        #expect(Set(infos.map(\.partition)) == ["user-1", "user-2"])
        #expect(infos.allSatisfy { $0.primaryKey == h.origin.url("/me").absoluteString })
        #expect(try h.cache.entries(for: h.origin.url("/me")).count == 1)
        #expect(try h.cache.entries(for: h.origin.url("/me"), partition: "user-3").isEmpty)
    }

    @Test("the HTTPCache-Partition field names the partition and never reaches the origin")
    func partitionFieldIsNotSent() async throws {
        let h = try Harness()
        h.serve("/f", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/f", in: "A")
        _ = try await h.get("/f", headers: ["httpcache-partition": "B"])
        #expect(try await h.get("/f", in: "B").outcome == .hit)
        let sent = h.origin.requests.filter { $0.path == "/f" }
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { $0.header("HTTPCache-Partition") == nil })
    }

    @Test("a partition name that is empty or holds a control character fails the request with why; nothing is sent")
    func invalidNames() async throws {
        let h = try Harness()
        h.serve("/x", [("Cache-Control", "max-age=60")])
        for name in ["", "a\nb", "tab\there", String(repeating: "x", count: 513)] {
            let error = await #expect(throws: InvalidPartition.self) {
                _ = try await h.cache.data(for: FetchRequest(url: h.origin.url("/x"), partition: name))
            }
            #expect(error?.message.contains("partition") == true)
        }
        #expect(h.origin.count("/x") == 0)
    }

    @Test("concurrent requests in two partitions are not collapsed into one origin request; in one partition they are")
    func noCollapsingAcrossPartitions() async throws {
        let h = try Harness()
        h.origin.route("/slow") { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=60")], body: request.header("X-Who") ?? "", delay: 0.3)
        }
        let results = try await withThrowingTaskGroup(of: (String, String).self) { group in
            for index in 0..<6 {
                let who = index % 2 == 0 ? "A" : "B"
                group.addTask { (who, try await h.get("/slow", in: who, headers: ["X-Who": who]).text) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(h.origin.count("/slow") == 2)
        #expect(results.allSatisfy { $0.0 == $0.1 })
    }

    @Test("an unsafe request invalidates its URI in its own partition only (RFC 9111 §4.4)")
    func invalidationStaysInItsPartition() async throws {
        let h = try Harness()
        h.serve("/doc", [("Cache-Control", "max-age=600")])
        for partition in ["A", "B"] { _ = try await h.get("/doc", in: partition) }
        var post = h.request("/doc", method: "POST", body: Data("x".utf8))
        post.httpCachePartition = "A"
        _ = try await h.cache.data(for: post)
        #expect(try await h.get("/doc", in: "B").outcome == .hit)
        #expect(try await h.get("/doc", in: "A").outcome == .miss)
    }

    @Test("removing a partition removes its entries and their body files, and their bytes from the totals")
    func removePartition() async throws {
        let h = try Harness()
        let body = String(repeating: "b", count: 40_000)  // above the disk store's inline limit: a file
        for path in ["/1", "/2", "/3"] { h.serve(path, [("Cache-Control", "max-age=600")], body: body) }
        for partition in ["gone", "kept"] {
            for path in ["/1", "/2", "/3"] { _ = try await h.get(path, in: partition) }
        }
        _ = try await h.get("/1", in: nil)
        let bodies = h.directory.path + "/bodies"
        let before = try FileManager.default.contentsOfDirectory(atPath: bodies).count
        let bytes = h.cache.totals.all.bodyBytes
        #expect(before == 7)
        #expect(try h.cache.remove(partition: "gone") == 3)
        #expect(try FileManager.default.contentsOfDirectory(atPath: bodies).count == before - 3)
        #expect(h.cache.totals.all.bodyBytes == bytes - 3 * 40_000)
        #expect(h.cache.totals.disk?.bodyBytes == bytes - 3 * 40_000)
        #expect(try await h.get("/2", in: "kept").outcome == .hit)
        #expect(try await h.get("/1", in: nil).outcome == .hit)
        #expect(try await h.get("/2", in: "gone").outcome == .miss)
    }

    @Test(
        "Clear Site Data §4.2: \"cache\" removes the origin's stored responses in the request's partition first"
    )
    func clearSiteData() async throws {
        let h = try Harness()
        let other = try LoopbackOrigin()
        defer { other.stop() }
        for origin in [h.origin, other] {
            for path in ["/a", "/b"] {
                origin.route(path) { _ in
                    LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: path)
                }
            }
        }
        h.origin.route("/logout") { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600"), ("Clear-Site-Data", request.header("X-Types") ?? "")],
                body: "bye")
        }
        func fetchAll(_ partition: String?) async throws {
            for origin in [h.origin, other] {
                for path in ["/a", "/b"] {
                    var request = URLRequest(url: origin.url(path))
                    request.httpCachePartition = partition
                    _ = try await h.cache.data(for: request)
                }
            }
        }
        for partition in ["A", "B", nil] { try await fetchAll(partition) }
        #expect(h.cache.totals.all.entries == 12)
        // Unknown or malformed types clear nothing.
        _ = try await h.get("/logout", in: "A", headers: ["X-Types": "\"cookies\", cache, \"storage\""])
        #expect(h.cache.totals.all.entries == 13)
        let response = try await h.get("/logout?2", in: "A", headers: ["X-Types": "\"cookies\", \"cache\""])
        #expect(response.field("Clear-Site-Data") == "\"cookies\", \"cache\"")
        #expect(response.text == "bye")
        // Partition A's entries of this origin are gone (the earlier /logout too); the response
        // that cleared them is stored; other origins and partitions keep theirs.
        let left = try h.cache.entries()
        #expect(left.count == 11)
        #expect(
            left.filter { $0.partition == "A" && $0.url.hasPrefix(h.origin.baseURL + "/") }.map(\.url) == [
                h.origin.url("/logout?2").absoluteString
            ])
        #expect(try await h.get("/logout?2", in: "A").outcome == .hit)
        #expect(try await h.get("/a", in: "A").outcome == .miss)
        #expect(try await h.get("/a", in: "B").outcome == .hit)
        #expect(try await h.get("/a", in: nil).outcome == .hit)
        var elsewhere = URLRequest(url: other.url("/a"))
        elsewhere.httpCachePartition = "A"
        #expect(try await h.cache.data(for: elsewhere).outcome == .hit)
        // "*" clears the unpartitioned cache's entries of the origin in the same way.
        _ = try await h.get("/logout?3", in: nil, headers: ["X-Types": "\"*\""])
        #expect(try await h.get("/b", in: nil).outcome == .miss)
        #expect(try await h.get("/b", in: "B").outcome == .hit)
    }
}

extension Harness {
    /// `path` in `partition` (`nil`: none), named by the `URLRequest`'s `HTTPCache-Partition` field.
    func get(_ path: String, in partition: String?, headers: [String: String] = [:]) async throws -> CachedResponse {
        var request = request(path, headers: headers)
        request.httpCachePartition = partition
        return try await cache.data(for: request)
    }
}
