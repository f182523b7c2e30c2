#if os(Linux)
import CEpollHTTPCache
// Reading requests: the per-connection state machine driven by readiness events. One request
// at a time per connection (RFC 9112 §9.3.2): pipelined bytes wait in the input buffer until
// the response before them is complete.
import CacheSystem
import CacheSemantics
import HTTPClient
@_spi(Wire) import HTTPWire
import Glibc

extension EventLoop {
    /// Makes all the progress the connection allows without blocking.
    func drive(_ connection: Connection) {
        let outer = driving
        driving = connection
        defer { driving = outer }
        while !connection.state.closed {
            if !connection.state.output.isEmpty && connection.state.canWrite {
                guard flush(connection) else { return }
            }
            switch connection.state.phase {
            case .handshake:
                guard advanceHandshake(connection) else { return }
            case .head, .body:
                if connection.state.output.count > Self.pipelineOutputLimit { return }
                if connection.state.bufferedInput > 0 && processInput(connection) { continue }
                guard connection.state.canRead else { return }
                let phase = connection.state.phase
                // No progress possible (a full buffer that cannot grow): wait rather than spin.
                if !readInput(connection) && connection.state.canRead && !connection.state.closed
                    && connection.state.phase == phase
                {
                    return
                }
            case .handling:
                return
            case .closing:
                guard connection.state.output.isEmpty else { return }
                // The client has closed its side already: nothing left to drain.
                if connection.state.inputClosed || shuttingDown { return close(connection) }
                if !connection.state.writeShut {
                    guard sendCloseNotify(connection) else { return }
                    connection.state.writeShut = true
                    // RFC 9112 §9.6: the staged close keeps bytes the client still sends from
                    // turning the close into a reset that destroys the response. A client whose
                    // last request this was, with nothing of it unread, sends none: close at
                    // once, as nginx does, rather than wake again for its close.
                    if connection.state.clientSentLast && connection.state.bufferedInput == 0
                        && !Self.hasUnreadInput(connection.fd)
                    {
                        return close(connection)
                    }
                    Glibc.shutdown(connection.fd, Int32(SHUT_WR))
                    connection.state.deadline = now + Self.lingerMilliseconds
                }
                return linger(connection)
            case .tunnel:
                return driveTunnel(connection)
            case .http2:
                guard driveHTTP2(connection) else { return }
            }
        }
    }

    /// Sends queued output; `false` when the connection broke (and is closed).
    func flush(_ connection: Connection) -> Bool {
        var accountedSent = 0
        let before = connection.state.output.count
        let result =
            if let tls = connection.state.tls {
                flushTLS(connection, tls, accountedSent: &accountedSent)
            } else {
                connection.state.output.flush(connection.fd, vectors, accountedSent: &accountedSent)
            }
        if accountedSent > 0 { releaseAccounted(connection, accountedSent) }
        switch result {
        case .done:
            connection.state.writeBlockedSince = 0
            if connection.state.phase == .head && connection.state.bufferedInput == 0 {
                // The idle time starts when the last response has left.
                connection.state.deadline = max(connection.state.deadline, now + idleMilliseconds)
            }
            return true
        case .blocked:
            connection.state.canWrite = false
            if connection.state.output.count < before || connection.state.writeBlockedSince == 0 {
                connection.state.writeBlockedSince = now
            }
            return true
        case .failed:
            close(connection)
            return false
        }
    }

    /// Gives writers on other threads back the room their bytes took.
    func releaseAccounted(_ connection: Connection, _ count: Int) { releaseAccounted(connection.shared, count) }

    /// Gives writers of one answer (an HTTP/1.1 connection's, an HTTP/2 stream's) back room.
    func releaseAccounted(_ shared: Locked<ConnectionShared>, _ count: Int) {
        let roomAgain = shared.withLock { shared in
            shared.queuedBytes -= count
            return shared.queuedBytes < Self.backPressureLimit
        }
        if roomAgain { shared.wakeWaiters() }
    }

    /// Reads what the socket has; `true` when bytes arrived.
    private func readInput(_ connection: Connection) -> Bool {
        let limit = max(maxHeaderBytes + 1, connection.state.phase == .head ? 16 * 1024 : 64 * 1024)
        let space = connection.state.prepareInput(limit: limit)
        guard space > 0 else { return false }
        switch receive(connection, into: connection.state.input! + connection.state.inputEnd, count: space) {
        case .bytes(let received):
            if connection.state.phase == .body {
                connection.state.bodyProgress.received(received, at: now)
                connection.state.deadline = bodyDeadline(connection.state.bodyProgress)
            } else if connection.state.bufferedInput == 0 && !connection.state.parser.hasStarted {
                // The first byte of a request: from now on its head must be complete in time.
                connection.state.deadline = now + headerMilliseconds
            }
            connection.state.inputEnd += received
            return true
        case .closed:
            connection.state.canRead = false
            connection.state.inputClosed = true
            // No complete request can follow: send what is queued, then close.
            connection.state.phase = .closing
            connection.state.keepAlive = false
            connection.state.deadline = now + Self.lingerMilliseconds
        case .wouldBlock:
            break
        case .failed:
            close(connection)
        }
        return false
    }

    /// Whether bytes from the client wait in the socket (its end of stream does not count).
    private static func hasUnreadInput(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) > 0
    }

    /// Discards input after the last response until the client closes, 64 KiB or 2 s.
    private func linger(_ connection: Connection) {
        while connection.state.canRead {
            connection.state.inputStart = 0
            connection.state.inputEnd = 0
            let space = connection.state.prepareInput(limit: 64 * 1024)
            let received = recv(connection.fd, connection.state.input!, space, 0)
            if received > 0 {
                connection.state.lingerBytes += received
                if connection.state.lingerBytes > Self.lingerBytes { return close(connection) }
                // A short read empties the socket, but its FIN (RDHUP seen already, and the edge
                // with it) is reported only by the next read: read on to it rather than wait for the deadline.
                if received < space && !connection.state.hungUp { connection.state.canRead = false }
            } else if received == 0 {
                return close(connection)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                connection.state.canRead = false
            } else if errno != EINTR {
                return close(connection)
            }
        }
    }

    /// Parses buffered input; `true` when something changed.
    private func processInput(_ connection: Connection) -> Bool {
        switch connection.state.phase {
        case .head:
            if http2 && connection.state.sequence == 0 && connection.state.tls == nil
                && !connection.state.parser.hasStarted
            {
                // RFC 9113 §3.3: a cleartext client with prior knowledge opens with the preface.
                switch HTTP2Preface.match(
                    connection.state.input! + connection.state.inputStart, count: connection.state.bufferedInput)
                {
                case .yes: return startHTTP2(connection)
                case .partial: return false
                case .no: break
                }
            }
            switch connection.state.parser.parse(
                connection.state.input! + connection.state.inputStart, count: connection.state.bufferedInput)
            {
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
        case .handshake, .handling, .closing, .tunnel, .http2:
            return false
        }
    }

    private func headComplete(_ connection: Connection) {
        let base = UnsafePointer(connection.state.input! + connection.state.inputStart)
        connection.state.request = connection.state.parser.makeRequest(
            base, peer: connection, isTLS: connection.state.tls != nil)
        connection.state.keepAlive = connection.state.parser.keepAlive
        connection.state.minorVersion = connection.state.parser.minorVersion
        connection.state.requestIsHead = connection.state.parser.isHead
        connection.state.inputStart += connection.state.parser.headLength
        let framing = connection.state.parser.framing
        let expectsContinue = connection.state.parser.expectsContinue
        switch framing {
        case .none:
            dispatch(connection)
            return
        case .length(let length):
            connection.state.bodyRemaining = length
            connection.state.body.reserveCapacity(Int(min(length, 1 << 20)))
        case .chunked:
            connection.state.chunkedDecoder = ChunkedDecoder(
                maxBodyBytes: maxBodyBytes, maxTrailerBytes: maxHeaderBytes, maxTrailerFields: maxFieldCount)
        }
        connection.state.phase = .body
        connection.state.bodyProgress = BodyProgress(start: now)
        connection.state.deadline = bodyDeadline(connection.state.bodyProgress)
        // RFC 9110 §10.1.1: ask for the body (unless it is already arriving).
        if expectsContinue && connection.state.bufferedInput == 0 {
            connection.state.output.append("HTTP/1.1 100 Continue\r\n\r\n" as StaticString)
        }
    }

    /// When the whole of `body` must have arrived (loop ms): ``bodyMilliseconds`` after it
    /// began, and a second more for each ``bodyMinimumRate`` bytes of it.
    private func bodyAllowance(_ body: BodyProgress) -> Int {
        let (earned, overflow) = body.bytes.multipliedReportingOverflow(by: 1000)
        return body.start + bodyMilliseconds + (overflow ? Int.max / 4 : earned / bodyMinimumRate)
    }

    /// When a request body (an HTTP/1.1 connection's, an HTTP/2 stream's) is cut: once no byte
    /// has come for ``bodyMilliseconds``, or once its ``bodyAllowance(_:)`` has passed.
    func bodyDeadline(_ body: BodyProgress) -> Int { min(body.last + bodyMilliseconds, bodyAllowance(body)) }

    /// The `408` for a body past its ``bodyDeadline(_:)``, saying which limit it passed.
    func lateBody(_ body: BodyProgress) -> Rejection {
        let seconds = Double(bodyMilliseconds) / 1000
        guard bodyAllowance(body) < body.last + bodyMilliseconds else {
            return Rejection(status: 408, reason: "no body byte arrived for \(seconds) s")
        }
        return Rejection(
            status: 408,
            reason: "the body arrived slower than \(bodyMinimumRate) bytes a second after its first \(seconds) s")
    }

    /// Takes buffered body bytes; `true` when something changed.
    private func readBody(_ connection: Connection) -> Bool {
        let available = connection.state.bufferedInput
        let base = connection.state.input! + connection.state.inputStart
        if connection.state.chunkedDecoder != nil {
            let (consumed, outcome) = connection.state.chunkedDecoder!.decode(
                base, count: available, into: &connection.state.body)
            connection.state.inputStart += consumed
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
        let take = Int(min(Int64(available), connection.state.bodyRemaining))
        connection.state.body.append(contentsOf: UnsafeBufferPointer(start: base, count: take))
        connection.state.inputStart += take
        connection.state.bodyRemaining -= Int64(take)
        if connection.state.bodyRemaining == 0 { dispatch(connection) }
        return take > 0
    }

    /// Hands the complete request to the handler.
    private func dispatch(_ connection: Connection) {
        guard var request = connection.state.request.take() else { return }
        connection.state.chunkedDecoder = nil
        swap(&request.body, &connection.state.body)
        connection.state.phase = .handling
        connection.state.clientSentLast = !connection.state.parser.keepAlive
        connection.state.deadline = Int.max
        connection.state.sequence &+= 1
        connection.state.responseStarted = false
        countRequest()
        let responder = Responder(
            loop: self, target: ResponseTarget(connection: connection, sequence: connection.state.sequence))
        handler.handle(request, responder)
    }

    /// What was read of the request being refused: the request when its head was complete,
    /// else its method and target when its request-line was read, else `-` for both.
    private func readOfRequest(_ connection: Connection) -> ServerRequest {
        if let request = connection.state.request { return request }
        let parser = connection.state.parser
        var method = "-"
        var target = "-"
        if connection.state.phase == .head, parser.sawRequestLine, let input = connection.state.input {
            let base = UnsafePointer(input + connection.state.inputStart)
            method = HTTPBytes.string(base + parser.methodStart, parser.methodCount)
            target = HTTPBytes.string(base + parser.targetStart, parser.targetCount)
        }
        return ServerRequest(
            method: method, target: target, minorVersion: parser.sawRequestLine ? parser.minorVersion : 1, fields: [:],
            peerIsLoopback: connection.peerIsLoopback, peerAddress: connection.peerAddress,
            isTLS: connection.state.tls != nil)
    }

    /// Refuses the request: a short text/plain answer, `Connection: close`, then a lingering
    /// close so the client reads it (RFC 9112 §9.6).
    func reject(_ connection: Connection, _ rejection: Rejection) {
        countRejection()
        let phrase = reasonPhrase(rejection.status) ?? "Error"
        // A client can send malformed requests as fast as it likes: one line a second.
        limitedLog(
            .rejectedRequest,
            "HTTP server: rejected a request from \(peerDescription(connection.fd)): \(rejection.status) \(phrase): \(rejection.reason)"
        )
        let body = "\(rejection.status) \(phrase): \(rejection.reason); the connection is closed\n"
        // The access log's line: one per refused request, as for a request handed on.
        handler.rejected(readOfRequest(connection), status: rejection.status, bodyBytes: body.utf8.count)
        var head = "HTTP/1.1 \(rejection.status) \(phrase)\r\nContent-Type: text/plain; charset=utf-8\r\n"
        if let proxyStatus = proxyStatus(rejecting: rejection.status) { head += "Proxy-Status: \(proxyStatus)\r\n" }
        head += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        head += "Date: \(HTTPDate.format(Timestamp(secondsSince1970: Double(time(nil)))))\r\n\r\n"
        connection.state.output.append(head + body)
        connection.state.phase = .closing
        connection.state.keepAlive = false
        connection.state.inputStart = connection.state.inputEnd
        connection.state.request = nil
        connection.state.body = []
        connection.state.chunkedDecoder = nil
        connection.state.deadline = now + Self.lingerMilliseconds
    }
}
#endif
