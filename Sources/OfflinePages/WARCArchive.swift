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
            // Opened once: both passes below read this version, even if the entry is replaced
            // meanwhile. Each reads the body a chunk at a time, so a body of any size is
            // exported in the memory of one chunk.
            let body = try store.openBody(of: entry.id)
            var fields = entry.fields
            // The body is stored decoded from its transfer coding, whole: say so.
            fields.removeAll(namedAnyOf: [.transferEncoding, .contentLength])
            fields.append(name: .contentLength, value: String(body.size))
            let reason = HTTPCache.reasonPhrase(for: entry.status)
            var text = "HTTP/1.1 \(entry.status) \(reason)\r\n"
            for field in fields { text += "\(field.name): \(field.value)\r\n" }
            text += "\r\n"
            let head = Array(text.utf8)
            // The digests go in the record's header, before its block: one pass for them.
            var payloadHash = SHA1()
            var blockHash = SHA1()
            blockHash.update(head)
            try body.stream { chunk in
                payloadHash.update(chunk)
                blockHash.update(chunk)
                return true
            }
            let date = Date(timeIntervalSince1970: entry.storedAt)
            let blockLength = Int64(head.count) + body.size
            let response = WARCRecord.httpRecordFields(
                type: "response", contentType: WARCRecord.httpResponseContentType, targetURI: entry.url, date: date,
                payloadDigest: payloadHash.warcDigest, blockDigest: blockHash.warcDigest, blockLength: blockLength,
                concurrentTo: nil)
            if includesRequests, let url = URL(string: entry.url) {
                let host = (url.host ?? "") + (url.port.map { ":\($0)" } ?? "")
                var target = url.path.isEmpty ? "/" : url.path
                if let query = url.query { target += "?" + query }
                let request = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n"
                let recordID = response.first { $0.name == "WARC-Record-ID" }?.value
                try writer.write(
                    WARCRecord.request(
                        targetURI: entry.url, date: date, httpHead: Array(request.utf8), concurrentTo: recordID))
            }
            // The second pass writes what the first digested.
            try writer.write(fields: response, blockLength: blockLength) { emit in
                try emit(head)
                try body.stream { chunk in
                    try emit(chunk)
                    return true
                }
            }
            export.responses += 1
            export.payloadBytes += body.size
        }
        export.fileBytes = writer.offset
        closed = true
        try writer.close()
        return export
    }
}
