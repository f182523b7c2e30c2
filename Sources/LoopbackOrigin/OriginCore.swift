import CacheSystem
import CacheTLS
@_spi(Wire) import HTTPWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The running part of a ``LoopbackOrigin``: listening socket, accept thread, connection threads,
/// routes and records.
///
/// Threads retain this object, never the `LoopbackOrigin` itself, so dropping the last reference
/// to the origin runs its `deinit`, which stops everything.
final class OriginCore: Sendable {
    /// One listening run, from `start` to `stop`.
    final class Listener: Sendable {
        let fd: Int32
        let wakeRead: Int32
        let wakeWrite: Int32
        /// Set when the accept loop has ended.
        let exited = Locked(false)

        init(fd: Int32, wakeRead: Int32, wakeWrite: Int32) {
            self.fd = fd
            self.wakeRead = wakeRead
            self.wakeWrite = wakeWrite
        }
    }

    struct State {
        var port: UInt16 = 0
        var listener: Listener?
        /// Bumped by every `stop`, so a connection can tell that the run it belongs to is over.
        var generation = 0
        /// Connected sockets whose threads are alive. A thread closes its socket only after removing
        /// it here (with the lock held), so `stop` never shuts down a descriptor number reused elsewhere.
        var connections: Set<Int32> = []
        var routes: [String: LoopbackOrigin.Handler] = [:]
        var fallback: LoopbackOrigin.Handler = { request in
            LoopbackOrigin.Response(
                status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")],
                body: "Not Found: \(request.path)\n")
        }
        var records: [LoopbackOrigin.Request] = []
    }

    let state = Locked(State())
    /// The loopback address listened on (host byte order).
    let address: UInt32
    /// The server context when the origin serves HTTPS; nil for HTTP.
    let tls: TLSServerContext?

    init(address: UInt32 = POSIX.localhost, tls: TLSServerContext? = nil) {
        self.address = address
        self.tls = tls
    }
    /// Serialises `start` and `stop` (held while waiting for the accept thread; `state` never is).
    private let lifecycle = Locked(0)

    // MARK: Lifecycle

    /// Listens on `port` (nil: the port of the previous run) unless already listening.
    func start(port requested: UInt16?) throws(LoopbackOrigin.SocketError) {
        try lifecycle.withLock { (_) throws(LoopbackOrigin.SocketError) in
            let previous = state.withLock { $0.listener == nil ? $0.port : nil }
            guard let previous else { return }
            let socket =
                if let requested {
                    try POSIX.listeningSocket(choosing: requested, address: address)
                } else {
                    try Self.rebind(previous, address: address)
                }
            if requested != nil { OriginPorts.hold(socket.port) }
            let wake: (read: Int32, write: Int32)
            do throws(LoopbackOrigin.SocketError) {
                wake = try POSIX.wakePipe()
            } catch {
                POSIX.closeDescriptor(socket.fd)
                throw error
            }
            let listener = Listener(fd: socket.fd, wakeRead: wake.read, wakeWrite: wake.write)
            state.withLock {
                $0.listener = listener
                $0.port = socket.port
            }
            do throws(SystemError) {
                try POSIX.startThread { self.acceptLoop(listener) }
            } catch {
                state.withLock { $0.listener = nil }
                [socket.fd, wake.read, wake.write].forEach(POSIX.closeDescriptor)
                throw LoopbackOrigin.SocketError(operation: "pthread_create (accept thread)", code: error.code)
            }
        }
    }

    /// The port of a restarted origin, bound again. Another process may hold it for a moment
    /// (its own origin trying ports, a connection being torn down): `EADDRINUSE` is retried for
    /// up to 3 s before it is reported.
    private static func rebind(
        _ port: UInt16, address: UInt32
    ) throws(LoopbackOrigin.SocketError) -> (fd: Int32, port: UInt16) {
        var attempts = 0
        while true {
            do {
                return try POSIX.listeningSocket(port: port, address: address)
            } catch  where error.code == EADDRINUSE && attempts < 150 {
                attempts += 1
                usleep(20_000)
            }
        }
    }

    /// Stops listening, shuts down every open connection and waits for the accept thread to exit.
    func stop() {
        lifecycle.withLock { _ in
            let listener: Listener? = state.withLock { state in
                guard let listener = state.listener else { return nil }
                state.listener = nil
                state.generation += 1
                state.connections.forEach(POSIX.shutdownBoth)
                return listener
            }
            guard let listener else { return }
            POSIX.poke(listener.wakeWrite)
            _ = listener.exited.withLock(when: { $0 }) { _ in }
            // Closed only now that no thread polls them: a closed descriptor's number can be reused at once.
            [listener.fd, listener.wakeRead, listener.wakeWrite].forEach(POSIX.closeDescriptor)
        }
    }

    var isRunning: Bool { state.withLock { $0.listener != nil } }

    // MARK: Threads

    private func acceptLoop(_ listener: Listener) {
        defer {
            listener.exited.withLock { $0 = true }
            listener.exited.wakeWaiters()
        }
        while true {
            guard let ready = POSIX.waitForEither(listener.fd, orWake: listener.wakeRead) else {
                if errno != EINTR { usleep(10_000) }
                continue
            }
            if ready.wake { return }
            guard ready.fd else { continue }
            let fd = POSIX.acceptConnection(listener.fd)
            guard fd >= 0 else {
                // EMFILE and friends: the connection stays queued; back off instead of spinning.
                if errno != EINTR && errno != ECONNABORTED && errno != EAGAIN { usleep(10_000) }
                continue
            }
            let generation: Int? = state.withLock { state in
                guard state.listener === listener else { return nil }
                state.connections.insert(fd)
                return state.generation
            }
            guard let generation else {
                POSIX.closeDescriptor(fd)
                continue
            }
            if !POSIX.spawnThread({ self.serve(fd, generation: generation) }) {
                release(fd)
            }
        }
    }

    /// Forgets and closes a connection's socket.
    private func release(_ fd: Int32) {
        state.withLock { state in
            state.connections.remove(fd)
            POSIX.closeDescriptor(fd)
        }
    }

    /// Answers requests on one connection until either side closes it or the origin stops.
    private func serve(_ fd: Int32, generation: Int) {
        defer { release(fd) }
        let connection: OriginStream
        if let tls {
            // A client that refuses the certificate ends here, as it would with any server.
            guard let secured = try? OriginStream(fd: fd, tls: tls) else { return }
            connection = secured
        } else {
            connection = OriginStream(fd: fd)
        }
        var reader = RequestReader(stream: connection)
        while true {
            let parsed: ParsedRequest
            switch reader.next() {
            case .closed:
                return
            case .reject(let status, let reason):
                if connection.sendAll(ResponseWriter.rejection(status: status, reason: reason)) {
                    connection.finishSending()
                }
                return
            case .request(let request):
                parsed = request
            }
            let request = LoopbackOrigin.Request(
                method: parsed.method, target: parsed.target, headers: parsed.fields, body: parsed.body)
            let handler = state.withLock { state in
                state.records.append(request)
                return state.routes[request.path] ?? state.fallback
            }
            let response = handler(request)
            guard sleep(response.delay, unlessStoppedSince: generation) else { return }
            let output = ResponseWriter.encode(
                response, method: parsed.method, minorVersion: parsed.minorVersion,
                clientWantsClose: parsed.wantsClose)
            guard connection.sendAll(output.bytes) else { return }
            if let stream = output.stream {
                guard send(stream, on: connection, unlessStoppedSince: generation) else { return }
                if stream.pauses {
                    waitForClose(connection, unlessStoppedSince: generation)
                    return
                }
            }
            if output.cut {
                if response.cutWithCloseNotify { connection.closeNotify() }
                connection.cut()
                return
            }
            if output.closeAfter {
                connection.finishSending()
                return
            }
        }
    }

    /// Sends a streamed body in pieces of 256 KiB (framed as chunks when it is chunked); false
    /// if the client went away or the origin was stopped meanwhile.
    private func send(
        _ stream: ResponseWriter.BodyStream, on connection: OriginStream, unlessStoppedSince generation: Int
    ) -> Bool {
        let pieceSize: Int64 = 256 * 1024
        var buffer = [UInt8](repeating: 0, count: Int(pieceSize))
        var position: Int64 = 0
        while position < stream.limit {
            if state.withLock({ $0.generation != generation }) { return false }
            let pieceLength = min(pieceSize, stream.total - position)
            let sent = Int(min(pieceLength, stream.limit - position))
            buffer.withUnsafeMutableBytes {
                stream.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<sent]), at: position)
            }
            if stream.chunked {
                var sizeLine: [UInt8] = []
                ChunkedEncoder.appendSize(Int(pieceLength), to: &sizeLine)
                guard connection.sendAll(sizeLine) else { return false }
            }
            guard connection.sendAll(sent == buffer.count ? buffer : Array(buffer[0..<sent])) else { return false }
            position += Int64(sent)
            if stream.chunked, Int64(sent) == pieceLength {
                guard connection.sendAll([0x0D, 0x0A]) else { return false }
            }
        }
        if stream.chunked, stream.limit == stream.total {
            var end: [UInt8] = []
            ChunkedEncoder.appendEnd(to: &end)
            return connection.sendAll(end)
        }
        return true
    }

    /// Sends nothing more and waits until the client closes the connection (anything it sends
    /// is read and dropped) or the origin is stopped.
    private func waitForClose(_ connection: OriginStream, unlessStoppedSince generation: Int) {
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while state.withLock({ $0.generation == generation }) {
            guard connection.waitReadable(milliseconds: 20) else { continue }
            let received = scratch.withUnsafeMutableBytes { connection.receive(into: $0) }
            if received <= 0 { return }
        }
    }

    /// Sleeps `seconds` in short slices; false if the origin was stopped meanwhile.
    private func sleep(_ seconds: Double, unlessStoppedSince generation: Int) -> Bool {
        guard seconds > 0 else { return true }  // also false for NaN
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(min(seconds, 86_400 * 365))
        while true {
            if state.withLock({ $0.generation != generation }) { return false }
            let remaining = clock.now.duration(to: deadline)
            if remaining <= .zero { return true }
            let slice = min(remaining, .milliseconds(10))
            let (whole, fraction) = slice.components
            usleep(UInt32(whole) * 1_000_000 + UInt32(fraction / 1_000_000_000_000))
        }
    }
}
