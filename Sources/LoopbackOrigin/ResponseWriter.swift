@_spi(Wire) import HTTPWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns a handler's ``LoopbackOrigin/Response`` into the bytes sent for one request.
enum ResponseWriter {
    /// The bytes to send and what to do with the connection afterwards.
    struct Output {
        var bytes: [UInt8]
        /// Close after sending: the client asked, the handler said `Connection: close`, or the
        /// framing the handler chose cannot delimit the message.
        var closeAfter: Bool
        /// `cutAfterBodyBytes` was set: shut the connection down right after `bytes` (and `stream`).
        var cut: Bool
        /// The body, when it is sent after `bytes` piece by piece (generated, or paused).
        var stream: BodyStream?
    }

    /// A body sent in pieces after the head: generated as it goes, and possibly stopped short.
    struct BodyStream {
        enum Source {
            case generated(LoopbackOrigin.GeneratedBody)
            case memory([UInt8])
        }

        var source: Source
        /// The length of the complete body (what the framing declares).
        var total: Int64
        /// How many body bytes to send (less than `total` when cut or paused).
        var limit: Int64
        /// Frame the pieces as chunks (RFC 9112 §7.1).
        var chunked: Bool
        /// After `limit` bytes, send nothing more and wait for the client to close.
        var pauses: Bool

        /// Writes the bytes of the body at `position ..< position + buffer.count` into `buffer`.
        func fill(_ buffer: UnsafeMutableRawBufferPointer, at position: Int64) {
            switch source {
            case .generated(let body):
                LoopbackOrigin.GeneratedBody.fill(buffer, from: body.offset + position, seed: body.seed)
            case .memory(let bytes):
                let start = Int(position)
                bytes.withUnsafeBytes { source in
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<(start + buffer.count)]))
                }
            }
        }
    }

    /// The wire form of `response` for a request with `method` over HTTP/1.`minorVersion`.
    ///
    /// Adds `Content-Length` (RFC 9110 §8.6) unless the body is chunked or close-delimited, the
    /// handler set one, or the status has no content (1xx, 204, 304: RFC 9110 §6.4.1); `Date` (RFC 9110 §6.6.1) unless set
    /// or ``LoopbackOrigin/Response/addsDate`` is off; `Connection: close` when closing. HEAD,
    /// 1xx, 204 and 304 responses never carry a body.
    static func encode(
        _ response: LoopbackOrigin.Response, method: String, minorVersion: Int, clientWantsClose: Bool,
        now: time_t = time(nil)
    ) -> Output {
        let status = (100...999).contains(response.status) ? response.status : 500
        let isInterim = status < 200
        let hasNoContent = isInterim || status == 204 || status == 304
        let sendsBody = !hasNoContent && method != "HEAD"
        // A chunked response to an HTTP/1.0 client is not understood (RFC 9112 §6.1): use a length instead.
        let chunked = response.chunked && !hasNoContent && minorVersion >= 1
        let closeDelimited = response.closeDelimited && !chunked
        var fields = response.headers.map { (name: clean($0.name), value: clean($0.value)) }
        func values(_ name: String) -> [String] {
            fields.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
        }

        let bodyLength = response.generatedBody?.length ?? Int64(response.body.count)
        let pauses = response.pauseAfterBodyBytes != nil && response.cutAfterBodyBytes == nil
        var closeAfter = clientWantsClose || isInterim || response.cutAfterBodyBytes != nil || pauses
        let connectionTokens = values("connection").flatMap { $0.split(separator: ",") }
            .map { ASCII.lowercased(ASCII.trimmed($0)) }
        if connectionTokens.contains("close") { closeAfter = true }

        let declaredLengths = values("content-length")
        let declaresCoding = !values("transfer-encoding").isEmpty
        if !hasNoContent {
            if chunked {
                if !declaresCoding { fields.append((name: "Transfer-Encoding", value: "chunked")) }
                if !declaredLengths.isEmpty { closeAfter = true }
            } else if declaresCoding {
                closeAfter = true  // the handler framed the body itself; only the close delimits it for sure
            } else if declaredLengths.isEmpty, closeDelimited {
                closeAfter = true  // RFC 9112 §6.3 item 8: the close ends the body
            } else if declaredLengths.isEmpty {
                fields.append((name: "Content-Length", value: String(bodyLength)))
            } else if sendsBody,
                declaredLengths.contains(where: { RequestReader.decimal($0).map(Int64.init) != bodyLength })
            {
                closeAfter = true  // a deliberately wrong Content-Length: do not reuse a desynchronised connection
            }
        }
        if !isInterim, response.addsDate, values("date").isEmpty {
            fields.append((name: "Date", value: imfFixdate(now)))
        }
        if values("connection").isEmpty {
            if closeAfter {
                fields.append((name: "Connection", value: "close"))
            } else if minorVersion == 0 {
                fields.append((name: "Connection", value: "keep-alive"))
            }
        }

        var bytes: [UInt8] = []
        HeadWriter.appendStatusLine(status: status, to: &bytes)
        for field in fields { HeadWriter.appendField(name: field.name, value: field.value, to: &bytes) }
        HeadWriter.appendEnd(to: &bytes)
        if sendsBody, response.generatedBody != nil || pauses {
            let limit = min(
                bodyLength, Int64(max(0, response.cutAfterBodyBytes ?? response.pauseAfterBodyBytes ?? Int.max)))
            let source: BodyStream.Source = response.generatedBody.map { .generated($0) } ?? .memory(response.body)
            let stream = BodyStream(source: source, total: bodyLength, limit: limit, chunked: chunked, pauses: pauses)
            return Output(bytes: bytes, closeAfter: closeAfter, cut: response.cutAfterBodyBytes != nil, stream: stream)
        }
        if sendsBody {
            let body = response.body
            let sent = body.prefix(max(0, response.cutAfterBodyBytes ?? body.count))
            if chunked {
                if sent.count == body.count {
                    ChunkedEncoder.appendChunk(body, to: &bytes)
                    ChunkedEncoder.appendEnd(to: &bytes)
                } else if !body.isEmpty {
                    // Cut short: the size line and part of the data, never the chunk's end.
                    ChunkedEncoder.appendSize(body.count, to: &bytes)
                    bytes += sent
                }
            } else {
                bytes += sent
            }
        }
        return Output(bytes: bytes, closeAfter: closeAfter, cut: response.cutAfterBodyBytes != nil, stream: nil)
    }

    /// A short `text/plain` error reply that closes the connection.
    static func rejection(status: Int, reason: String, now: time_t = time(nil)) -> [UInt8] {
        let body = "\(status) \(reasonPhrase(status)): \(reason)\n"
        var bytes: [UInt8] = []
        HeadWriter.appendStatusLine(status: status, to: &bytes)
        HeadWriter.appendField(name: "Content-Type", value: "text/plain; charset=utf-8", to: &bytes)
        HeadWriter.appendField(name: "Content-Length", value: String(body.utf8.count), to: &bytes)
        HeadWriter.appendField(name: "Date", value: imfFixdate(now), to: &bytes)
        HeadWriter.appendField(name: "Connection", value: "close", to: &bytes)
        HeadWriter.appendEnd(to: &bytes)
        return bytes + body.utf8
    }

    /// Drops CR, LF and NUL so a handler's field cannot break the message framing.
    private static func clean(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else { return text }
        return String(text.unicodeScalars.filter { $0 != "\r" && $0 != "\n" && $0 != "\0" }.map(Character.init))
    }

    /// The registered reason phrase (RFC 9110 §15), or "" for codes without one.
    static func reasonPhrase(_ status: Int) -> String { HTTPWire.reasonPhrase(status)?.description ?? "" }

    /// `IMF-fixdate` (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func imfFixdate(_ seconds: time_t) -> String {
        var time = seconds
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "Thu, 01 Jan 1970 00:00:00 GMT" }
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let day = days[Int(parts.tm_wday).clamped(0, 6)]
        let month = months[Int(parts.tm_mon).clamped(0, 11)]
        return "\(day), \(padded(parts.tm_mday, 2)) \(month) \(padded(parts.tm_year + 1900, 4)) "
            + "\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2)) GMT"
    }
}

extension Int {
    fileprivate func clamped(_ low: Int, _ high: Int) -> Int { Swift.min(Swift.max(self, low), high) }
}
