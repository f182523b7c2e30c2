import CacheSemantics
import CacheStorage
import Foundation
import HTTPCacheCore

/// What `HTTPCache.exportWARC(to:pack:urlPrefix:includesRequests:)` wrote.
public struct WARCExport: Sendable, Hashable {
    /// `response` records written, one per stored response.
    public var responses: Int
    /// Body bytes in them.
    public var payloadBytes: Int64
    /// The file's size.
    public var fileBytes: Int64
}

extension HTTPCache {
    /// Writes stored responses to a WARC 1.1 file (ISO 28500), each record gzipped on its own
    /// (a `.warc.gz` that web-archiving tools read and index): a `warcinfo` record, then a
    /// `response` record per stored response (the HTTP head as stored, the body, with
    /// `WARC-Target-URI`, `WARC-Date` (when it was received), `WARC-Payload-Digest` and
    /// `WARC-Block-Digest`), each preceded by its `request` record when `includesRequests`.
    ///
    /// - Parameters:
    ///   - path: The file to write (replaced).
    ///   - pack: Only that pack's resources.
    ///   - urlPrefix: Only responses whose URL starts with it. Everything when both are `nil`.
    ///   - includesRequests: Adds a `request` record (the `GET` as the cache would send it).
    public func exportWARC(
        to path: String, pack: String? = nil, urlPrefix: String? = nil, includesRequests: Bool = false
    ) throws -> WARCExport {
        var entries: [CacheEntryInfo]
        if let pack {
            guard let found = try self.pack(named: pack) else {
                throw SavePageError(url: pack, reason: "there is no offline pack with that name")
            }
            entries = try found.resources.flatMap { resource in
                try URL(string: resource.url).map { try self.entries(for: $0) } ?? []
            }
        } else {
            entries = try self.entries(urlPrefix: urlPrefix).sorted { $0.storedAt < $1.storedAt }
        }
        entries = entries.filter(\.isComplete)
        let writer = try WARCWriter(path: path, gzip: path.hasSuffix(".gz"))
        var closed = false
        defer { if !closed { try? writer.close() } }
        try writer.write(
            WARCRecord.warcinfo(
                filename: (path as NSString).lastPathComponent,
                fields: [
                    ("software", "httpcache (swift-http-cache)"), ("format", "WARC File Format 1.1"),
                    ("conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"),
                ]))
        var export = WARCExport(responses: 0, payloadBytes: 0, fileBytes: 0)
        for entry in entries {
            let body = try store.body(of: entry.id)
            var fields = entry.fields
            // The body is stored decoded from its transfer coding, whole: say so.
            fields.removeAll(namedAnyOf: [.transferEncoding, .contentLength])
            fields.append(name: .contentLength, value: String(body.count))
            let reason = HTTPCache.reasonPhrase(for: entry.status)
            var head = "HTTP/1.1 \(entry.status) \(reason)\r\n"
            for field in fields { head += "\(field.name): \(field.value)\r\n" }
            head += "\r\n"
            let date = Date(timeIntervalSince1970: entry.storedAt)
            let response = WARCRecord.response(
                targetURI: entry.url, date: date, httpHead: Array(head.utf8), payload: body)
            if includesRequests, let url = URL(string: entry.url) {
                let host = (url.host ?? "") + (url.port.map { ":\($0)" } ?? "")
                var target = url.path.isEmpty ? "/" : url.path
                if let query = url.query { target += "?" + query }
                let request = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n"
                try writer.write(
                    WARCRecord.request(
                        targetURI: entry.url, date: date, httpHead: Array(request.utf8),
                        concurrentTo: response.recordID))
            }
            try writer.write(response)
            export.responses += 1
            export.payloadBytes += Int64(body.count)
        }
        export.fileBytes = writer.offset
        closed = true
        try writer.close()
        return export
    }
}
