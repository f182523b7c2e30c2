import Foundation
@_spi(Fuzzing) import OfflinePages

/// WARC files made to push `httpcache import` (and `HTTPCache.importWARC`) where memory would
/// grow: a record that inflates to gigabytes from a file of about a thousandth of that, and
/// files of many tiny records. Written as they are made, never held whole; each record (or
/// piece of one) is a gzip member of its own.
public enum WARCFixtures {
    /// A tiny `response` record for `uri`: `HTTP/1.1 200`, `text/plain`, a few bytes.
    public static func tinyRecord(_ uri: String, body: String) -> WARCRecord {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        return WARCRecord.response(
            targetURI: uri, date: Date(timeIntervalSince1970: 1_800_000_000), httpHead: Array(head.utf8),
            payload: Array(body.utf8))
    }

    /// Writes `count` tiny records for `http://example.org/r/N`, gzipped record by record; the
    /// records at `hostless` (indexes) have `WARC-Target-URI: http://` instead.
    ///
    /// - Returns: The offsets of the hostless records.
    @discardableResult
    public static func writeTinyRecords(to path: String, count: Int, hostless: Set<Int> = []) throws -> [Int64] {
        let writer = try WARCWriter(path: path, gzip: true)
        var offsets: [Int64] = []
        for index in 0..<count {
            let uri = hostless.contains(index) ? "http://" : "http://example.org/r/\(index)"
            let offset = try writer.write(tinyRecord(uri, body: "record \(index)"))
            if hostless.contains(index) { offsets.append(offset) }
        }
        try writer.close()
        return offsets
    }

    /// Writes a `.warc.gz` of three records: `http://example.org/before`, then
    /// `http://example.org/bomb`, whose payload is `inflatedSize` zero bytes (in gzip members of
    /// 64 MiB, about 64 KiB each), then `http://example.org/after`.
    ///
    /// - Returns: The file's size and the bomb record's offset.
    public static func writeGzipBomb(to path: String, inflatedSize: Int64) throws -> (fileSize: Int64, offset: Int64) {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw CocoaError(.fileWriteUnknown) }
        defer { try? handle.close() }
        let before = try gzipped(tinyRecord("http://example.org/before", body: "before"))
        try handle.write(contentsOf: before)
        let offset = Int64(before.count)
        let httpHead = Array(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(inflatedSize)\r\n\r\n".utf8)
        let header =
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: \(WARCRecord.newRecordID())\r\n"
            + "WARC-Date: 2027-01-15T08:00:00Z\r\nWARC-Target-URI: http://example.org/bomb\r\n"
            + "Content-Type: \(WARCRecord.httpResponseContentType)\r\n"
            + "Content-Length: \(Int64(httpHead.count) + inflatedSize)\r\n\r\n"
        try handle.write(contentsOf: Gzip.compress(Array(header.utf8) + httpHead))
        let piece = Int64(64 << 20)
        let zeros = [UInt8](repeating: 0, count: Int(piece))
        let member = Gzip.compress(zeros)
        var written: Int64 = 0
        while written < inflatedSize {
            let size = min(piece, inflatedSize - written)
            try handle.write(contentsOf: size == piece ? member : Gzip.compress(Array(zeros[..<Int(size)])))
            written += size
        }
        try handle.write(contentsOf: Gzip.compress(Array("\r\n\r\n".utf8)))
        try handle.write(contentsOf: try gzipped(tinyRecord("http://example.org/after", body: "after")))
        return (Int64(handle.offsetInFile), offset)
    }

    /// `record` as `WARCWriter` writes it in a `.warc.gz`.
    private static func gzipped(_ record: WARCRecord) throws -> [UInt8] {
        let path = NSTemporaryDirectory() + "/warc-fixture-\(UUID().uuidString).warc.gz"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try WARCWriter(path: path, gzip: true)
        try writer.write(record)
        try writer.close()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
