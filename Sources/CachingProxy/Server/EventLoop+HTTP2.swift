#if os(Linux)
// HTTP/2 connections on the loop thread: the switch from TLS (ALPN `h2`) or from the cleartext
// preface, reading into the session, writing what it produces, and the handler's answers on
// streams. The session (HTTP2Session.swift) holds the protocol; this file the connection.
import CNGHTTP2HTTPCache
import CacheSystem
import Glibc

extension EventLoop {
    /// Turns the connection into an HTTP/2 one; `false` (and closed) when no session could be made.
    func startHTTP2(_ connection: Connection) -> Bool {
        guard
            let session = HTTP2Session(
                loop: self, connection: connection, isTLS: connection.state.tls != nil,
                maxHeaderListSize: maxHeaderBytes)
        else {
            log("HTTP server: cannot start an HTTP/2 session (out of memory?); closing the connection")
            close(connection)
            return false
        }
        connection.state.h2 = session
        connection.state.phase = .http2
        connection.state.keepAlive = false
        // The preface and the first request come within the header timeout; then idle rules.
        connection.state.deadline = now + headerMilliseconds
        countHTTP2Connection()
        return true
    }

    /// Reads what the socket has into the session and lets it write; `true` when the caller is
    /// to go on (output waits and the socket may take it, or the connection began closing).
    func driveHTTP2(_ connection: Connection) -> Bool {
        guard let session = connection.state.h2 else { return false }
        // Bytes buffered before the switch (the cleartext preface and what followed it).
        if connection.state.bufferedInput > 0 {
            guard feed(connection, session) else { return !connection.state.closed }
        }
        while connection.state.canRead && !connection.state.closed
            && connection.state.output.count < HTTP2Limits.outputHighWater
        {
            let space = connection.state.prepareInput(limit: 64 * 1024)
            guard space > 0 else { break }
            switch receive(connection, into: connection.state.input! + connection.state.inputEnd, count: space) {
            case .bytes(let received):
                connection.state.inputEnd += received
                guard feed(connection, session) else { return !connection.state.closed }
            case .closed:
                connection.state.canRead = false
                connection.state.inputClosed = true
                session.clientEnded()
            case .wouldBlock:
                break
            case .failed:
                close(connection)
                return false
            }
        }
        if connection.state.closed { return false }
        connection.state.shrinkInputIfIdle()
        // While streams are open more output follows: the queue, and TLS's gathering of records,
        // keep their buffers between flushes (100 KB answers otherwise fault in fresh pages for
        // every flush). The sweep gives them back once the session has no stream.
        if !session.streams.isEmpty { session.keepBuffers(true) }
        guard session.send() else {
            close(connection)
            return false
        }
        if connection.state.inputClosed && session.hasStreamWaitingOnWindow {
            session.resetStalledAfterClientEnded()
            guard session.send() else {
                close(connection)
                return false
            }
        }
        if session.isFinished || (connection.state.inputClosed && session.streams.isEmpty) {
            // The session ended (GOAWAY exchanged, streams done), or the client sent its last
            // byte and every stream is answered: send what is queued, then close (RFC 9113 §6.8).
            enterClosing(connection)
            return true
        }
        return !connection.state.output.isEmpty && connection.state.canWrite
    }

    /// Hands buffered input to the session; `false` when the connection is to end.
    private func feed(_ connection: Connection, _ session: HTTP2Session) -> Bool {
        let ok = session.receive(
            connection.state.input! + connection.state.inputStart, count: connection.state.bufferedInput)
        connection.state.inputStart = connection.state.inputEnd
        if !ok {
            _ = session.send()
            enterClosing(connection)
            return false
        }
        return true
    }

    private func enterClosing(_ connection: Connection) {
        guard connection.state.phase == .http2 else { return }
        connection.state.phase = .closing
        // No stream follows: buffers go once what is queued has left (no sweep comes now).
        connection.state.h2?.keepBuffers(false)
        connection.state.deadline = now + Self.lingerMilliseconds
    }

    /// The stream `target` answers, while its answer may still be given.
    func http2Stream(_ target: ResponseTarget) -> (HTTP2Session, HTTP2Stream)? {
        guard let stream = target.stream, !target.connection.state.closed, let session = target.connection.state.h2,
            session.isAnswering(stream)
        else { return nil }
        return (session, stream)
    }

    // MARK: answers on streams

    func respondHTTP2(_ target: ResponseTarget, _ head: ServerResponseHead, _ body: [UInt8], _ framing: BodyFraming) {
        guard let (session, stream) = http2Stream(target), !stream.responseStarted else { return }
        session.submit(stream, head, framing: framing)
        session.append(stream, body, accounted: false)
        session.finish(stream)
        markDirty(target.connection)
    }

    func startHTTP2(_ target: ResponseTarget, _ head: ServerResponseHead, _ framing: BodyFraming) {
        guard let (session, stream) = http2Stream(target), !stream.responseStarted else { return }
        session.submit(stream, head, framing: framing)
        markDirty(target.connection)
    }

    /// 1xx before the final answer (RFC 9113 §8.1), never 101 (RFC 9113 §8.6).
    func interimHTTP2(_ target: ResponseTarget, _ head: ServerResponseHead) {
        guard let (session, stream) = http2Stream(target), !stream.responseStarted,
            (100...199).contains(head.status), head.status != 101
        else { return }
        session.interim(stream, head)
        markDirty(target.connection)
    }

    func writeHTTP2(_ target: ResponseTarget, _ bytes: [UInt8], accounted: Bool) -> Bool {
        guard let (session, stream) = http2Stream(target), stream.responseStarted, !stream.finished else {
            if accounted, let stream = target.stream { releaseAccounted(stream.shared, bytes.count) }
            return false
        }
        session.append(stream, bytes, accounted: accounted)
        markDirty(target.connection)
        return true
    }

    func finishHTTP2(_ target: ResponseTarget) {
        guard let (session, stream) = http2Stream(target) else { return }
        guard stream.responseStarted else {
            log("HTTP server: a response was finished before it was started; resetting its HTTP/2 stream")
            session.reset(stream)
            return markDirty(target.connection)
        }
        session.finish(stream)
        markDirty(target.connection)
    }

    /// Ends the stream early (RST_STREAM INTERNAL_ERROR): the other streams go on.
    func abortHTTP2(_ target: ResponseTarget) {
        guard let (session, stream) = http2Stream(target) else { return }
        session.reset(stream)
        markDirty(target.connection)
    }
}
#endif
