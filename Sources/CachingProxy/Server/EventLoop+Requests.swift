// Reading requests: the per-connection state machine driven by readiness events. One request
// at a time per connection (RFC 9112 §9.3.2): pipelined bytes wait in the input buffer until
// the response before them is complete.
import CEpollHTTPCache
import CacheSemantics
import Glibc

extension EventLoop {
    /// Makes all the progress the connection allows without blocking.
    func drive(_ connection: Connection) {
        let outer = driving
        driving = connection
        defer { driving = outer }
        while !connection.closed {
            if !connection.output.isEmpty && connection.canWrite {
                guard flush(connection) else { return }
            }
            switch connection.phase {
            case .head, .body:
                if connection.output.count > Self.pipelineOutputLimit { return }
                if connection.bufferedInput > 0 && processInput(connection) { continue }
                guard connection.canRead else { return }
                let phase = connection.phase
                // No progress possible (a full buffer that cannot grow): wait rather than spin.
                if !readInput(connection) && connection.canRead && !connection.closed && connection.phase == phase {
                    return
                }
            case .handling:
                return
            case .closing:
                guard connection.output.isEmpty else { return }
                // The client has closed its side already: nothing left to drain.
                if connection.inputClosed || shuttingDown { return close(connection) }
                if !connection.writeShut {
                    connection.writeShut = true
                    Glibc.shutdown(connection.fd, Int32(SHUT_WR))
                    connection.deadline = now + Self.lingerMilliseconds
                }
                return linger(connection)
            case .tunnel:
                return driveTunnel(connection)
            }
        }
    }

    /// Sends queued output; `false` when the connection broke (and is closed).
    func flush(_ connection: Connection) -> Bool {
        var accountedSent = 0
        let before = connection.output.count
        let result = connection.output.flush(connection.fd, vectors, accountedSent: &accountedSent)
        if accountedSent > 0 { releaseAccounted(connection, accountedSent) }
        switch result {
        case .done:
            connection.writeBlockedSince = 0
            if connection.phase == .head && connection.bufferedInput == 0 {
                // The idle time starts when the last response has left.
                connection.deadline = max(connection.deadline, now + idleMilliseconds)
            }
            return true
        case .blocked:
            connection.canWrite = false
            if connection.output.count < before || connection.writeBlockedSince == 0 {
                connection.writeBlockedSince = now
            }
            return true
        case .failed:
            close(connection)
            return false
        }
    }

    /// Gives writers on other threads back the room their bytes took.
    func releaseAccounted(_ connection: Connection, _ count: Int) {
        let shared = connection.shared
        shared.lock.withLock {
            shared.queuedBytes -= count
            if shared.waiters > 0 && shared.queuedBytes < Self.backPressureLimit { shared.condition.broadcast() }
        }
    }

    /// Reads what the socket has; `true` when bytes arrived.
    private func readInput(_ connection: Connection) -> Bool {
        let limit = max(maxHeaderBytes + 1, connection.phase == .head ? 16 * 1024 : 64 * 1024)
        let space = connection.prepareInput(limit: limit)
        guard space > 0 else { return false }
        let received = recv(connection.fd, connection.input! + connection.inputEnd, space, 0)
        if received > 0 {
            if connection.phase == .body {
                connection.deadline = now + bodyMilliseconds
            } else if connection.bufferedInput == 0 && !connection.parser.hasStarted {
                // The first byte of a request: from now on its head must be complete in time.
                connection.deadline = now + headerMilliseconds
            }
            connection.inputEnd += received
            if received < space { connection.canRead = false }
            return true
        }
        if received == 0 {
            connection.canRead = false
            connection.inputClosed = true
            // No complete request can follow: send what is queued, then close.
            connection.phase = .closing
            connection.keepAlive = false
            connection.deadline = now + Self.lingerMilliseconds
            return false
        }
        switch errno {
        case EAGAIN, EWOULDBLOCK:
            connection.canRead = false
        case EINTR:
            return true
        default:
            close(connection)
        }
        return false
    }

    /// Discards input after the last response until the client closes, 64 KiB or 2 s.
    private func linger(_ connection: Connection) {
        while connection.canRead {
            connection.inputStart = 0
            connection.inputEnd = 0
            let space = connection.prepareInput(limit: 64 * 1024)
            let received = recv(connection.fd, connection.input!, space, 0)
            if received > 0 {
                connection.lingerBytes += received
                if connection.lingerBytes > Self.lingerBytes { return close(connection) }
                if received < space { connection.canRead = false }
            } else if received == 0 {
                return close(connection)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                connection.canRead = false
            } else if errno != EINTR {
                return close(connection)
            }
        }
    }

    /// Parses buffered input; `true` when something changed.
    private func processInput(_ connection: Connection) -> Bool {
        switch connection.phase {
        case .head:
            switch connection.parser.parse(connection.input! + connection.inputStart, count: connection.bufferedInput) {
            case .needMore:
                return false
            case .rejected(let rejection):
                reject(connection, rejection)
                return true
            case .complete:
                headComplete(connection)
                return true
            }
        case .body:
            return readBody(connection)
        case .handling, .closing, .tunnel:
            return false
        }
    }

    private func headComplete(_ connection: Connection) {
        let base = connection.input! + connection.inputStart
        let parser = connection.parser
        var fields: [HeaderField] = []
        fields.reserveCapacity(parser.fields.count)
        for span in parser.fields {
            fields.append(
                HeaderField(
                    name: String(
                        decoding: UnsafeBufferPointer(start: base + span.nameStart, count: span.nameCount),
                        as: UTF8.self),
                    value: String(
                        decoding: UnsafeBufferPointer(start: base + span.valueStart, count: span.valueCount),
                        as: UTF8.self)))
        }
        connection.request = ServerRequest(
            method: String(
                decoding: UnsafeBufferPointer(start: base + parser.methodStart, count: parser.methodCount),
                as: UTF8.self),
            target: String(
                decoding: UnsafeBufferPointer(start: base + parser.targetStart, count: parser.targetCount),
                as: UTF8.self),
            minorVersion: parser.minorVersion, fields: HeaderFields(fields), peerIsLoopback: connection.peerIsLoopback)
        connection.keepAlive = parser.keepAlive
        connection.minorVersion = parser.minorVersion
        connection.requestIsHead = parser.isHead
        connection.inputStart += parser.headLength
        switch parser.framing {
        case .none:
            dispatch(connection)
            return
        case .length(let length):
            connection.bodyRemaining = length
            connection.body.reserveCapacity(Int(min(length, 1 << 20)))
        case .chunked:
            connection.chunkedDecoder = ChunkedDecoder(
                maxBodyBytes: maxBodyBytes, maxTrailerBytes: maxHeaderBytes, maxTrailerFields: maxFieldCount)
        }
        connection.phase = .body
        connection.deadline = now + bodyMilliseconds
        // RFC 9110 §10.1.1: ask for the body (unless it is already arriving).
        if parser.expectsContinue && connection.bufferedInput == 0 {
            connection.output.append("HTTP/1.1 100 Continue\r\n\r\n" as StaticString)
        }
    }

    /// Takes buffered body bytes; `true` when something changed.
    private func readBody(_ connection: Connection) -> Bool {
        let available = connection.bufferedInput
        let base = connection.input! + connection.inputStart
        if connection.chunkedDecoder != nil {
            let (consumed, outcome) = connection.chunkedDecoder!.decode(base, count: available, into: &connection.body)
            connection.inputStart += consumed
            switch outcome {
            case .needMore:
                return consumed > 0
            case .done:
                dispatch(connection)
            case .rejected(let rejection):
                reject(connection, rejection)
            }
            return true
        }
        let take = Int(min(Int64(available), connection.bodyRemaining))
        connection.body.append(contentsOf: UnsafeBufferPointer(start: base, count: take))
        connection.inputStart += take
        connection.bodyRemaining -= Int64(take)
        if connection.bodyRemaining == 0 { dispatch(connection) }
        return take > 0
    }

    /// Hands the complete request to the handler.
    private func dispatch(_ connection: Connection) {
        guard var request = connection.request else { return }
        connection.request = nil
        connection.chunkedDecoder = nil
        swap(&request.body, &connection.body)
        connection.phase = .handling
        connection.deadline = Int.max
        connection.sequence &+= 1
        connection.responseStarted = false
        countRequest()
        let responder = Responder(
            loop: self, target: ResponseTarget(connection: connection, sequence: connection.sequence))
        handler.handle(request, responder)
    }

    /// Refuses the request: a short text/plain answer, `Connection: close`, then a lingering
    /// close so the client reads it (RFC 9112 §9.6).
    func reject(_ connection: Connection, _ rejection: Rejection) {
        countRejection()
        let phrase = reasonPhrase(rejection.status) ?? "Error"
        log(
            "HTTP server: rejected a request from \(peerDescription(connection.fd)): \(rejection.status) \(phrase): \(rejection.reason)"
        )
        let body = "\(rejection.status) \(phrase): \(rejection.reason); the connection is closed\n"
        var head = "HTTP/1.1 \(rejection.status) \(phrase)\r\nContent-Type: text/plain; charset=utf-8\r\n"
        head += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        head += "Date: \(HTTPDate.format(Timestamp(secondsSince1970: Double(time(nil)))))\r\n\r\n"
        connection.output.append(head + body)
        connection.phase = .closing
        connection.keepAlive = false
        connection.inputStart = connection.inputEnd
        connection.request = nil
        connection.body = []
        connection.chunkedDecoder = nil
        connection.deadline = now + Self.lingerMilliseconds
    }
}
