import CacheSystem
import CacheTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A misbehaving HTTP origin on 127.0.0.1 for what ``LoopbackOrigin`` does not do: exact scripted
/// bytes (interim responses, folded fields, malformed status lines, more bytes than a response's
/// framing allows), pauses between writes, connections closed or reset at a chosen point. Each
/// connection runs `script` on its own thread and records every request it reads, raw. With a
/// TLS server context it speaks HTTPS: the same bytes, encrypted, and a close with or without
/// `close_notify` (``Step/closeNotify``, ``Step/close``).
///
/// ```swift
/// let origin = try RawOrigin { request in
///     request.target == "/a"
///         ? [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"), .pause(0.05), .send("junk")]
///         : [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")]
/// }
/// ```
public final class RawOrigin: Sendable {
    /// A request as it arrived, raw.
    public struct Received: Sendable {
        /// 0 for the first connection accepted, 1 for the next…
        public var connection: Int
        public var text: String
    }

    /// One TLS handshake the origin took part in.
    public struct Handshake: Sendable, Equatable {
        /// 0 for the first connection accepted, 1 for the next…
        public var connection: Int
        /// The name the client sent with SNI (RFC 6066 §3); nil when it sent none.
        public var serverName: String?
        /// Whether an earlier session was resumed (RFC 8446 §2.2).
        public var resumed: Bool
        /// Why it failed, in CacheTLS's words; nil when it succeeded.
        public var failure: String?
    }

    private struct State {
        var received: [Received] = []
        var handshakes: [Handshake] = []
        var connections = 0
        var open: Set<Int32> = []
        var stopped = false
    }

    private let state = Locked(State())
    private let records: Bool
    private let listener: Int32
    /// Written to by ``stop()`` to wake the accept thread's `poll`.
    private let wake: (read: Int32, write: Int32)
    private let acceptExited = Locked(false)
    /// The port it listens on (the kernel chose it).
    public let port: UInt16
    /// Whether it serves HTTPS.
    public let isHTTPS: Bool

    /// An origin whose every accepted connection runs `script` on a thread of its own.
    ///
    /// - Parameters:
    ///   - records: Whether requests are kept for ``received`` (a long run that does not look
    ///     at them passes `false`, so memory stays flat).
    ///   - tls: A server context: every connection is TLS, its handshake done before `script`
    ///     runs (a client that refuses the certificate never reaches it). nil serves HTTP.
    public init(
        records: Bool = true, tls: TLSServerContext? = nil, _ script: @escaping @Sendable (RawConnection) -> Void
    ) throws(LoopbackOrigin.SocketError) {
        self.records = records
        isHTTPS = tls != nil
        (listener, port) = try POSIX.listeningSocket(port: 0)
        do {
            wake = try POSIX.wakePipe()
        } catch {
            POSIX.closeDescriptor(listener)
            throw error
        }
        let (listener, wake) = (listener, wake)
        let started = POSIX.spawnThread { [self] in
            defer {
                acceptExited.withLock { $0 = true }
                acceptExited.wakeWaiters()
            }
            while true {
                guard let ready = POSIX.waitForEither(listener, orWake: wake.read) else { continue }
                if ready.wake { return }
                let fd = POSIX.acceptConnection(listener)
                if fd < 0 { continue }
                let index: Int? = state.withLock { state in
                    guard !state.stopped else { return nil }
                    state.open.insert(fd)
                    state.connections += 1
                    return state.connections - 1
                }
                guard let index else {
                    POSIX.closeDescriptor(fd)
                    continue
                }
                let spawned = POSIX.spawnThread { [self] in
                    if let stream = stream(fd: fd, index: index, tls: tls) {
                        script(RawConnection(stream: stream, index: index, origin: self))
                    }
                    state.withLock { state in
                        state.open.remove(fd)
                        POSIX.closeDescriptor(fd)
                    }
                }
                if !spawned {
                    state.withLock { state in
                        state.open.remove(fd)
                        POSIX.closeDescriptor(fd)
                    }
                }
            }
        }
        guard started else {
            [listener, wake.read, wake.write].forEach(POSIX.closeDescriptor)
            throw LoopbackOrigin.SocketError(operation: "pthread_create", code: EAGAIN)
        }
    }

    deinit { stop() }

    /// What the origin does after reading a request.
    public enum Step: Sendable {
        /// Writes these bytes (in one `send` when the socket buffer allows).
        case send(String)
        case bytes([UInt8])
        /// Waits this many seconds.
        case pause(Double)
        /// Closes the connection (FIN), over HTTPS without `close_notify`: a cut, to a TLS
        /// client. No further request is read on it.
        case close
        /// Over HTTPS, sends `close_notify` (RFC 8446 §6.1), then closes the connection; over
        /// HTTP the same as ``close``. No further request is read on it.
        case closeNotify
        /// Resets the connection (RST: `SO_LINGER` 0, then close); no further request is read.
        case reset
    }

    /// A request as the scripted origin read it.
    public struct Request: Sendable {
        public var method: String
        public var target: String
        /// 0 for the first connection accepted, 1 for the next…
        public var connection: Int
        /// 0 for the first request on its connection, 1 for the next…
        public var number: Int
        public var text: String
    }

    /// An origin that answers every request it reads with the steps `answer` gives for it,
    /// until a step closes or resets the connection.
    public convenience init(
        tls: TLSServerContext? = nil, answer: @escaping @Sendable (Request) -> [Step]
    ) throws(LoopbackOrigin.SocketError) {
        try self.init(tls: tls) { connection in
            var number = 0
            while let text = connection.readRequest() {
                let words = text.prefix { $0 != "\r" }.split(separator: " ")
                let request = Request(
                    method: words.first.map(String.init) ?? "", target: words.dropFirst().first.map(String.init) ?? "",
                    connection: connection.index, number: number, text: text)
                number += 1
                for step in answer(request) {
                    switch step {
                    case .send(let text): connection.send(text)
                    case .bytes(let bytes): connection.send(bytes)
                    case .pause(let seconds): usleep(UInt32(seconds * 1_000_000))
                    case .close: return
                    case .closeNotify:
                        connection.closeNotify()
                        return
                    case .reset:
                        connection.resetOnClose()
                        return
                    }
                }
            }
        }
    }

    /// `http://127.0.0.1:PORT` (`https://` when serving HTTPS) followed by `path`.
    public func url(_ path: String) -> String { "\(isHTTPS ? "https" : "http")://127.0.0.1:\(port)\(path)" }

    /// Every request read so far, in the order they were read.
    public var received: [Received] { state.withLock { $0.received } }
    /// Every TLS handshake so far, in order (empty over HTTP).
    public var handshakes: [Handshake] { state.withLock { $0.handshakes } }

    /// The stream of an accepted connection: the socket, or TLS over it once the handshake is
    /// done (recorded either way); nil when the handshake failed.
    private func stream(fd: Int32, index: Int, tls: TLSServerContext?) -> OriginStream? {
        guard let tls else { return OriginStream(fd: fd) }
        do throws(TLSError) {
            let stream = try OriginStream(fd: fd, tls: tls)
            state.withLock {
                $0.handshakes.append(
                    Handshake(connection: index, serverName: stream.serverName, resumed: stream.isResumed, failure: nil)
                )
            }
            return stream
        } catch {
            state.withLock {
                $0.handshakes.append(Handshake(connection: index, serverName: nil, resumed: false, failure: "\(error)"))
            }
            return nil
        }
    }
    /// How many connections were accepted.
    public var connections: Int { state.withLock { $0.connections } }

    fileprivate func record(_ received: Received) {
        guard records else { return }
        state.withLock { $0.received.append(received) }
    }

    /// Stops accepting, shuts every connection down and waits for the accept thread.
    public func stop() {
        let first: Bool = state.withLock { state in
            guard !state.stopped else { return false }
            state.stopped = true
            state.open.forEach { POSIX.shutdownBoth($0) }
            return true
        }
        guard first else { return }
        POSIX.poke(wake.write)
        acceptExited.withLock(when: { $0 }) { _ in }
        [listener, wake.read, wake.write].forEach(POSIX.closeDescriptor)
    }
}

/// One accepted connection of a ``RawOrigin``, used by its own thread.
public final class RawConnection {
    /// 0 for the first connection the origin accepted, 1 for the next…
    public let index: Int
    private let stream: OriginStream
    private let origin: RawOrigin
    private var buffer: [UInt8] = []

    fileprivate init(stream: OriginStream, index: Int, origin: RawOrigin) {
        self.stream = stream
        self.index = index
        self.origin = origin
    }

    /// Reads the next request (head, and a body of its Content-Length) and records it; nil when
    /// the client closed the connection or the origin stopped.
    @discardableResult
    public func readRequest() -> String? {
        let separator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        var headEnd: Int?
        while true {
            if let end = buffer.indices.dropLast(3).first(where: { buffer[$0..<$0 + 4].elementsEqual(separator) }) {
                headEnd = end + 4
                break
            }
            guard receiveMore() else { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        var length = 0
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).filter { $0 != " " && $0 != "\t" }) ?? 0
        }
        while buffer.count < headEnd + length {
            guard receiveMore() else { return nil }
        }
        let text = String(decoding: buffer[..<(headEnd + length)], as: UTF8.self)
        buffer.removeFirst(headEnd + length)
        origin.record(.init(connection: index, text: text))
        return text
    }

    /// Writes `text` as UTF-8, all of it unless the peer is gone.
    public func send(_ text: String) { send(Array(text.utf8)) }

    /// Writes `bytes`, all of them unless the peer is gone.
    public func send(_ bytes: [UInt8]) { _ = stream.sendAll(bytes) }

    /// Whether the client stays silent for `milliseconds`: false as soon as a byte of its next
    /// request is here (or is already buffered), or the connection ends.
    public func staysQuiet(milliseconds: Int32) -> Bool {
        guard buffer.isEmpty else { return false }
        return !stream.waitReadable(milliseconds: milliseconds)
    }

    /// Over HTTPS, sends `close_notify` (the close that follows the script is then a clean
    /// TLS close); nothing over HTTP.
    public func closeNotify() {
        stream.closeNotify()
    }

    /// Makes the close that follows the script a reset (RST) rather than a FIN.
    public func resetOnClose() {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(stream.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
    }

    private func receiveMore() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = chunk.withUnsafeMutableBytes { stream.receive(into: $0) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }
}
