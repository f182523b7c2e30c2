#if os(Linux)
import CacheSystem
import CacheTLS
import Glibc
import LoopbackOrigin

/// An HTTPS origin on 127.0.0.1 that answers with exact scripted bytes over TLS, as
/// ``RawOrigin`` does over TCP: responses framed wrongly on purpose, closes with or without
/// `close_notify`, and a record of every handshake (the SNI name asked for, whether the
/// session was resumed, why it failed). Each connection runs on a thread of its own.
///
/// ```swift
/// let origin = try TLSScriptedOrigin(context) { request in
///     [.send("HTTP/1.1 200 OK\r\n\r\nclose-delimited"), .close(notify: false)]
/// }
/// ```
final class TLSScriptedOrigin: Sendable {
    /// What the origin does after reading a request.
    enum Step: Sendable {
        /// Writes these bytes over TLS.
        case send(String)
        /// Waits this many seconds.
        case pause(Double)
        /// Ends the connection: after `close_notify` (RFC 8446 §6.1) when `notify`, else cut
        /// at the TCP level, as a failing server or an attacker would.
        case close(notify: Bool)
    }

    /// A request as it arrived, decrypted.
    struct Request: Sendable {
        /// 0 for the first connection accepted, 1 for the next…
        var connection: Int
        var target: String
        var text: String
    }

    /// One handshake the origin took part in.
    struct Handshake: Sendable, Equatable {
        var connection: Int
        /// The name the client sent with SNI (RFC 6066 §3); nil when it sent none.
        var serverName: String?
        /// Whether an earlier session was resumed (RFC 8446 §2.2).
        var resumed: Bool
        /// Why it failed, in CacheTLS's words; nil when it succeeded.
        var failure: String?
    }

    private struct State {
        var requests: [Request] = []
        var handshakes: [Handshake] = []
        var connections = 0
        var open: Set<Int32> = []
        var stopped = false
        var acceptExited = false
    }

    let port: UInt16
    private let listener: Int32
    private let state = Locked(State())

    /// Listens on 127.0.0.1 and answers each request with the steps `answer` gives for it.
    init(_ context: TLSServerContext, answer: @escaping @Sendable (Request) -> [Step]) throws {
        (listener, port) = try RawOrigin.listen(backlog: 64)
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        let (listener, state) = (listener, state)
        try SystemThread.detached(name: "tls-origin") {
            defer {
                state.withLock { $0.acceptExited = true }
                state.wakeWaiters()
            }
            while !state.withLock({ $0.stopped }) {
                var waiting = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&waiting, 1, 50) > 0 else { continue }
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { continue }
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                let index: Int? = state.withLock { state in
                    guard !state.stopped else { return nil }
                    state.open.insert(fd)
                    state.connections += 1
                    return state.connections - 1
                }
                guard let index else {
                    close(fd)
                    continue
                }
                let serve: @Sendable () -> Void = {
                    Self.serve(fd: fd, index: index, context: context, state: state, answer: answer)
                    _ = state.withLock { $0.open.remove(fd) }
                    close(fd)
                }
                if (try? SystemThread.detached(name: "tls-origin-conn", serve)) == nil {
                    _ = state.withLock { $0.open.remove(fd) }
                    close(fd)
                }
            }
        }
    }

    deinit { stop() }

    /// `https://127.0.0.1:PORT` followed by `path` (the tests' certificates cover 127.0.0.1).
    func url(_ path: String, host: String = "127.0.0.1") -> String { "https://\(host):\(port)\(path)" }

    /// Every request read so far, in order.
    var requests: [Request] { state.withLock { $0.requests } }
    /// Every handshake so far, in order.
    var handshakes: [Handshake] { state.withLock { $0.handshakes } }

    /// Stops accepting and cuts every open connection.
    func stop() {
        let first: Bool = state.withLock { state in
            guard !state.stopped else { return false }
            state.stopped = true
            state.open.forEach { _ = shutdown($0, Int32(SHUT_RDWR)) }
            return true
        }
        guard first else { return }
        _ = state.withLock(when: { $0.acceptExited }) { _ in }
        close(listener)
    }

    private static func serve(
        fd: Int32, index: Int, context: TLSServerContext, state: Locked<State>,
        answer: @Sendable (Request) -> [Step]
    ) {
        let tls: TLSConnection
        do {
            tls = try context.connection(fd: fd)
            try tls.handshake(timeout: 10)
        } catch {
            state.withLock {
                $0.handshakes.append(Handshake(connection: index, serverName: nil, resumed: false, failure: "\(error)"))
            }
            return
        }
        state.withLock {
            $0.handshakes.append(
                Handshake(connection: index, serverName: tls.serverName, resumed: tls.isResumed, failure: nil))
        }
        var buffer: [UInt8] = []
        while let text = readRequest(tls, &buffer) {
            let target = text.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let request = Request(connection: index, target: target, text: text)
            state.withLock { $0.requests.append(request) }
            for step in answer(request) {
                switch step {
                case .send(let text):
                    guard Array(text.utf8).withUnsafeBytes({ tls.send($0, stallTimeout: 10) }) == nil else { return }
                case .pause(let seconds):
                    usleep(UInt32(seconds * 1_000_000))
                case .close(let notify):
                    if notify { _ = tls.shutdown(stallTimeout: 1) }
                    return
                }
            }
        }
        _ = tls.shutdown(stallTimeout: 1)
    }

    /// The next request head (and a body of its Content-Length), or nil at the end.
    private static func readRequest(_ tls: TLSConnection, _ buffer: inout [UInt8]) -> String? {
        let separator = Array("\r\n\r\n".utf8)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            if let end = buffer.indices.dropLast(3).first(where: { buffer[$0..<$0 + 4].elementsEqual(separator) }) {
                let head = String(decoding: buffer[..<(end + 4)], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingPrefix(" ")) } ?? 0
                if buffer.count >= end + 4 + length {
                    let text = String(decoding: buffer[..<(end + 4 + length)], as: UTF8.self)
                    buffer.removeFirst(end + 4 + length)
                    return text
                }
            }
            let received = chunk.withUnsafeMutableBytes { tls.receive(into: $0, stallTimeout: 30) }
            guard case .bytes(let count) = received else { return nil }
            buffer += chunk[..<count]
        }
    }
}
#endif
