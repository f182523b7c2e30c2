import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
@_spi(Fuzzing) import OfflinePages
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Exporting a pack as WARC, checked by PyPI's warcio, and importing WARC files into a cache.
@Suite("Offline packs as WARC files")
struct WARCArchiveTests {
    /// A cache of its own in a fresh directory (memory only when `directory` is nil).
    func emptyCache(_ directory: TemporaryDirectory) throws -> HTTPCache {
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory.path
        configuration.log = { _ in }
        return try HTTPCache(configuration: configuration)
    }

    /// Every resource's body as `cache` has it stored.
    func bodies(_ cache: HTTPCache, _ pack: OfflinePack) async throws -> [String: Data] {
        var bodies: [String: Data] = [:]
        for resource in pack.resources where resource.status == 200 {
            var request = URLRequest(url: try #require(URL(string: resource.url)))
            request.cachePolicy = .returnCacheDataDontLoad
            bodies[resource.url] = try await cache.data(for: request).data
        }
        return bodies
    }

    @Test("Export: warcio check passes every digest and warcio index lists every URL of the pack (ISO 28500)")
    func exportReadByWarcio() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/article.html")
        let files = WARCTestDirectory()
        let path = files.file("article.warc.gz")
        let export = try h.cache.exportWARC(to: path, pack: pack.name, includesRequests: true)
        #expect(export.responses == pack.resources.count)
        let warcio = try WARCCheckers.executable("warcio")
        let check = try await runWARCProcess(warcio, ["check", "-v", path])
        #expect(check.status == 0, "warcio check: \(check.output) \(check.errorOutput)")
        #expect(check.output.components(separatedBy: "digest pass").count - 1 == 1 + 2 * pack.resources.count)
        let index = try await runWARCProcess(
            warcio, ["index", "-f", "warc-type,warc-target-uri,warc-payload-digest", path])
        #expect(index.status == 0)
        let lines = index.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
        }
        let responses = lines.filter { $0["warc-type"] == "response" }
        #expect(Set(responses.compactMap { $0["warc-target-uri"] }) == Set(pack.resources.map(\.url)))
        #expect(lines.filter { $0["warc-type"] == "request" }.count == pack.resources.count)
        #expect(lines.first?["warc-type"] == "warcinfo")
        // The digests are of the bodies as stored.
        let stored = try await bodies(h.cache, pack)
        for response in responses {
            let url = try #require(response["warc-target-uri"])
            if let body = stored[url] { #expect(response["warc-payload-digest"] == SHA1.warcDigest(Array(body))) }
        }
    }

    @Test("Import into an empty cache: the pack serves offline the same bytes")
    func importServesOffline() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/article.html")
        let original = try await bodies(h.cache, pack)
        let files = WARCTestDirectory()
        let path = files.file("article.warc.gz")
        _ = try h.cache.exportWARC(to: path, pack: pack.name)
        h.site.origin.stop()

        let directory = TemporaryDirectory("warc-import")
        let cache = try emptyCache(directory)
        let imported = try await cache.importWARC(from: path, name: "from warc")
        #expect(imported.pack.name == "from warc" && imported.skipped.isEmpty && imported.refused == 0)
        let stored = try #require(try cache.pack(named: "from warc"))
        #expect(Set(stored.resources.map(\.url)) == Set(pack.resources.map(\.url)))
        #expect(imported.stored == pack.resources.count && stored.isComplete)
        #expect(imported.pack.page == pack.page && stored.page == pack.page)
        #expect(try cache.packs().map(\.name) == ["from warc"])
        for resource in pack.resources {
            let url = try #require(URL(string: resource.url))
            let served = try await cache.data(for: URLRequest(url: url))
            #expect(served.cacheStatus.fieldValue.contains("detail=saved-offline"), "\(resource.url)")
            let expected = original[resource.url] ?? original[h.site.url("/site/img/redirected.svg")]
            #expect(served.statusCode == 200 && served.data == expected, "\(resource.url)")
        }
    }

    @Test("A WARC warcio wrote imports: chunked payload de-chunked, revisit stored with the payload it refers to")
    func importsWarcioFile() async throws {
        let files = WARCTestDirectory()
        let path = files.file("warcio.warc.gz")
        let css = Array("body { color: red }\n".utf8)
        // Port 9 (discard) on loopback: nothing listens, so every later request is offline.
        let script = """
            import sys
            from io import BytesIO
            from warcio.warcwriter import WARCWriter
            from warcio.statusandheaders import StatusAndHeaders
            chunked = b'6\\r\\n<html>\\r\\n7\\r\\n</html>\\r\\n0\\r\\n\\r\\n'
            css = b'body { color: red }\\n'
            with open(sys.argv[1], 'wb') as out:
                writer = WARCWriter(out, gzip=sys.argv[3] == 'gzip')
                headers = StatusAndHeaders('200 OK', [('Content-Type', 'text/html'),
                                                      ('Transfer-Encoding', 'chunked')], protocol='HTTP/1.1')
                writer.write_record(writer.create_warc_record('http://127.0.0.1:9/page.html', 'response',
                                    payload=BytesIO(chunked), length=len(chunked), http_headers=headers))
                headers = StatusAndHeaders('200 OK', [('Content-Type', 'text/css'),
                                                      ('Content-Length', str(len(css)))], protocol='HTTP/1.1')
                writer.write_record(writer.create_warc_record('http://127.0.0.1:9/style.css', 'response',
                                    payload=BytesIO(css), length=len(css), http_headers=headers))
                writer.write_record(writer.create_revisit_record('http://127.0.0.1:9/copy.css',
                                    digest=sys.argv[2], refers_to_uri='http://127.0.0.1:9/style.css',
                                    refers_to_date='2026-12-01T10:00:00Z', http_headers=headers))
            """
        let python = try WARCCheckers.executable("python")
        for mode in ["gzip", "plain"] {
            let run = try await runWARCProcess(python, ["-c", script, path, SHA1.warcDigest(css), mode])
            try #require(run.status == 0, "the warcio script failed: \(run.errorOutput)")
            let directory = TemporaryDirectory("warc-import")
            let cache = try emptyCache(directory)
            let imported = try await cache.importWARC(from: path)
            #expect(imported.revisits == 1 && imported.skipped.isEmpty, "\(imported.skipped)")
            #expect(imported.pack.name == "warcio.warc.gz" && imported.pack.page == "http://127.0.0.1:9/page.html")
            let page = try await cache.data(
                for: URLRequest(url: try #require(URL(string: "http://127.0.0.1:9/page.html"))))
            #expect(String(decoding: page.data, as: UTF8.self) == "<html></html>")
            #expect(page.fields["Transfer-Encoding"] == nil)
            let copy = try await cache.data(
                for: URLRequest(url: try #require(URL(string: "http://127.0.0.1:9/copy.css"))))
            #expect(Array(copy.data) == css && copy.fields["Content-Type"] == "text/css")
        }
    }

    @Test("A truncated or corrupted file is refused at the bad record's offset; nothing from it onward is stored")
    func refusesDamagedFiles() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/page2.html")
        #expect(pack.resources.count == 2)
        let files = WARCTestDirectory()
        let path = files.file("page2.warc.gz")
        _ = try h.cache.exportWARC(to: path, pack: pack.name)
        // The offsets of the records: warcinfo, page2.html, page2.svg.
        var reader = try WARCReader(path: path)
        var offsets: [Int64] = []
        while let record = try reader.next() { offsets.append(record.offset) }
        try #require(offsets.count == 3)
        let bytes = try warcFileBytes(path)

        var corrupted = bytes
        corrupted[Int(offsets[2]) + 20] ^= 0xFF
        let cases: [(String, [UInt8])] = [
            ("truncated", Array(bytes[..<(bytes.count - 10)])), ("corrupted", corrupted),
        ]
        for (kind, damaged) in cases {
            let damagedPath = files.file("\(kind).warc.gz")
            try writeWARCFile(damagedPath, damaged)
            let directory = TemporaryDirectory("warc-import")
            let cache = try emptyCache(directory)
            let error = await #expect(throws: WARCError.self, "\(kind)") {
                try await cache.importWARC(from: damagedPath)
            }
            #expect(error?.offset == offsets[2], "\(kind): \(String(describing: error))")
            #expect(error?.description.contains("offset \(offsets[2])") == true, "\(kind)")
            // The record before it is stored; the bad one is not, and no pack is made.
            #expect(try !cache.entries(for: h.site.origin.url("/site/page2.html")).isEmpty, "\(kind)")
            #expect(try cache.entries(for: h.site.origin.url("/site/img/page2.svg")).isEmpty, "\(kind)")
            #expect(try cache.packs().isEmpty, "\(kind)")
        }
    }
}
