internal import CCurlHTTPCache
import CacheSemantics

/// The `CURLOPT_HTTPHEADER` list that makes libcurl send exactly a request's field lines.
///
/// libcurl adds fields of its own unless the list names them with no value (`Name:`), which
/// removes them and is never sent itself. So the list is:
/// - `Host:` first when the request has a `Host` field: libcurl's own `Host` is then removed,
///   and the request's `Host` goes out where it stands instead of being moved to the front.
///   Without one, libcurl writes `Host` from the URL (RFC 9112 §3.2 requires it).
/// - each field line in order, repeated names kept; an empty value as `Name;`, libcurl's
///   spelling for an empty field (`Name:` would remove it);
/// - `Accept:`, `Expect:`, `Content-Type:` and `User-Agent:`, which remove what libcurl
///   would add (`Accept: */*`; `Expect: 100-continue` for large bodies; a form
///   `Content-Type` for `CURLOPT_POSTFIELDS`). libcurl looks for the first line with a name,
///   so a field the request has itself wins over these.
///
/// `Content-Length` and `Transfer-Encoding` are dropped (the body's framing is the client's
/// to write, RFC 9112 §6), as are lines that cannot be sent as they are: an empty name, or a
/// name or value with CR, LF or NUL (they would split or cut the line).
///
/// The caller frees the list with `curl_slist_free_all` once the transfer is over.
enum RequestFieldList {
    /// The list for `fields`; nil when it could not be allocated.
    static func make(_ fields: HeaderFields) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>?
        var failed = false
        func append(_ line: String) {
            guard !failed else { return }
            if let longer = curl_slist_append(list, line) {
                list = longer
            } else {
                failed = true
            }
        }
        if fields.contains("Host") { append("Host:") }
        for field in fields where isSendable(field) {
            append(field.value.isEmpty ? field.name + ";" : field.name + ": " + field.value)
        }
        for suppressed in ["Accept:", "Expect:", "Content-Type:", "User-Agent:"] { append(suppressed) }
        if failed {
            curl_slist_free_all(list)
            return nil
        }
        return list
    }

    /// Whether `field` can go out as given (see the type's documentation).
    static func isSendable(_ field: HeaderField) -> Bool {
        guard !field.name.isEmpty else { return false }
        if equalsIgnoringCase(field.name, "content-length")
            || equalsIgnoringCase(field.name, "transfer-encoding")
        {
            return false
        }
        for byte in field.name.utf8 where byte == 0x0D || byte == 0x0A || byte == 0 || byte == 0x3A {
            return false
        }
        for byte in field.value.utf8 where byte == 0x0D || byte == 0x0A || byte == 0 {
            return false
        }
        return true
    }

    /// Whether `name` equals `lowercase` when ASCII letters are compared without case.
    static func equalsIgnoringCase(_ name: String, _ lowercase: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard name.utf8.count == expected.count else { return false }
        return zip(name.utf8, expected).allSatisfy { byte, wanted in
            (byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte) == wanted
        }
    }
}
