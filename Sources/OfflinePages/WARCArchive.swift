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
    /// Stored responses left out because their bodies were found damaged or gone as they were
    /// read: the store removed them, and they are fetched again when asked.
    public var skipped: [Skipped] = []

    /// A stored response left out of the file, and why.
    public struct Skipped: Sendable, Hashable {
        /// The URL it was stored for.
        public var url: String
        /// What was wrong with its body, as the store said it.
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
    /// A new or regular file is written beside `path` (`PATH.partial`) and renamed over it once
    /// whole: an export that fails leaves the file that was there. A response whose body is found
    /// damaged or gone as it is read (``StorageError/Kind/corrupted``, ``StorageError/Kind/notFound``)
    /// is left out and listed in ``WARCExport/skipped``, the rest exported.
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
        // A new file or a regular one is written beside and renamed over; anything else (a
        // device, a FIFO, a symbolic link, which would be replaced rather than followed) is
        // written in place.
        var existing = stat()
        let replaces = lstat(path, &existing) != 0 || existing.st_mode & S_IFMT == S_IFREG
        let partial = replaces ? path + ".partial" : path
        let writer = try WARCWriter(path: partial, gzip: path.hasSuffix(".gz"))
        var closed = false
        defer {
            if !closed {
                try? writer.close()
                if replaces { unlink(partial) }
            }
        }
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
            guard let body = try openBody(of: entry, skipping: &export.skipped) else { continue }
            var fields = entry.fields
            // The body is stored decoded from its transfer coding, whole: say so.
            fields.removeAll(namedAnyOf: [.transferEncoding, .contentLength])
            fields.append(name: .contentLength, value: String(body.size))
            let reason = HTTPCache.reasonPhrase(for: entry.status)
            var text = "HTTP/1.1 \(entry.status) \(reason)\r\n"
            for field in fields { text += "\(field.name): \(field.value)\r\n" }
            text += "\r\n"
            let head = Array(text.utf8)
            // The digests go in the record's header, before its block: one pass for them, which
            // checks every block too, before anything of the record is written.
            var payloadHash = SHA1()
            var blockHash = SHA1()
            blockHash.update(head)
            do {
                try body.stream { chunk in
                    payloadHash.update(chunk)
                    blockHash.update(chunk)
                    return true
                }
            } catch let error as StorageError where Self.isDamage(error) {
                export.skipped.append(WARCExport.Skipped(url: entry.url, reason: error.message))
                continue
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
        do {
            try writer.close()
        } catch {
            if replaces { unlink(partial) }
            throw error
        }
        guard !replaces || rename(partial, path) == 0 else {
            let code = errno
            unlink(partial)
            throw WARCError(
                offset: 0,
                message: "could not put the WARC file in place at \(path): \(String(cString: strerror(code)))"
                    + " — check that its directory is writable")
        }
        return export
    }

    /// The body of `entry`, or `nil` (listed in `skipped`) when it is found damaged or gone.
    private func openBody(
        of entry: CacheEntryInfo, skipping skipped: inout [WARCExport.Skipped]
    ) throws(StorageError) -> (any StoredBody)? {
        do {
            return try store.openBody(of: entry.id)
        } catch  where Self.isDamage(error) {
            skipped.append(WARCExport.Skipped(url: entry.url, reason: error.message))
            return nil
        }
    }

    /// Whether `error` is a stored body found damaged or gone (the store then removed its
    /// entry): an export leaves that response out and goes on.
    private static func isDamage(_ error: StorageError) -> Bool { [.corrupted, .notFound].contains(error.kind) }
}
