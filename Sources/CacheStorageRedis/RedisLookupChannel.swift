import CacheStorage
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One event loop's own connection to a standalone Redis, or to one master of a Cluster
/// (``RedisClusterLookupChannel``, which routes the lookups) (`LookupChannel`): each
/// lookup appends its `HGETALL` to the output, the loop writes what a pass queued in one `send`
/// (pipelining), and the replies, which come back in order, resume their lookups one by one with
/// the reply staged in the store (``RedisStore/answering(_:with:_:)``).
///
/// Faults as on the blocking path, each counted in ``RedisMetrics`` and logged as the client
/// does: a lookup not answered within the command timeout resumes as failed (a miss), and its
/// reply, should it come, is dropped, so the others on the connection go on; a connection that
/// breaks, a reply that does not parse, or a server that leaves a lookup unanswered for
/// ``hangLimit`` closes the connection (what follows would be out of step) and every lookup in
/// flight resumes as failed. A value too large to be read (``RESPParser/maximumBulkLength``)
/// breaks it at once, as soon as its length arrives, and its key is removed
/// (``RedisStore/removeOversized(_:length:)``). A server that refused a connection is not tried again before its
/// backoff passed. A byte that arrives with no lookup waiting for it is a broken protocol too: no
/// reply is ever matched to another key's lookup.
///
/// In a Cluster, a `MOVED` or `ASK` reply is handed to ``redirected``, which may queue the lookup
/// on the connection to the master named (`ASKING` first for `ASK`); one it does not follow is
/// answered with the reply (a miss) and counted by its kind.
final class RedisLookupChannel: LookupChannel {
    private let store: RedisStore
    private let node: RedisConfiguration.Node
    private let answersLocally: (String) -> Bool
    /// The command timeout (seconds).
    private let timeout: Double

    private(set) var descriptor: Int32 = -1
    var willClose: ((Int32) -> Void)?
    /// Called with a lookup's redirect, its hash, the redirects it followed so far, and its
    /// `done`: `true` when it queued the lookup elsewhere (this channel is then done with it).
    var redirected: ((RedisClient.Redirect, _ key: [UInt8], _ hops: Int, _ done: @escaping () -> Void) -> Bool)?

    private struct Lookup {
        /// The hash asked for.
        var key: [UInt8]
        /// `nil` once it resumed as timed out: its reply is dropped.
        var done: (() -> Void)?
        /// When it times out (`MonotonicClock` seconds).
        var deadline: Double
        /// Sent after `ASKING`, whose reply comes first and is dropped (until it did).
        var asking = false
        /// The redirects it followed to get here.
        var hops = 0
    }

    /// Lookups in the order they were queued; those before `head` are answered, those before
    /// `live` resumed (timed out).
    private var lookups: [Lookup] = []
    private var head = 0
    private var live = 0
    /// Commands not yet written: those of `lookups` from `unsent` on.
    private var output: [UInt8] = []
    private var written = 0
    private var unsent = 0
    /// Writes whose replies are not all in: the index of the lookup after its last, when it
    /// went out, the error replies among its replies so far.
    private var batches: [(end: Int, sentAt: Double, refusals: [String])] = []
    private var parser = RESPParser()
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)

    init(store: RedisStore, node: RedisConfiguration.Node, answersLocally: @escaping (String) -> Bool) {
        self.store = store
        self.node = node
        self.answersLocally = answersLocally
        timeout = store.configuration.commandTimeout
    }

    deinit {
        if descriptor >= 0 { closeSocket(descriptor) }
        readBuffer.deallocate()
    }

    var wantsToWrite: Bool { written < output.count }

    /// Seconds a lookup may wait for its reply before the server is taken to hang: the
    /// connection then closes (ten command timeouts, at least one second).
    private var hangLimit: Double { max(1, 10 * timeout) }

    var deadline: Double? {
        let next = live < lookups.count ? lookups[live].deadline : nil
        guard head < live else { return next }
        return min(lookups[head].deadline + hangLimit, next ?? .infinity)
    }

    func lookUp(_ primaryKey: String, _ done: @escaping () -> Void) -> Bool {
        guard !answersLocally(primaryKey) else { return false }
        return queue(store.entryKey(primaryKey), done)
    }

    /// Queues an `HGETALL` of the hash `key` (after `ASKING` when `asking`), connecting first
    /// when needed; `false` when the server cannot be reached now.
    func queue(_ key: [UInt8], asking: Bool = false, hops: Int = 0, _ done: @escaping () -> Void) -> Bool {
        guard descriptor >= 0 || connect() else { return false }
        if asking { RESPEncoder.append([bytes("ASKING")], to: &output) }
        RESPEncoder.append([bytes("HGETALL"), key], to: &output)
        lookups.append(
            Lookup(key: key, done: done, deadline: MonotonicClock.seconds() + timeout, asking: asking, hops: hops))
        return true
    }

    /// Connects (blocking for at most the connect timeout, as the pool does) unless the server
    /// failed a moment ago.
    private func connect() -> Bool {
        guard let connection = try? store.client.newConnection(to: node, onLoop: true) else { return false }
        descriptor = connection.detachNonBlocking()
        return true
    }

    func descriptorReady() {
        guard descriptor >= 0 else { return }
        if wantsToWrite && !flush() { return }
        receive()
    }

    /// Writes what is queued; `false` when the connection failed.
    private func flush() -> Bool {
        while written < output.count {
            let sent = output.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + written, $0.count - written, sendFlags)
            }
            if sent < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return true }
                fail(RedisFailure(.connection, "writing to Redis at \(node) failed: errno \(errno)"))
                return false
            }
            written += sent
        }
        let count = lookups.count - unsent
        batches.append((lookups.count, MonotonicClock.seconds(), []))
        unsent = lookups.count
        output.removeAll(keepingCapacity: true)
        written = 0
        store.client.count { $0.lookupsOnLoops += count }
        return true
    }

    /// Reads what arrived and resumes the lookups whose replies are in.
    private func receive() {
        while descriptor >= 0 {
            let count = recv(descriptor, readBuffer.baseAddress, readBuffer.count, Int32(MSG_DONTWAIT))
            if count == 0 { return fail(RedisFailure(.connection, "Redis at \(node) closed the connection")) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                return fail(RedisFailure(.connection, "reading from Redis at \(node) failed: errno \(errno)"))
            }
            parser.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
            deliver()
        }
    }

    /// Resumes each lookup whose reply is whole, in order.
    private func deliver() {
        while descriptor >= 0 {
            guard head < unsent else {
                if !parser.isDrained {
                    fail(RedisFailure(.reply, "Redis at \(node) sent a reply no lookup asked for"))
                }
                return
            }
            let reply: RESPValue
            do {
                guard let next = try parser.next() else { return }
                reply = next
            } catch {
                // A value too large to read: the connection cannot go on without reading it, so
                // it closes (the lookups on it are misses now, not after a timeout). The key that
                // held it is removed first, over another connection (one round trip, bounded by
                // the command timeout), so that no lookup or store after these meets it again.
                if let oversized = error.oversized, !lookups[head].asking {
                    store.removeOversized(lookups[head].key, length: oversized.length)
                }
                return fail(RedisFailure(.reply, "Redis at \(node) broke the protocol: \(error)"))
            }
            if lookups[head].asking {
                lookups[head].asking = false  // ASKING's +OK
                continue
            }
            let lookup = lookups[head]
            lookups[head].done = nil
            head += 1
            live = max(live, head)
            var followed = false
            if let message = reply.errorMessage {
                if let done = lookup.done, let redirected, let redirect = RedisClient.Redirect(message) {
                    followed = redirected(redirect, lookup.key, lookup.hops, done)
                }
                if !followed {
                    batches[0].refusals.append(message)
                    // A Cluster failing over: its slot map is read again (off the loop).
                    if message.hasPrefix("CLUSTERDOWN") { store.client.refreshSlotsInBackground() }
                }
            }
            if head == batches[0].end {
                let batch = batches.removeFirst()
                let now = MonotonicClock.seconds()
                store.client.answered(
                    node, startedAt: batch.sentAt, elapsed: now - batch.sentAt, refusals: batch.refusals)
            }
            if head == lookups.count {
                forgetAnswered()
            } else if head >= 256 && head * 2 >= lookups.count {
                dropAnswered()
            }
            if !followed, let done = lookup.done { store.answering(lookup.key, with: .success(reply), done) }
        }
    }

    /// Drops the answered lookups once none is left in flight (no copy of those still waiting).
    private func forgetAnswered() {
        lookups.removeAll(keepingCapacity: lookups.capacity <= 1024)
        head = 0
        live = 0
        unsent = 0
    }

    /// Drops the answered lookups while others are in flight: under a load that always has some,
    /// the queue would grow without end otherwise.
    private func dropAnswered() {
        lookups.removeFirst(head)
        live -= head
        unsent -= head
        for index in batches.indices { batches[index].end -= head }
        head = 0
    }

    func expire() {
        let now = MonotonicClock.seconds()
        if head < lookups.count, lookups[head].deadline + hangLimit <= now {
            return fail(
                RedisFailure(.timeout, "Redis at \(node) left a lookup unanswered for \(hangLimit) s; reconnecting"))
        }
        var late: [Lookup] = []
        while live < lookups.count, lookups[live].deadline <= now {
            late.append(lookups[live])
            lookups[live].done = nil
            live += 1
        }
        let failure = RedisFailure(.timeout, "Redis at \(node) did not answer in time")
        let error = StorageError(.readFailed, "Redis: \(failure)")
        for lookup in late {
            store.client.failed(node, failure, onLoop: true)
            if let done = lookup.done { store.answering(lookup.key, with: .failure(error), done) }
        }
    }

    func close() {
        fail(nil)
    }

    /// Closes the connection and resumes every lookup with `failure` (counted and logged as the
    /// client does), or as closed when `nil`.
    private func fail(_ failure: RedisFailure?) {
        if let failure { store.client.failed(node, failure, onLoop: true) }
        let waiting = lookups[live...]
        lookups = []
        head = 0
        live = 0
        unsent = 0
        output = []
        written = 0
        batches = []
        parser = RESPParser()
        if descriptor >= 0 {
            willClose?(descriptor)
            closeSocket(descriptor)
            descriptor = -1
        }
        let error = StorageError(
            .readFailed, "Redis: \(failure.map { "\($0)" } ?? "the event loop's connection to \(node) was closed")")
        for lookup in waiting { store.answering(lookup.key, with: .failure(error), lookup.done!) }
    }
}

#if canImport(Glibc)
private let sendFlags = Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
private func closeSocket(_ fd: Int32) { _ = Glibc.close(fd) }
#else
private let sendFlags = Int32(MSG_DONTWAIT)  // Darwin: SO_NOSIGPIPE is set on the socket instead
private func closeSocket(_ fd: Int32) { _ = Darwin.close(fd) }
#endif
