#if os(Linux)
import CacheSystem
import Glibc

/// Idle kept-alive connections to origins, shared by every thread of an ``UpstreamClient``.
///
/// Bounded in total (the oldest idle connection is closed to make room) and in time (a
/// connection idle longer than the lifetime is closed rather than reused). Taking prefers the
/// connection to that origin that was idle for the shortest time (LIFO), the likeliest to be
/// still open, and checks that it is still idle (``UpstreamConnection/isIdle(_:)``): one the
/// origin closed or sent stray bytes on is closed and the next one tried.
final class ConnectionPool: Sendable {
    private struct Idle {
        var key: String
        var fd: Int32
        /// When it became idle, in monotonic seconds.
        var since: Double
    }

    /// Idle connections, oldest first.
    private let idle = Locked<[Idle]>([])
    private let capacity: Int
    private let lifetime: Double

    /// - Parameters:
    ///   - capacity: The most idle connections kept, all origins together.
    ///   - lifetime: Seconds a connection may stay idle and still be reused.
    init(capacity: Int, lifetime: Double) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    deinit {
        idle.withLock { $0 }.forEach { _ = close($0.fd) }
    }

    /// A pooled socket connected to `key` (`host:port`) that is still idle, or nil.
    func take(_ key: String) -> Int32? {
        while true {
            var closing: [Int32] = []
            let found: Int32? = idle.withLock { list in
                closing = expire(&list)
                guard let index = list.lastIndex(where: { $0.key == key }) else { return nil }
                return list.remove(at: index).fd
            }
            closing.forEach { _ = close($0) }
            guard let fd = found else { return nil }
            if UpstreamConnection.isIdle(fd) { return fd }
            _ = close(fd)
        }
    }

    /// Keeps `fd`, connected to `key` and idle, for reuse.
    func put(_ fd: Int32, key: String) {
        var closing: [Int32] = []
        idle.withLock { list in
            closing = expire(&list)
            list.append(Idle(key: key, fd: fd, since: MonotonicClock.seconds()))
            while list.count > capacity { closing.append(list.removeFirst().fd) }
        }
        closing.forEach { _ = close($0) }
    }

    /// How many connections are idle.
    var count: Int { idle.withLock { $0.count } }

    /// Removes the connections idle for longer than the lifetime; their sockets, to close.
    private func expire(_ list: inout [Idle]) -> [Int32] {
        let oldest = MonotonicClock.seconds() - lifetime
        guard let kept = list.firstIndex(where: { $0.since >= oldest }) else {
            defer { list.removeAll() }
            return list.map(\.fd)
        }
        defer { list.removeFirst(kept) }
        return list[..<kept].map(\.fd)
    }
}
#endif
