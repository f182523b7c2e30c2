#if os(Linux)
import CEpollHTTPCache
import CacheStorage
import CacheSystem
import Glibc

/// One event loop's lookups in a Redis Cluster (`LookupChannel`): a connection of the loop's own
/// to each master it needed so far (a ``RedisLookupChannel``, opened on first use), each lookup
/// queued on the master of its key's slot in the client's slot map as it stands, so lookups
/// queued in one pass go out in one write per master and the replies are matched per
/// connection, in order.
///
/// The loop watches one descriptor: an epoll set of the connections' sockets, which is readable
/// when one of them is readable, or writable while it has lookups to write (so ``wantsToWrite``
/// is always `false`: the set says it).
///
/// What the Cluster's state makes uncertain is never answered with a guess:
/// - a key whose slot has no master in the map (not read yet, or a failover left it unserved),
///   or whose master cannot be reached now: not queued (`false`), so the store answers it as it
///   would without a channel, over the pool, which reads the map and follows redirects; and the
///   map is read again off the loop;
/// - `MOVED`: the slot's new master is noted (the map read again off the loop) and the lookup
///   queued there; `ASK`: queued there after `ASKING`; at most two redirects a lookup, then the
///   last reply answers it (a miss, counted by its kind);
/// - `TRYAGAIN`, `CLUSTERDOWN` or any other error reply, a timeout, a connection that breaks:
///   that lookup (those of the connection) answered as failed, a miss, as on the blocking path.
final class RedisClusterLookupChannel: LookupChannel {
    private let store: RedisStore
    private let answersLocally: (String) -> Bool

    /// The connections to the masters, by server and by socket.
    private var connections: [RedisConfiguration.Node: RedisLookupChannel] = [:]
    private var bySocket: [Int32: RedisLookupChannel] = [:]
    /// The events each socket is in the set for.
    private var watched: [Int32: UInt32] = [:]
    private var events = [epoll_event](repeating: epoll_event(), count: 16)

    /// The epoll set; -1 until the first lookup.
    private(set) var descriptor: Int32 = -1
    var willClose: ((Int32) -> Void)?

    /// Redirects a lookup follows before it is answered with the last.
    static let redirectLimit = 2

    init(store: RedisStore, answersLocally: @escaping (String) -> Bool) {
        self.store = store
        self.answersLocally = answersLocally
    }

    deinit {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }

    var wantsToWrite: Bool { false }

    var deadline: Double? {
        var earliest: Double?
        for connection in connections.values {
            if let deadline = connection.deadline { earliest = min(earliest ?? deadline, deadline) }
        }
        return earliest
    }

    func lookUp(_ primaryKey: String, _ done: @escaping () -> Void) -> Bool {
        guard !answersLocally(primaryKey) else { return false }
        let key = store.entryKey(primaryKey)
        guard let master = store.client.knownMaster(of: key), queue(key, on: master, asking: false, hops: 0, done)
        else {
            store.client.refreshSlotsInBackground()
            return false
        }
        return true
    }

    /// Queues a lookup of the hash `key` on the connection to `node`; `false` when it cannot be.
    private func queue(
        _ key: [UInt8], on node: RedisConfiguration.Node, asking: Bool, hops: Int, _ done: @escaping () -> Void
    ) -> Bool {
        guard descriptor >= 0 || openSet() else { return false }
        let connection = connections[node] ?? connect(node)
        guard connection.queue(key, asking: asking, hops: hops, done) else { return false }
        watch(connection)
        return true
    }

    private func openSet() -> Bool {
        descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        return descriptor >= 0
    }

    /// The channel of `node` (not connected yet: it connects on its first lookup).
    private func connect(_ node: RedisConfiguration.Node) -> RedisLookupChannel {
        let connection = RedisLookupChannel(store: store, node: node, answersLocally: { _ in false })
        connection.willClose = { [unowned self] socket in forget(socket) }
        connection.redirected = { [unowned self] redirect, key, hops, done in
            guard hops < Self.redirectLimit else { return false }
            if !redirect.asking { store.client.moved(redirect) }
            return queue(key, on: redirect.node, asking: redirect.asking, hops: hops + 1, done)
        }
        connections[node] = connection
        return connection
    }

    /// Puts `connection`'s socket in the set for what it now waits for; a socket the set
    /// refuses fails its lookups (they are answered as failed, not left waiting).
    private func watch(_ connection: RedisLookupChannel) {
        let socket = connection.descriptor
        guard socket >= 0, descriptor >= 0 else { return }
        bySocket[socket] = connection
        let wanted = EPOLLIN.rawValue | (connection.wantsToWrite ? EPOLLOUT.rawValue : 0)
        let current = watched[socket]
        guard current != wanted else { return }
        var event = epoll_event()
        event.events = wanted
        event.data.fd = socket
        guard epoll_ctl(descriptor, current == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event) == 0 else {
            return connection.close()
        }
        watched[socket] = wanted
    }

    /// A connection closes `socket`: out of the set first.
    private func forget(_ socket: Int32) {
        if watched.removeValue(forKey: socket) != nil, descriptor >= 0 {
            var event = epoll_event()
            epoll_ctl(descriptor, EPOLL_CTL_DEL, socket, &event)
        }
        bySocket[socket] = nil
    }

    func descriptorReady() {
        guard descriptor >= 0 else { return }
        let count = events.withUnsafeMutableBufferPointer {
            epoll_wait(descriptor, $0.baseAddress, Int32($0.count), 0)
        }
        guard count > 0 else { return }
        // The sockets first: a connection that closes while another is served drops out.
        let ready = (0..<Int(count)).map { events[$0].data.fd }
        for socket in ready {
            guard let connection = bySocket[socket] else { continue }
            connection.descriptorReady()
            watch(connection)
        }
    }

    func expire() {
        for connection in Array(connections.values) { connection.expire() }
    }

    func close() {
        for connection in Array(connections.values) { connection.close() }
        connections = [:]
        bySocket = [:]
        watched = [:]
        guard descriptor >= 0 else { return }
        willClose?(descriptor)
        _ = Glibc.close(descriptor)
        descriptor = -1
    }
}
#endif
