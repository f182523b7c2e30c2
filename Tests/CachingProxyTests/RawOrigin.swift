#if os(Linux)
import CacheLocking
import CacheStorage
import Dispatch
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A misbehaving HTTP origin on 127.0.0.1 for what `LoopbackOrigin` does not do: exact scripted
/// bytes (interim responses, folded fields, malformed status lines, more bytes than a response's
/// framing allows), pauses between writes, connections closed or reset at a chosen point. Each
/// connection runs `script` on its own thread and records every request it reads, raw.
///
/// ```swift
/// let origin = try RawOrigin { request in
///     request.target == "/a"
///         ? [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"), .pause(0.05), .send("junk")]
///         : [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")]
/// }
/// ```
final class RawOrigin: Sendable {
    struct Received: Sendable {
        /// 0 for the first connection accepted, 1 for the next…
        var connection: Int
        var text: String
    }

    private struct State {
        var received: [Received] = []
        var connections = 0
        var open: Set<Int32> = []
        var stopped = false
    }

    private let state = Locked(State())
    private let listener: Int32
    private let acceptExited = DispatchSemaphore(value: 0)
    let port: UInt16

    init(_ script: @escaping @Sendable (RawConnection) -> Void) throws {
        (listener, port) = try Self.listen(backlog: 64)
        let listener = listener
        Thread.detachNewThread { [self] in
            defer { acceptExited.signal() }
            while true {
                let fd = accept(listener, nil, nil)
                // Not inherited by the child processes other tests start.
                if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                if fd < 0 {
                    if errno == EINTR { continue }
                    return
                }
                let index: Int? = state.withLock { state in
                    guard !state.stopped else { return nil }
                    state.open.insert(fd)
                    state.connections += 1
                    return state.connections - 1
                }
                guard let index else {
                    Glibc.close(fd)
                    continue
                }
                Thread.detachNewThread { [self] in
                    script(RawConnection(fd: fd, index: index, origin: self))
                    state.withLock { state in
                        state.open.remove(fd)
                        Glibc.close(fd)
                    }
                }
            }
        }
    }

    deinit { stop() }

    /// What the origin does after reading a request.
    enum Step: Sendable {
        /// Writes these bytes (in one `send` when the socket buffer allows).
        case send(String)
        case bytes([UInt8])
        /// Waits this many seconds.
        case pause(Double)
        /// Closes the connection (FIN); no further request is read on it.
        case close
        /// Resets the connection (RST: `SO_LINGER` 0, then close); no further request is read.
        case reset
    }

    /// A request as the scripted origin read it.
    struct Request: Sendable {
        var method: String
        var target: String
        /// 0 for the first connection accepted, 1 for the next…
        var connection: Int
        /// 0 for the first request on its connection, 1 for the next…
        var number: Int
        var text: String
    }

    /// An origin that answers every request it reads with the steps `answer` gives for it,
    /// until a step closes or resets the connection.
    convenience init(answer: @escaping @Sendable (Request) -> [Step]) throws {
        try self.init { connection in
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
                    case .reset:
                        connection.resetOnClose()
                        return
                    }
                }
            }
        }
    }

    /// Every connection answers each request with a short 200, keeping the connection open.
    static let answerEach: @Sendable (RawConnection) -> Void = { connection in
        while connection.readRequest() != nil {
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
    }

    /// The first connection answers its first request, then reads the second and closes without
    /// answering (as an origin does when its idle timeout strikes just as the request arrives);
    /// later connections answer everything.
    static let answerOnceThenDropTheNext: @Sendable (RawConnection) -> Void = { connection in
        var count = 0
        while connection.readRequest() != nil {
            count += 1
            if connection.index == 0 && count == 2 { return }
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    var received: [Received] { state.withLock { $0.received } }
    /// How many connections were accepted.
    var connections: Int { state.withLock { $0.connections } }

    fileprivate func record(_ received: Received) {
        state.withLock { $0.received.append(received) }
    }

    /// Stops accepting, shuts every connection down and waits for the accept thread.
    func stop() {
        let first: Bool = state.withLock { state in
            guard !state.stopped else { return false }
            state.stopped = true
            state.open.forEach { _ = shutdown($0, Int32(SHUT_RDWR)) }
            return true
        }
        guard first else { return }
        _ = shutdown(listener, Int32(SHUT_RDWR))  // wakes accept (EINVAL)
        acceptExited.wait()
        Glibc.close(listener)
    }

    /// A bound, listening 127.0.0.1 socket on a port the kernel chose.
    static func listen(backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && Glibc.listen(fd, backlog) == 0
                    && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            Glibc.close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A port nothing listens on (bound, then closed).
    static func unusedPort() throws -> UInt16 {
        let (fd, port) = try listen(backlog: 1)
        Glibc.close(fd)
        return port
    }

    /// A listener with a backlog of 0 and one connection waiting, never accepted: Linux then
    /// drops further SYNs, so a connect to it hangs.
    final class FullListener {
        let port: UInt16
        private let fd: Int32
        private var clients: [Int32] = []

        init() throws {
            (fd, port) = try RawOrigin.listen(backlog: 0)
            for _ in 0..<2 {
                let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = port.bigEndian
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                clients.append(client)
            }
            usleep(50_000)  // let the handshakes settle into the queue
        }

        func close() {
            (clients + [fd]).forEach { _ = Glibc.close($0) }
        }
    }
}

/// One accepted connection of a ``RawOrigin``, used by its own thread.
final class RawConnection {
    let index: Int
    private let fd: Int32
    private let origin: RawOrigin
    private var buffer: [UInt8] = []

    fileprivate init(fd: Int32, index: Int, origin: RawOrigin) {
        self.fd = fd
        self.index = index
        self.origin = origin
    }

    /// Reads the next request (head, and a body of its Content-Length) and records it; nil when
    /// the client closed the connection or the origin stopped.
    @discardableResult
    func readRequest() -> String? {
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
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        while buffer.count < headEnd + length {
            guard receiveMore() else { return nil }
        }
        let text = String(decoding: buffer[..<(headEnd + length)], as: UTF8.self)
        buffer.removeFirst(headEnd + length)
        origin.record(.init(connection: index, text: text))
        return text
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ all: [UInt8]) {
        var bytes = all[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return }
            bytes = bytes.dropFirst(sent)
        }
    }

    /// Makes the close that follows the script a reset (RST) rather than a FIN.
    func resetOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    private func receiveMore() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[..<count])
            return true
        }
    }
}
#endif
