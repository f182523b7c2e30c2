import CacheSemantics
import CacheStorage
import Foundation
import HTTPCaching

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What `HTTPCache.exportWARC(to:pack:urlPrefix:includesRequests:)` wrote.
public struct WARCExport: Sendable, Hashable {
    /// `response` records written, one per stored response.
    public var responses: Int
    /// Body bytes in them.
    public var payloadBytes: Int64
    /// The file's size.
    public var fileBytes: Int64
}

/// What `HTTPCache.importWARC(from:name:)` stored.
public struct WARCImport: Sendable, Hashable {
    /// The pack made of the stored responses.
    public var pack: OfflinePack
    /// `revisit` records stored with the payload they refer to.
    public var revisits: Int
    /// Records not stored, with why (request, metadata and warcinfo records are not counted).
    public var skipped: [Skipped]

    /// A record not stored.
    public struct Skipped: Sendable, Hashable {
        /// Where the record starts in the file.
        public var offset: Int64
        /// Why it was not stored.
        public var reason: String
    }
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
            fields.removeAll(namedAnyOf: ["Transfer-Encoding", "Content-Length"])
            fields.append(name: "Content-Length", value: String(body.count))
            let reason = HTTPURLResponse.localizedString(forStatusCode: entry.status).capitalized
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

    /// Stores every HTTP `response` record of a WARC file (`.warc` or `.warc.gz`, WARC 1.0 or
    /// 1.1, from this or any other tool), pinned, and makes them a pack named `name` (default:
    /// the file's name). Chunked payloads are stored de-chunked; a `revisit` record of the
    /// identical-payload-digest profile is stored with the payload of the record it refers to.
    /// A later record for the same URL replaces an earlier one.
    ///
    /// A truncated or corrupt file stops the import with a `WARCError` naming the offset of
    /// the bad record: the records before it are stored (not pinned, and no pack is made),
    /// nothing from it onward.
    public func importWARC(from path: String, name: String? = nil) async throws -> WARCImport {
        var reader = try WARCReader(path: path)
        let replayer = Replayer(self)
        var stored: [String: OfflinePack.Resource] = [:]
        var order: [String] = []
        var byDigest: [String: String] = [:]
        var result = WARCImport(
            pack: OfflinePack(name: "", page: "", savedAt: 0, resources: []), revisits: 0, skipped: [])
        while let record = try reader.next() {
            guard let type = record.type?.lowercased(), type == "response" || type == "revisit" else { continue }
            guard let uri = record.targetURI, let url = URL(string: uri),
                ["http", "https"].contains(url.scheme?.lowercased() ?? "")
            else {
                result.skipped.append(
                    .init(offset: record.offset, reason: "not an http(s) response: \(record.targetURI ?? "no target")"))
                continue
            }
            let block: HTTPResponseBlock
            do {
                block = try HTTPResponseBlock(record: record)
            } catch {
                result.skipped.append(.init(offset: record.offset, reason: "\(uri): \(error)"))
                continue
            }
            var payload = block.payload
            var fields = block.fields
            if type == "revisit" {
                // The identical-payload-digest profile refers to an earlier record's payload.
                guard let digest = record[field: "WARC-Payload-Digest"], let earlier = byDigest[digest],
                    let earlierURL = URL(string: earlier),
                    let entry = try entries(for: earlierURL).first(where: \.isComplete)
                else {
                    result.skipped.append(
                        .init(
                            offset: record.offset,
                            reason: "revisit of \(uri): the record it refers to is not in this file"))
                    continue
                }
                payload = try store.body(of: entry.id)
                if block.statusCode == 304 || fields.isEmpty {
                    fields = entry.fields.map { HTTPResponseBlock.Field($0.name, $0.value) }
                }
                result.revisits += 1
            }
            var headers: [String: String] = [:]
            for field in fields
            where !["transfer-encoding", "content-length", "connection", "keep-alive"].contains(field.name.lowercased())
            {
                headers[field.name] = headers[field.name].map { "\($0), \(field.value)" } ?? field.value
            }
            headers["Content-Length"] = String(payload.count)
            let status = block.statusCode == 304 && type == "revisit" ? 200 : block.statusCode
            try await replayer.store(StagedResponse(url: uri, status: status, fields: headers, body: Data(payload)))
            if let digest = record[field: "WARC-Payload-Digest"] { byDigest[digest] = uri }
            if stored[uri] == nil { order.append(uri) }
            stored[uri] = OfflinePack.Resource(
                url: uri, status: status, size: Int64(payload.count), contentType: headers["Content-Type"],
                etag: headers["ETag"], lastModified: headers["Last-Modified"], savedAt: Date().timeIntervalSince1970)
        }
        for uri in order { _ = URL(string: uri).map(pin) }
        let page = order.first { stored[$0]?.contentType.map(mediaType) == "text/html" } ?? order.first ?? ""
        let pack = OfflinePack(
            name: name ?? (path as NSString).lastPathComponent, page: page, savedAt: Date().timeIntervalSince1970,
            resources: order.compactMap { stored[$0] })
        try PackRecord.write(pack, to: store)
        result.pack = pack
        return result
    }
}
