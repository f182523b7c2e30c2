import CacheSemantics
import Foundation
import HTTPCacheCore
import HTTPWire

/// How responses are shown: status lines, fields, the verbose summary.
enum Report {
    /// `HTTP/1.1 200 OK`, the fields (one line a name, sorted by name), and an empty line, as
    /// `-i` prints them.
    static func head(_ head: CachedResponseHead) -> String {
        var text = statusLine(head.statusCode) + "\n"
        for field in head.combinedFields { text += "\(field.name): \(field.value)\n" }
        return text + "\n"
    }

    /// `HTTP/1.1 404 Not Found`.
    static func statusLine(_ status: Int) -> String {
        let reason = reasonPhrase(status).map { " \($0)" } ?? ""
        return "HTTP/1.1 \(status)\(reason)"
    }

    /// Whether a body of this `Content-Type` is text (absent counts as text; the bytes must
    /// still be valid UTF-8 to be shown as text).
    static func isTextual(_ contentType: String?) -> Bool {
        guard let contentType else { return true }
        let type =
            contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        if type.hasPrefix("text/") || type.hasSuffix("+json") || type.hasSuffix("+xml") { return true }
        return [
            "application/json", "application/xml", "application/javascript", "application/ecmascript",
            "application/x-www-form-urlencoded", "application/graphql", "application/x-ndjson", "image/svg+xml",
        ].contains(type)
    }

    /// Whether a body starting with `start` would garble a terminal: a content type that is not
    /// text, or control bytes other than tab, line feed, carriage return, form feed and escape
    /// in its first 4 KiB.
    static func looksBinary(_ start: Data, _ head: CachedResponseHead) -> Bool {
        if let type = head.fields[.contentType], !isTextual(type) { return true }
        return start.prefix(4096).contains { byte in byte < 0x20 && ![0x09, 0x0A, 0x0C, 0x0D, 0x1B].contains(byte) }
    }

    /// What `-v` prints on standard error.
    static func verbose(_ head: CachedResponseHead, method: String, elapsed: Duration) -> String {
        var text =
            "httpcache: \(method) \(head.url.absoluteString) → \(head.statusCode) "
            + "\(head.outcome) in \(Format.elapsed(elapsed))\n"
        text += "httpcache: Cache-Status: \(head.cacheStatus.fieldValue)\n"
        for reason in head.reasons { text += "httpcache:   \(reason)\n" }
        return text
    }
}
