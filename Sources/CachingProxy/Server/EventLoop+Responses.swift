#if os(Linux)
// Writing responses on the loop thread: the head with the server's own framing fields, the
// body framed as chosen (RFC 9112 §6, §7.1), and what happens to the connection after it.
import CEpollHTTPCache
import CacheSemantics
@_spi(Wire) import HTTPWire
import Glibc

extension EventLoop {
    func respond(_ target: ResponseTarget, _ head: ServerResponseHead, _ body: [UInt8], _ framing: BodyFraming) {
        if target.stream != nil { return respondHTTP2(target, head, body, framing) }
        guard isCurrent(target), !target.connection.state.responseStarted else { return }
        let connection = target.connection
        beginResponse(connection, head, framing)
        appendBody(connection, body, accounted: false)
        finishResponse(connection)
    }

    func start(_ target: ResponseTarget, _ head: ServerResponseHead, _ framing: BodyFraming) {
        if target.stream != nil { return startHTTP2(target, head, framing) }
        guard isCurrent(target), !target.connection.state.responseStarted else { return }
        beginResponse(target.connection, head, framing)
        markDirty(target.connection)
    }

    /// An interim response (RFC 9110 §15.2) before the final one: to HTTP/1.1 clients only
    /// ("A server MUST NOT send a 1xx response to an HTTP/1.0 client"), never `101` (an
    /// upgrade this server does not make), never after the final response started.
    func interim(_ target: ResponseTarget, _ head: ServerResponseHead) {
        if target.stream != nil { return interimHTTP2(target, head) }
        let connection = target.connection
        guard isCurrent(target), !connection.state.responseStarted, connection.state.minorVersion == 1,
            (100...199).contains(head.status), head.status != 101
        else { return }
        Self.writeHead(
            &connection.state.output, head.status, head,
            HeadFraming(framing: .none, bodyAllowed: false, chunked: false), ending: "\r\n")
        markDirty(connection)
    }

    /// Appends body bytes (kept as the array when large); `false` when the request is no
    /// longer being answered on this connection.
    /// The bytes of `target`'s response queued on the loop and not yet sent.
    func queuedOutput(_ target: ResponseTarget) -> Int {
        if let stream = target.stream { return stream.pendingBytes }
        return isCurrent(target) ? target.connection.state.output.count : 0
    }

    func write(_ target: ResponseTarget, _ bytes: [UInt8], accounted: Bool) -> Bool {
        if target.stream != nil { return writeHTTP2(target, bytes, accounted: accounted) }
        guard isCurrent(target), target.connection.state.responseStarted else {
            if accounted { releaseAccounted(target.connection, bytes.count) }
            return false
        }
        appendBody(target.connection, bytes, accounted: accounted)
        bodyAppended(target.connection)
        return true
    }

    /// Appends body bytes, copied.
    func write(_ target: ResponseTarget, _ bytes: UnsafeRawBufferPointer) -> Bool {
        if target.stream != nil { return writeHTTP2(target, Array(bytes), accounted: false) }
        guard isCurrent(target), target.connection.state.responseStarted else { return false }
        let connection = target.connection
        switch connection.state.responseBody {
        case .discard:
            break
        case .length(let remaining):
            let take = Int(min(Int64(bytes.count), remaining))
            connection.state.output.append(UnsafeRawBufferPointer(rebasing: bytes[0..<take]))
            connection.state.responseBody = .length(remaining - Int64(take))
        case .chunked:
            if !bytes.isEmpty {
                connection.state.output.appendHex(bytes.count)
                connection.state.output.append("\r\n" as StaticString)
                connection.state.output.append(bytes)
                connection.state.output.append("\r\n" as StaticString)
            }
        case .untilClose:
            connection.state.output.append(bytes)
        }
        bodyAppended(connection)
        return true
    }

    func finish(_ target: ResponseTarget) {
        if target.stream != nil { return finishHTTP2(target) }
        guard isCurrent(target) else { return }
        let connection = target.connection
        guard connection.state.responseStarted else {
            log("HTTP server: a response was finished before it was started; closing the connection")
            return close(connection)
        }
        finishResponse(connection)
    }

    /// Ends the response by closing the connection. What is queued is sent first, as far as the
    /// socket takes it now: the client sees the head and the body end short of their framing
    /// (RFC 9112 §8), not an empty reply. Not a body delimited by the close, whose cut would
    /// look like its end.
    func abort(_ target: ResponseTarget) {
        if target.stream != nil { return abortHTTP2(target) }
        guard isCurrent(target) else { return }
        let connection = target.connection
        let closeDelimited = if case .untilClose = connection.state.responseBody { true } else { false }
        // A failed flush closed the connection already.
        if !closeDelimited, connection.state.canWrite, !flush(connection) { return }
        close(connection)
    }

    // MARK: the head

    private func beginResponse(_ connection: Connection, _ head: ServerResponseHead, _ framing: BodyFraming) {
        connection.state.responseStarted = true
        let status = (100...999).contains(head.status) ? head.status : 500
        // RFC 9112 §6.3: no body after HEAD, 1xx, 204, 304 whatever the fields say.
        let statusWithoutBody = status < 200 || status == 204 || status == 304
        let bodyAllowed = !statusWithoutBody && !connection.state.requestIsHead
        var keepAlive = connection.state.keepAlive && !shuttingDown && !connection.state.inputClosed
        let mode: ResponseBodyMode
        switch framing {
        case .none:
            mode = .discard
        case .length(let length):
            mode = bodyAllowed ? .length(max(0, length)) : .discard
        case .streamed:
            if !bodyAllowed {
                mode = .discard
            } else if connection.state.minorVersion == 1 {
                mode = .chunked
            } else {
                // An HTTP/1.0 client knows no chunked coding: the body ends when the connection does.
                mode = .untilClose
                keepAlive = false
            }
        }
        connection.state.responseBody = mode
        connection.state.keepAlive = keepAlive
        let ending: StaticString =
            !keepAlive
            ? "Connection: close\r\n\r\n"
            : connection.state.minorVersion == 0 ? "Connection: keep-alive\r\n\r\n" : "\r\n"
        var chunked = false
        if case .chunked = mode { chunked = true }
        Self.writeHead(
            &connection.state.output, status, head,
            HeadFraming(framing: framing, bodyAllowed: bodyAllowed, chunked: chunked), ending: ending)
    }

    /// How a response head frames its body.
    private struct HeadFraming {
        var framing: BodyFraming
        /// The status and method allow a body.
        var bodyAllowed: Bool
        /// A streamed body goes chunked (an HTTP/1.1 client).
        var chunked: Bool
    }

    /// The status line, the handler's fields and the server's framing fields, in one access
    /// to the output queue.
    private static func writeHead(
        _ output: inout OutputQueue, _ status: Int, _ head: ServerResponseHead, _ framing: HeadFraming,
        ending: StaticString
    ) {
        let (bodyAllowed, chunked) = (framing.bodyAllowed, framing.chunked)
        let framing = framing.framing
        writeStatusLine(&output, status, head.reason)
        var sawContentLength = false
        var skipped = 0
        if case .length = framing, let serialized = head.serializedFields {
            // The handler's first fields as serializedFields(_:) wrote them, without Content-Length.
            serialized.bytes.withUnsafeBytes { output.append($0) }
            skipped = serialized.count
        }
        func write(_ fields: HeaderFields) {
            fields.withLines { lines in
                let first = min(skipped, lines.count)
                skipped -= first
                for index in first..<lines.count
                where appendField(&output, lines, index, keepContentLength: framing == .none) {
                    sawContentLength = true
                }
            }
        }
        write(head.leadingFields)
        write(head.fields)
        switch framing {
        case .none:
            // A body-bearing status with neither a length nor a body would leave the client
            // reading until close: say there is none.
            if bodyAllowed && !sawContentLength { output.append("Content-Length: 0\r\n" as StaticString) }
        case .length(let length):
            // RFC 9110 §8.6: no Content-Length in 1xx or 204 answers.
            if status >= 200 && status != 204 {
                output.append("Content-Length: " as StaticString)
                output.appendDecimal(max(0, length))
                output.append("\r\n" as StaticString)
            }
        case .streamed:
            if chunked { output.append("Transfer-Encoding: chunked\r\n" as StaticString) }
        }
        output.append(ending)
    }

    /// `fields` as a response head carries them when its body has a length: what
    /// ``ServerResponseHead/serializedFields`` holds (no Content-Length, no hop-by-hop framing
    /// fields, none that could not be sent safely).
    static func serializedFields(_ fields: HeaderFields) -> [UInt8] {
        var output = OutputQueue()
        fields.withLines { lines in
            for index in lines.indices { _ = appendField(&output, lines, index, keepContentLength: false) }
        }
        return output.takeOwnedBytes()
    }

    private static func writeStatusLine(_ output: inout OutputQueue, _ status: Int, _ reason: String?) {
        let line = output.reserve(13)
        let prefix: StaticString = "HTTP/1.1 "
        line.update(from: prefix.utf8Start, count: 9)
        line[9] = UInt8(truncatingIfNeeded: 0x30 + status / 100)
        line[10] = UInt8(truncatingIfNeeded: 0x30 + status / 10 % 10)
        line[11] = UInt8(truncatingIfNeeded: 0x30 + status % 10)
        line[12] = HTTPBytes.space
        output.commit(13)
        if let reason, reason.utf8.allSatisfy({ HTTPBytes.isFieldValue($0) }) {
            output.append(reason)
        } else if let phrase = reasonPhrase(status) {
            output.append(phrase)
        }
        output.append("\r\n" as StaticString)
    }

    /// Appends one of the handler's fields unless the server writes it itself or it could
    /// not be sent safely (a name that is not a token, CR/LF/NUL in the value); returns
    /// whether it was a Content-Length that was kept.
    ///
    /// `field` is the line's index in `lines`, where it is read: a copy of the line would cost a
    /// retain and a release of each of its strings.
    private static func appendField(
        _ output: inout OutputQueue, _ lines: UnsafeBufferPointer<HeaderField>, _ field: Int, keepContentLength: Bool
    ) -> Bool {
        ASCII.withUTF8(lines[field].name) { name -> Bool in
            guard let nameBase = name.baseAddress, !name.isEmpty else { return false }
            let count = name.count
            var isContentLength = false
            switch count {
            case 10:
                if HTTPBytes.equalsLowercase(nameBase, 10, "connection")
                    || HTTPBytes.equalsLowercase(nameBase, 10, "keep-alive")
                {
                    return false
                }
            case 14:
                if HTTPBytes.equalsLowercase(nameBase, 14, "content-length") {
                    guard keepContentLength else { return false }
                    isContentLength = true
                }
            case 17:
                if HTTPBytes.equalsLowercase(nameBase, 17, "transfer-encoding") { return false }
            default:
                break
            }
            for byte in name where !HTTPBytes.isToken(byte) { return false }
            return ASCII.withUTF8(lines[field].value) { value -> Bool in
                if let valueBase = value.baseAddress, HTTPBytes.hasInvalidFieldValueByte(valueBase, value.count) {
                    return false
                }
                let line = output.reserve(count + value.count + 4)
                line.update(from: nameBase, count: count)
                line[count] = HTTPBytes.colon
                line[count + 1] = HTTPBytes.space
                if let valueBase = value.baseAddress { (line + count + 2).update(from: valueBase, count: value.count) }
                line[count + 2 + value.count] = HTTPBytes.cr
                line[count + 3 + value.count] = HTTPBytes.lf
                output.commit(count + value.count + 4)
                return isContentLength
            }
        }
    }

    // MARK: the body

    private func appendBody(_ connection: Connection, _ bytes: [UInt8], accounted: Bool) {
        switch connection.state.responseBody {
        case .discard:
            if accounted { releaseAccounted(connection, bytes.count) }
        case .length(let remaining):
            if Int64(bytes.count) <= remaining {
                connection.state.output.append(bytes, accounted: accounted)
                connection.state.responseBody = .length(remaining - Int64(bytes.count))
            } else {
                // More than the length announced: the excess cannot be sent.
                let kept = Int(remaining)
                connection.state.output.append(Array(bytes[0..<kept]), accounted: accounted)
                if accounted { releaseAccounted(connection, bytes.count - kept) }
                connection.state.responseBody = .length(0)
            }
        case .chunked:
            guard !bytes.isEmpty else { return }
            connection.state.output.appendHex(bytes.count)
            connection.state.output.append("\r\n" as StaticString)
            connection.state.output.append(bytes, accounted: accounted)
            connection.state.output.append("\r\n" as StaticString)
        case .untilClose:
            connection.state.output.append(bytes, accounted: accounted)
        }
    }

    /// After a write from the handler: send soon, and at once when much is waiting.
    private func bodyAppended(_ connection: Connection) {
        if connection.state.output.count >= Self.pipelineOutputLimit && connection.state.canWrite
            && connection !== driving
        {
            _ = flush(connection)
        } else {
            markDirty(connection)
        }
    }

    private func finishResponse(_ connection: Connection) {
        switch connection.state.responseBody {
        case .length(let remaining) where remaining > 0:
            // The client would wait for bytes that never come: end the connection so it sees the cut.
            log("HTTP server: a response ended \(remaining) bytes short of its Content-Length; closing the connection")
            connection.state.keepAlive = false
        case .chunked:
            connection.state.output.append("0\r\n\r\n" as StaticString)
        default:
            break
        }
        connection.state.responseStarted = false
        connection.state.responseBody = .discard
        if connection.state.keepAlive && !shuttingDown && !connection.state.inputClosed {
            connection.state.phase = .head
            connection.state.parser.reset()
            connection.state.deadline =
                now + (connection.state.bufferedInput > 0 ? headerMilliseconds : idleMilliseconds)
            connection.state.shrinkInputIfIdle()
        } else {
            connection.state.phase = .closing
            connection.state.deadline = now + Self.lingerMilliseconds
        }
        markDirty(connection)
    }
}
#endif
