#if os(Linux)
// One event-loop thread: epoll (edge-triggered connections, a level-triggered listener), an
// eventfd for work posted from other threads, and a sweep every 250 ms for timeouts.
@_spi(Wire) import HTTPWire
import CEpollHTTPCache
import CacheSemantics
import CacheSystem
import CacheTLS
import Glibc

/// Which loop, if any, runs on the current thread.
private let currentLoopKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

/// Connection counts shared by every loop of a server (the cap is server-wide), and which
/// loop serves each new connection.
final class ConnectionCounters: Sendable {
    struct Counts {
        var open = 0
        var accepted = 0
        var refused = 0
        /// Connections each loop serves (placed on it, not yet closed), by loop index.
        var loads: [Int] = []
        /// The loops, by index, while the server runs.
        var loops: [EventLoop] = []
    }

    let maxConnections: Int
    private let counts = Locked(Counts())

    init(maxConnections: Int) { self.maxConnections = max(1, maxConnections) }

    /// Counts a new connection in; `false` (and counted as refused) when at the cap.
    func admit() -> Bool {
        counts.withLock { counts in
            guard counts.open < maxConnections else {
                counts.refused += 1
                return false
            }
            counts.open += 1
            counts.accepted += 1
            return true
        }
    }

    func closed() { counts.withLock { $0.open -= 1 } }

    /// Makes `loop` one the connections are spread over; its index.
    func join(_ loop: EventLoop) -> Int {
        counts.withLock { counts in
            counts.loops.append(loop)
            counts.loads.append(0)
            return counts.loops.count - 1
        }
    }

    /// Forgets the loops (the server stopped).
    func forgetLoops() { counts.withLock { $0.loops = [] } }

    /// The loop a connection accepted by loop `index` goes to, counted on it: that one unless
    /// another serves at least two fewer. One loop often takes the wake-ups of a shared listener
    /// (EPOLLEXCLUSIVE wakes one waiter, the same one while it waits first): without this a
    /// burst of connections lands on it and one core does the work of two.
    func place(acceptedBy index: Int) -> (index: Int, loop: EventLoop?) {
        counts.withLock { counts in
            guard index < counts.loads.count else { return (index, nil) }
            var chosen = index
            for other in counts.loads.indices where counts.loads[other] < counts.loads[chosen] - 1 {
                chosen = other
            }
            counts.loads[chosen] += 1
            return (chosen, chosen == index ? nil : counts.loops[chosen])
        }
    }

    /// A connection placed on loop `index` is gone (closed, or never taken).
    func left(_ index: Int) {
        counts.withLock { counts in
            if index < counts.loads.count { counts.loads[index] -= 1 }
        }
    }

    var snapshot: Counts { counts.withLock { $0 } }
}

/// Work posted to a loop from another thread.
enum LoopCommand {
    case respond(ResponseTarget, ServerResponseHead, [UInt8], BodyFraming)
    case start(ResponseTarget, ServerResponseHead, BodyFraming)
    case interim(ResponseTarget, ServerResponseHead)
    case write(ResponseTarget, [UInt8], accounted: Bool)
    case finish(ResponseTarget)
    case abort(ResponseTarget)
    /// The responder was released without answering.
    case abandoned(ResponseTarget)
    case tunnel(ResponseTarget, Int32)
    /// A connection another loop accepted, for this one to serve.
    case adopt(fd: Int32, tls: Bool, peerIsLoopback: Bool, peer: SocketAddress?)
    case shutdown(deadline: Int)
    /// HTTP/2 connections get GOAWAY(NO_ERROR) and end once their streams have (a reload).
    case goAway
    /// Called on the loop when it gets to it: the loop is alive (the service watchdog).
    case ping(@Sendable () -> Void)
}

final class EventLoop: @unchecked Sendable {
    static let sweepInterval = 250
    /// How long a closing connection drains input after its last response (RFC 9112 §9.6).
    static let lingerMilliseconds = 2000
    static let lingerBytes = 64 * 1024
    /// Pipelined requests wait while this much output is queued for the connection.
    static let pipelineOutputLimit = 256 * 1024
    /// Writes from other threads block while this much waits for the client: with 256
    /// clients of a 10 MB body, 256 KiB kept peak RSS at 240 MiB (1 MiB: 610 MiB) at the same
    /// req/s (scripts/proxy-bench --workloads hot-10m).
    static let backPressureLimit = 256 << 10
    private static let listenerToken = UInt64.max
    private static let wakeToken = UInt64.max - 1
    private static let tlsListenerToken = UInt64.max - 2

    let handler: any RequestHandler
    let log: @Sendable (String) -> Void
    /// The log for what can come with every request: one line per kind and second.
    let limitedLog: LogLimiter
    let counters: ConnectionCounters
    let headerMilliseconds: Int
    let idleMilliseconds: Int
    let bodyMilliseconds: Int
    /// ``HTTPServer/Configuration/bodyMinimumRate``, bytes a second.
    let bodyMinimumRate: Int
    let maxHeaderBytes: Int
    let maxFieldCount: Int
    let maxBodyBytes: Int64
    /// Whether HTTP/2 is spoken: by ALPN on the TLS listener, by the preface on the plain one.
    let http2: Bool
    /// The name in `Proxy-Status` on the server's own answers.
    let proxyName: String?
    /// The answer to a connection over the cap.
    private let refusal: [UInt8]
    private let listenFD: Int32
    /// The TLS listener and the certificates its connections present; -1 and nil without TLS.
    private let tlsListenFD: Int32
    let certificates: ServerCertificates?
    private let acceptBatch: Int
    let epollFD: Int32
    private let wakeFD: Int32

    // Loop-thread state. Only the loop's thread reaches it, one access at a time: the hottest
    // is not checked for exclusive access at run time (`swift_beginAccess`, about 80
    // instructions each, several times a request).
    @exclusivity(unchecked) var connections: [Connection?] = []
    /// Descriptors watched for others than client connections (origin connections of transfers
    /// run on this loop), by descriptor.
    @exclusivity(unchecked) var watches: [Int32: LoopWatch] = [:]
    /// Descriptors whose one-shot watch reported and ended: still in epoll, disabled
    /// (EventLoop+Watches.swift). Some may have been closed since, which epoll tells.
    var dormantWatches: Set<Int32> = []
    var watchGenerations: UInt32 = 0
    /// This loop's lookups in the store's server (EventLoop+StoreLookups), made on first use.
    var storeLookups: LoopLookups?
    private var openCount = 0
    /// This loop's index among the server's loops (ConnectionCounters.place).
    private var index = Int.max
    private var nextGeneration: UInt32 = 0
    var now = MonotonicClock.coarseMilliseconds()
    @exclusivity(unchecked) private var dirty: [Connection] = []
    /// The connection `drive` is working on: a change to it needs no extra pass.
    var driving: Connection?
    let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: 64)
    private(set) var shuttingDown = false
    private var shutdownDeadline = 0
    private var listening = false
    private var acceptPausedUntil = 0
    private var refusedSinceLog = 0
    private var lastRefusalLog = Int.min / 2

    /// Work posted from other threads.
    private struct Mailbox {
        var commands: [LoopCommand] = []
        var closed = false
        /// The eventfd was written and the loop has not drained it yet.
        var wakePending = false
    }

    private let mailbox = Locked(Mailbox())
    private var applying: [LoopCommand] = []
    /// Requests read and rejected, TLS handshakes done and failed, read by `HTTPServer.statistics`.
    private let requestCounts = Locked(LoopCounts())

    init(
        configuration: HTTPServer.Configuration, listenFD: Int32, tlsListenFD: Int32, shareListener: Bool,
        handler: any RequestHandler, log: @escaping @Sendable (String) -> Void, limitedLog: LogLimiter,
        counters: ConnectionCounters
    ) {
        self.handler = handler
        self.log = log
        self.limitedLog = limitedLog
        self.counters = counters
        self.listenFD = listenFD
        self.tlsListenFD = tlsListenFD
        certificates = configuration.tls?.certificates
        headerMilliseconds = milliseconds(configuration.headerTimeout)
        idleMilliseconds = milliseconds(configuration.idleTimeout)
        bodyMilliseconds = milliseconds(configuration.bodyTimeout)
        bodyMinimumRate = max(1, configuration.bodyMinimumRate)
        maxHeaderBytes = max(64, configuration.maxHeaderBytes)
        maxFieldCount = max(1, configuration.maxFieldCount)
        maxBodyBytes = max(0, configuration.maxBodyBytes)
        http2 = configuration.http2
        proxyName = configuration.proxyName
        refusal = Self.refusal(proxyName: configuration.proxyName)
        // With several loops on one listener each accepts one connection per wake-up, so that
        // EPOLLEXCLUSIVE spreads them; alone it takes what is waiting.
        acceptBatch = shareListener ? 1 : 64
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeToken
        epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
        listening = addListener(exclusive: shareListener)
    }

    deinit {
        vectors.deallocate()
    }

    /// Whether the loop could be set up (epoll and eventfd exist).
    var isUsable: Bool { epollFD >= 0 && wakeFD >= 0 }

    /// Closes what a loop that never ran holds.
    func discard() {
        if epollFD >= 0 { Glibc.close(epollFD) }
        if wakeFD >= 0 { Glibc.close(wakeFD) }
    }

    private var shareListener: Bool { acceptBatch == 1 }

    private func addListener(exclusive: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (exclusive ? EPOLLEXCLUSIVE.rawValue : 0)
        event.data.u64 = Self.listenerToken
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, listenFD, &event) == 0 else { return false }
        guard tlsListenFD >= 0 else { return true }
        event.data.u64 = Self.tlsListenerToken
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, tlsListenFD, &event) == 0 else {
            epoll_ctl(epollFD, EPOLL_CTL_DEL, listenFD, &event)
            return false
        }
        return true
    }

    private func removeListener() {
        if listening {
            var event = epoll_event()
            epoll_ctl(epollFD, EPOLL_CTL_DEL, listenFD, &event)
            if tlsListenFD >= 0 { epoll_ctl(epollFD, EPOLL_CTL_DEL, tlsListenFD, &event) }
            listening = false
        }
    }

    // MARK: threads

    /// Whether the calling thread is this loop's.
    var isCurrentThread: Bool { pthread_getspecific(currentLoopKey) == Unmanaged.passUnretained(self).toOpaque() }

    /// Whether the calling thread is any loop's.
    static var isOnAnyLoop: Bool { pthread_getspecific(currentLoopKey) != nil }

    /// The loop running on the calling thread, if any.
    static var current: EventLoop? {
        pthread_getspecific(currentLoopKey).map { Unmanaged<EventLoop>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Starts the loop's thread; it takes its share of new connections from then on.
    func spawn() throws(SystemError) -> SystemThread {
        index = counters.join(self)
        return try SystemThread.joinable(name: "httpcache-loop") { self.run() }
    }

    private func run() {
        pthread_setspecific(currentLoopKey, Unmanaged.passUnretained(self).toOpaque())
        let capacity: Int32 = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(capacity))
        defer { events.deallocate() }
        now = MonotonicClock.coarseMilliseconds()
        var nextSweep = now + Self.sweepInterval
        while true {
            var timeout = max(0, nextSweep - now)
            if shuttingDown { timeout = min(timeout, max(0, shutdownDeadline - now)) }
            let count = epoll_wait(epollFD, events, capacity, Int32(timeout))
            now = MonotonicClock.coarseMilliseconds()
            if count > 0 {
                for index in 0..<Int(count) { handle(events[index]) }
            }
            driveDirty()
            if now >= nextSweep {
                sweep()
                nextSweep = now + Self.sweepInterval
            }
            if shuttingDown && (openCount == 0 || now >= shutdownDeadline) { break }
        }
        tearDown()
        pthread_setspecific(currentLoopKey, nil)
    }

    private func handle(_ event: epoll_event) {
        let token = event.data.u64
        if token == Self.listenerToken { return acceptConnections(from: listenFD) }
        if token == Self.tlsListenerToken { return acceptConnections(from: tlsListenFD) }
        if token == Self.wakeToken { return drainMailbox() }
        let fd = Int32(truncatingIfNeeded: token & 0xFFFF_FFFF)
        if let watch = watches[fd] { return watchReady(watch, token: token) }
        guard fd >= 0, Int(fd) < connections.count, let connection = connections[Int(fd)],
            connection.generation == UInt32(truncatingIfNeeded: token >> 32)
        else { return }
        let flags = event.events
        let failed = flags & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0
        if fd == connection.fd {
            let readable = flags & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 || failed
            let writable = flags & EPOLLOUT.rawValue != 0 || failed
            if readable { connection.state.canRead = true }
            if flags & EPOLLRDHUP.rawValue != 0 { connection.state.hungUp = true }
            if writable { connection.state.canWrite = true }
            // TLS: a read that had to send waits for EPOLLOUT, a write that had to read for EPOLLIN.
            if writable && connection.state.readWaitsForWrite {
                connection.state.readWaitsForWrite = false
                connection.state.canRead = true
            }
            if readable && connection.state.writeWaitsForRead {
                connection.state.writeWaitsForRead = false
                connection.state.canWrite = true
            }
            // While the handler works nothing is read, so a reset would go unnoticed: close now.
            if failed && connection.state.phase == .handling { return close(connection) }
        } else if let tunnel = connection.state.tunnel {
            if flags & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 || failed { tunnel.canRead = true }
            if flags & EPOLLRDHUP.rawValue != 0 { tunnel.hungUp = true }
            if flags & EPOLLOUT.rawValue != 0 || failed { tunnel.canWrite = true }
        }
        drive(connection)
    }

    /// Asks for `connection` to be driven before the loop waits again.
    func markDirty(_ connection: Connection) {
        guard connection !== driving, !connection.state.isDirty, !connection.state.closed else { return }
        connection.state.isDirty = true
        dirty.append(connection)
    }

    private func driveDirty() {
        var index = 0
        while index < dirty.count {
            let connection = dirty[index]
            connection.state.isDirty = false
            if !connection.state.closed { drive(connection) }
            index += 1
        }
        dirty.removeAll(keepingCapacity: true)
    }

    // MARK: accepting

    /// Accepts from `listener`: plain HTTP, or TLS when it is the TLS listener.
    private func acceptConnections(from listener: Int32) {
        for _ in 0..<acceptBatch {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept4(listener, $0, &length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
                }
            }
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    // The listener stays readable: stop watching it for a moment instead of spinning.
                    log(
                        "HTTP server: cannot accept connections: \(errnoText(code)); pausing accept for 100 ms; "
                            + "raise the open-file limit (ulimit -n, LimitNOFILE= in a systemd unit)")
                    removeListener()
                    acceptPausedUntil = now + 100
                }
                return
            }
            let tls = listener == tlsListenFD
            guard !shuttingDown, counters.admit() else {
                refuse(fd, tls: tls)
                continue
            }
            Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
            let loopback = withUnsafePointer(to: &address) { isLoopback($0) }
            let peer = SocketAddress(address)
            let placed = counters.place(acceptedBy: index)
            if let other = placed.loop {
                if !other.post(.adopt(fd: fd, tls: tls, peerIsLoopback: loopback, peer: peer)) {
                    Glibc.close(fd)
                    counters.closed()
                    counters.left(placed.index)
                }
                continue
            }
            adopt(fd, tls: tls, peerIsLoopback: loopback, peer: peer)
        }
    }

    /// Serves the accepted connection `fd` on this loop (counted on it already).
    private func adopt(_ fd: Int32, tls: Bool, peerIsLoopback: Bool, peer: SocketAddress?) {
        func drop() {
            Glibc.close(fd)
            counters.closed()
            counters.left(index)
        }
        guard !shuttingDown else { return drop() }
        nextGeneration &+= 1
        if nextGeneration == 0 { nextGeneration = 1 }
        let connection = Connection(
            fd: fd, generation: nextGeneration, peerIsLoopback: peerIsLoopback, peerAddress: peer,
            parser: RequestHeadParser(
                maxHeaderBytes: maxHeaderBytes, maxFieldCount: maxFieldCount, maxBodyBytes: maxBodyBytes))
        connection.state.deadline = now + headerMilliseconds
        if tls, let certificates {
            do {
                connection.state.tls = try certificates.context.connection(fd: fd)
            } catch {
                log("HTTP server: cannot start TLS on a new connection: \(error); closing it")
                return drop()
            }
            // The handshake, like a request head, has --header-timeout from the connection's start.
            connection.state.phase = .handshake
        }
        guard register(fd, connection) else { return drop() }
        // Bytes that came before it was watched are reported by EPOLL_CTL_ADD itself.
        openCount += 1
    }

    /// Adds `fd` (the client's or a tunnel's upstream) to the table and to epoll, edge-triggered.
    func register(_ fd: Int32, _ connection: Connection) -> Bool {
        let slot = Int(fd)
        if slot >= connections.count {
            // Filled in one pass: appending a `Repeated` copies element by element where not
            // optimized, and under ThreadSanitizer (whose runtime takes a lock for each step's
            // type lookup) the first connection of a test process with 1,100 descriptors open
            // waited 9–10 s for it.
            let added = max(slot + 1, connections.count * 2, 256) - connections.count
            connections += [Connection?](repeating: nil, count: added)
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
        event.data.u64 = UInt64(connection.generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else { return false }
        connections[slot] = connection
        return true
    }

    /// A TLS record (RFC 8446 §5.1: type alert, version 0x0303, 2 octets) holding a fatal
    /// `internal_error` alert (§6: level 2, description 80; §6.2: "unrelated to the peer").
    static let tlsRefusal: [UInt8] = [21, 3, 3, 0, 2, 2, 80]

    /// `503` to a connection over the cap. Its `Proxy-Status` says `proxy_internal_response`
    /// (RFC 9209 §2.3.29: made without trying the next hop): `connection_limit_reached`
    /// (§2.3.12) is about connections to the next hop, and the proxy has no fault to report.
    private static func refusal(proxyName: String?) -> [UInt8] {
        let body = "503 Service Unavailable: too many connections are open; try again later\n"
        var head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        if let proxyName {
            let status = ProxyStatusMember(
                proxy: proxyName, error: .proxyInternalResponse, details: "too many connections")
            head += "Proxy-Status: \(status.fieldValue)\r\n"
        }
        head += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        return Array((head + body).utf8)
    }

    /// The `Proxy-Status` value of an error status the server answers itself (`400`, `408`,
    /// `413`, `431`): `http_request_error` with the status (RFC 9209 §2.3.16).
    func proxyStatus(rejecting status: Int) -> String? {
        proxyName.map { ProxyStatusMember(proxy: $0, error: .httpRequestError, statusCode: status).fieldValue }
    }

    /// Answers a connection over the cap and closes it at once: a `503`
    /// (``refusal(proxyName:)``), or on the TLS port a fatal `internal_error` alert in the clear
    /// (RFC 8446 §6: an alert may come before any key is agreed), where a plain HTTP answer
    /// would be garbage to the client's TLS, read as a record it cannot parse.
    private func refuse(_ fd: Int32, tls: Bool) {
        refusedSinceLog += 1
        if now - lastRefusalLog >= 1000 { logRefusals() }
        let answer = tls ? Self.tlsRefusal : refusal
        answer.withUnsafeBytes { _ = send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Glibc.shutdown(fd, Int32(SHUT_WR))
        // Read what already arrived so that closing sends FIN rather than a reset.
        var scratch = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        _ = withUnsafeMutableBytes(of: &scratch) { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    private func logRefusals() {
        let reason =
            shuttingDown
            ? "the server is shutting down"
            : "\(counters.maxConnections) connections are open; raise --max-connections if the machine can take more"
        log("HTTP server: refused \(refusedSinceLog) connection\(refusedSinceLog == 1 ? "" : "s"): \(reason)")
        refusedSinceLog = 0
        lastRefusalLog = now
    }

    // MARK: timeouts

    private func sweep() {
        if refusedSinceLog > 0 && now - lastRefusalLog >= 1000 { logRefusals() }
        expireWatches(all: false)
        if !listening && !shuttingDown && acceptPausedUntil > 0 && now >= acceptPausedUntil {
            acceptPausedUntil = 0
            listening = addListener(exclusive: shareListener)
        }
        var slot = 0
        while slot < connections.count {
            defer { slot += 1 }
            guard let connection = connections[slot], Int(connection.fd) == slot else { continue }
            // A client that stops reading: nothing it is sent moves for idleTimeout.
            if connection.state.writeBlockedSince > 0 && now - connection.state.writeBlockedSince >= idleMilliseconds {
                close(connection)
                continue
            }
            if connection.state.phase == .http2, let session = connection.state.h2 {
                session.sweep(now: now, header: headerMilliseconds, idle: idleMilliseconds)
                drive(connection)
                continue
            }
            if connection.state.phase != .tunnel && !connection.state.output.isEmpty { continue }
            guard now >= connection.state.deadline else { continue }
            switch connection.state.phase {
            case .handshake:
                // Slowloris on the handshake (or a client that never starts one).
                countHandshake(failed: true)
                close(connection)
            case .head:
                if connection.state.bufferedInput > 0 || connection.state.parser.hasStarted {
                    reject(
                        connection,
                        Rejection(
                            status: 408,
                            reason: "the request head was not complete within \(Double(headerMilliseconds) / 1000) s"))
                    drive(connection)
                } else {
                    close(connection)
                }
            case .body:
                reject(connection, lateBody(connection.state.bodyProgress))
                drive(connection)
            case .handling, .http2:
                break
            case .closing, .tunnel:
                close(connection)
            }
        }
    }

    // MARK: closing

    /// Closes the connection (and its tunnel's upstream) at once; blocked writers wake up.
    func close(_ connection: Connection) {
        guard !connection.state.closed else { return }
        connection.state.closed = true
        if let tls = connection.state.tls {
            // close_notify (RFC 8446 §6.1) if the socket takes it now; nothing after a failure.
            if !connection.state.writeShut { _ = tls.shutdown() }
            connection.state.tls = nil
        }
        Glibc.close(connection.fd)
        connections[Int(connection.fd)] = nil
        if let tunnel = connection.state.tunnel {
            Glibc.close(tunnel.fd)
            connections[Int(tunnel.fd)] = nil
        }
        openCount -= 1
        counters.closed()
        counters.left(index)
        let shared = connection.shared
        shared.withLock { shared in
            shared.gone = true
            shared.queuedBytes = 0
        }
        shared.wakeWaiters()
        connection.state.releaseBuffers()
    }

    // MARK: posted work

    /// Queues `command` for the loop; `false` once the loop has stopped.
    func post(_ command: LoopCommand) -> Bool {
        mailbox.withLock { mailbox in
            guard !mailbox.closed else { return false }
            mailbox.commands.append(command)
            if !mailbox.wakePending {
                mailbox.wakePending = true
                var one: UInt64 = 1
                _ = Glibc.write(wakeFD, &one, 8)
            }
            return true
        }
    }

    private func drainMailbox() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
        mailbox.withLock { mailbox in
            swap(&mailbox.commands, &applying)
            mailbox.wakePending = false
        }
        for command in applying { apply(command) }
        applying.removeAll(keepingCapacity: true)
    }

    private func apply(_ command: LoopCommand) {
        switch command {
        case .shutdown(let deadline):
            beginShutdown(deadline: deadline)
        case .respond(let target, let head, let body, let framing):
            appliedFromMailbox(target)
            respond(target, head, body, framing)
        case .start(let target, let head, let framing):
            appliedFromMailbox(target)
            start(target, head, framing)
        case .interim(let target, let head):
            appliedFromMailbox(target)
            interim(target, head)
        case .write(let target, let bytes, let accounted):
            appliedFromMailbox(target)
            _ = write(target, bytes, accounted: accounted)
        case .finish(let target):
            appliedFromMailbox(target)
            finish(target)
        case .abort(let target):
            appliedFromMailbox(target)
            abort(target)
        case .tunnel(let target, let fd):
            appliedFromMailbox(target)
            tunnel(target, to: fd)
        case .adopt(let fd, let tls, let peerIsLoopback, let peer):
            adopt(fd, tls: tls, peerIsLoopback: peerIsLoopback, peer: peer)
        case .abandoned(let target):
            guard isCurrent(target) else { return }
            if target.stream != nil {
                log(
                    "HTTP server: a request was never answered (its responder was released); resetting its HTTP/2 stream"
                )
                return abortHTTP2(target)
            }
            log("HTTP server: a request was never answered (its responder was released); closing the connection")
            close(target.connection)
        case .goAway:
            for case let connection? in connections where connection.state.phase == .http2 {
                connection.state.h2?.goAway(notice: true)
                markDirty(connection)
            }
        case .ping(let answer):
            answer()
        }
    }

    private func appliedFromMailbox(_ target: ResponseTarget) {
        target.shared.withLock { $0.inMailbox -= 1 }
    }

    /// Whether `target` is the request its connection is answering now.
    func isCurrent(_ target: ResponseTarget) -> Bool {
        if target.stream != nil { return http2Stream(target) != nil }
        let connection = target.connection
        return !connection.state.closed && connection.state.sequence == target.sequence
            && connection.state.phase == .handling
    }

    // MARK: shutdown

    private func beginShutdown(deadline: Int) {
        shuttingDown = true
        shutdownDeadline = deadline
        removeListener()
        var slot = 0
        while slot < connections.count {
            defer { slot += 1 }
            guard let connection = connections[slot], Int(connection.fd) == slot else { continue }
            switch connection.state.phase {
            case .handshake:
                close(connection)
            case .head, .body:
                // Idle, or a request not complete yet: nothing is in flight.
                if connection.state.output.isEmpty {
                    close(connection)
                } else {
                    connection.state.phase = .closing
                }
            case .handling:
                connection.state.keepAlive = false
            case .http2:
                // RFC 9113 §6.8: streams begun finish, no new ones; the session ends after them.
                connection.state.h2?.goAway(notice: true)
                markDirty(connection)
            case .closing, .tunnel:
                break
            }
        }
    }

    private func tearDown() {
        let left = mailbox.withLock { mailbox in
            mailbox.closed = true
            defer { mailbox.commands = [] }
            return mailbox.commands
        }
        for command in left {
            switch command {
            case .tunnel(_, let fd):
                Glibc.close(fd)
            case .adopt(let fd, _, _, _):
                Glibc.close(fd)
                counters.closed()
                counters.left(index)
            default:
                break
            }
        }
        for case let connection? in connections where !connection.state.closed { close(connection) }
        expireWatches(all: true)
        removeListener()
        mailbox.withLock { _ in
            Glibc.close(wakeFD)
            Glibc.close(epollFD)
        }
    }

    // MARK: statistics

    struct LoopCounts {
        var requests = 0
        var rejected = 0
        var handshakes = 0
        var failedHandshakes = 0
        var http2Connections = 0
        var http2Streams = 0
        /// GOAWAY frames sent, by error code (RFC 9113 §7).
        var goAways: [UInt32: Int] = [:]
    }

    func countRequest(http2: Bool = false) {
        requestCounts.withLock { counts in
            counts.requests += 1
            if http2 { counts.http2Streams += 1 }
        }
    }
    func countHTTP2Connection() { requestCounts.withLock { $0.http2Connections += 1 } }
    func countGoAway(_ code: UInt32) { requestCounts.withLock { $0.goAways[code, default: 0] += 1 } }
    func countRejection() { requestCounts.withLock { $0.rejected += 1 } }
    func countHandshake(failed: Bool) {
        requestCounts.withLock { counts in
            if failed { counts.failedHandshakes += 1 } else { counts.handshakes += 1 }
        }
    }
    var counts: LoopCounts { requestCounts.withLock { $0 } }
}
#endif
