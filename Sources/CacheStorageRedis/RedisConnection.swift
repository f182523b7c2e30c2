import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a Redis command did not give an answer.
struct RedisFailure: Error, CustomStringConvertible {
    enum Kind {
        /// No connection could be made, or it broke.
        case connection
        /// No reply within the command timeout.
        case timeout
        /// The server replied with an error (`-ERR ...`), or broke the protocol.
        case reply
        /// Not tried: the server failed a moment ago and its backoff time has not passed.
        case unavailable
    }

    /// A reply too large to be read (``RESPParser/maximumBulkLength``): which reply of the
    /// pipeline, and where in it.
    struct Oversized {
        /// The index of the command whose reply it is.
        var reply: Int
        var path: [Int]
        var length: Int64
    }

    var kind: Kind
    var description: String
    /// Set when the failure is a reply too large to be read; the connection was closed.
    var oversized: Oversized?

    init(_ kind: Kind, _ description: String, oversized: Oversized? = nil) {
        self.kind = kind
        self.description = description
        self.oversized = oversized
    }
}

/// One TCP connection to one Redis server, used by one thread at a time: commands are written
/// in one pipeline and their replies read in order, each exchange bounded by a deadline. A
/// connection that timed out or broke is closed (its replies could be out of step).
final class RedisConnection {
    let host: String
    let port: Int
    private var descriptor: Int32
    private var parser = RESPParser()
    /// What `recv` reads into, allocated once.
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
    /// The socket's receive and send timeout now (`SO_RCVTIMEO`, `SO_SNDTIMEO`), seconds.
    private var socketTimeout = 0.0

    /// Connects, authenticates and selects `database` within `timeout` seconds.
    init(host: String, port: Int, user: String?, password: String?, database: Int, timeout: Double) throws(RedisFailure)
    {
        self.host = host
        self.port = port
        // Blocking, each call bounded by the socket's timeouts: a round trip is a send and a
        // recv, without a poll in between.
        descriptor = try Self.openSocket(host: host, port: port, timeout: timeout)
        var setup: [[[UInt8]]] = []
        if let password {
            setup.append(user.map { ["AUTH", $0, password].map(bytes) } ?? ["AUTH", password].map(bytes))
        }
        if database != 0 { setup.append(["SELECT", String(database)].map(bytes)) }
        guard !setup.isEmpty else { return }
        let replies = try execute(setup, timeout: timeout)
        for reply in replies {
            if let message = reply.errorMessage {
                disconnect()
                throw RedisFailure(.connection, "Redis at \(host):\(port) refused the connection setup: \(message)")
            }
        }
    }

    deinit {
        disconnect()
        readBuffer.deallocate()
    }

    /// Hands the socket over, made non-blocking, for its new owner to read and close; the
    /// connection is closed to its own use.
    func detachNonBlocking() -> Int32 {
        let fd = descriptor
        descriptor = -1
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    func disconnect() {
        if descriptor >= 0 { _ = close(descriptor) }
        descriptor = -1
    }

    /// Sends `commands` in one write and reads one reply for each; an error reply is returned,
    /// not thrown. A reply too large to be read fails them all at once (with
    /// ``RedisFailure/oversized`` saying which), and the connection is closed.
    func execute(_ commands: [[[UInt8]]], timeout: Double) throws(RedisFailure) -> [RESPValue] {
        guard descriptor >= 0 else { throw RedisFailure(.connection, "the connection to \(host):\(port) is closed") }
        let deadline = MonotonicClock.seconds() + timeout
        var request: [UInt8] = []
        for command in commands { RESPEncoder.append(command, to: &request) }
        var replies: [RESPValue] = []
        do {
            try write(request, deadline: deadline)
            replies.reserveCapacity(commands.count)
            while replies.count < commands.count { replies.append(try read(deadline: deadline)) }
            return replies
        } catch {
            disconnect()
            var error = error
            error.oversized?.reply = replies.count
            throw error
        }
    }

    /// Reads one reply (a pub/sub message), waiting until `deadline`.
    func read(deadline: Double) throws(RedisFailure) -> RESPValue {
        while true {
            do {
                if let value = try parser.next() { return value }
            } catch {
                disconnect()
                throw RedisFailure(
                    .reply, "Redis at \(host):\(port) broke the protocol: \(error)",
                    oversized: error.oversized.map { .init(reply: 0, path: $0.path, length: $0.length) })
            }
            try limit(to: deadline)
            let count = recv(descriptor, readBuffer.baseAddress, readBuffer.count, 0)
            if count == 0 { throw RedisFailure(.connection, "Redis at \(host):\(port) closed the connection") }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                throw RedisFailure(.connection, "reading from Redis at \(host):\(port) failed: errno \(errno)")
            }
            parser.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
        }
    }

    /// Throws when `deadline` passed; else makes the socket's timeouts what is left of it
    /// (a system call only when that differs by more than a millisecond from what is set).
    private func limit(to deadline: Double) throws(RedisFailure) {
        let remaining = deadline - MonotonicClock.seconds()
        guard remaining > 0 else { throw RedisFailure(.timeout, "Redis at \(host):\(port) did not answer in time") }
        guard abs(remaining - socketTimeout) > 0.001 else { return }
        let seconds = max(0.001, remaining)
        var value = timeval(tv_sec: .init(seconds), tv_usec: .init((seconds - seconds.rounded(.down)) * 1_000_000))
        let size = socklen_t(MemoryLayout<timeval>.size)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, size)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, size)
        socketTimeout = seconds
    }

    /// Sends a command without reading a reply (pub/sub subscriptions).
    func sendCommand(_ command: [[UInt8]], timeout: Double) throws(RedisFailure) {
        var request: [UInt8] = []
        RESPEncoder.append(command, to: &request)
        try write(request, deadline: MonotonicClock.seconds() + timeout)
    }

    private func write(_ bytes: [UInt8], deadline: Double) throws(RedisFailure) {
        var offset = 0
        while offset < bytes.count {
            try limit(to: deadline)
            let sent = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + offset, $0.count - offset, sendFlags)
            }
            if sent < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                throw RedisFailure(.connection, "writing to Redis at \(host):\(port) failed: errno \(errno)")
            }
            offset += sent
        }
    }

    /// A blocking TCP socket connected to `host:port` (a name is resolved) within `timeout`
    /// seconds (a millisecond at least), with `TCP_NODELAY` set.
    private static func openSocket(host: String, port: Int, timeout: Double) throws(RedisFailure) -> Int32 {
        let bound = max(timeout, 0.001)
        guard let tcpPort = UInt16(exactly: port) else {
            throw RedisFailure(.connection, "cannot connect to Redis at \(host):\(port): \(port) is not a TCP port")
        }
        switch Socket.connected(host: host, port: tcpPort, timeout: bound) {
        case .success(let fd):
            return fd
        case .failure(let failure) where failure.kind == .unresolved:
            throw RedisFailure(.connection, "cannot resolve the Redis host \(host): \(failure.reason)")
        case .failure(let failure):
            let reason = failure.kind == .timedOut ? "no answer within \(Int(bound * 1000)) ms" : failure.reason
            throw RedisFailure(.connection, "cannot connect to Redis at \(host):\(port): \(reason)")
        }
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

#if canImport(Glibc)
private let sendFlags = Int32(MSG_NOSIGNAL)
#else
private let sendFlags: Int32 = 0  // Darwin: SO_NOSIGPIPE is set on the socket instead
#endif
