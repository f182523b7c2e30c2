#if os(Linux)
import CacheSystem

/// Idle kept-alive connections to origins, shared by every thread of an ``UpstreamClient``:
/// plain sockets and TLS connections (each keeping its TLS state) alike.
///
/// Bounded in total (the oldest idle connection is closed to make room) and in time (a
/// connection idle longer than the lifetime is closed rather than reused). Taking prefers the
/// connection to that origin that was idle for the shortest time (LIFO), the likeliest to be
/// still open, and checks that it is still idle (``UpstreamStream/isIdle()``): one the
/// origin closed or sent stray bytes on is closed and the next one tried.
///
/// A stream is owned by the pool while it is in it (touched only under the lock) and by the
/// one thread that took it afterwards.
final class ConnectionPool: Sendable {
    private struct Idle {
        var key: String
        var stream: any UpstreamStream
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
        idle.withLock { $0 }.forEach { $0.stream.close() }
    }

    /// A pooled connection under `key` (``UpstreamRequest/Wire/poolKey``) that is still idle,
    /// or nil.
    func take(_ key: String) -> (any UpstreamStream)? {
        while true {
            var closing: [any UpstreamStream] = []
            let found: (any UpstreamStream)? = idle.withLock { list in
                closing = expire(&list)
                guard let index = list.lastIndex(where: { $0.key == key }) else { return nil }
                return list.remove(at: index).stream
            }
            closing.forEach { $0.close() }
            guard let stream = found else { return nil }
            if stream.isIdle() { return stream }
            stream.close()
        }
    }

    /// Keeps `stream`, connected as `key` says and idle, for reuse.
    func put(_ stream: any UpstreamStream, key: String) {
        var closing: [any UpstreamStream] = []
        idle.withLock { list in
            closing = expire(&list)
            list.append(Idle(key: key, stream: stream, since: MonotonicClock.seconds()))
            while list.count > capacity { closing.append(list.removeFirst().stream) }
        }
        closing.forEach { $0.close() }
    }

    /// How many connections are idle.
    var count: Int { idle.withLock { $0.count } }

    /// Removes the connections idle for longer than the lifetime; their streams, to close.
    private func expire(_ list: inout [Idle]) -> [any UpstreamStream] {
        let oldest = MonotonicClock.seconds() - lifetime
        guard let kept = list.firstIndex(where: { $0.since >= oldest }) else {
            defer { list.removeAll() }
            return list.map(\.stream)
        }
        defer { list.removeFirst(kept) }
        return list[..<kept].map(\.stream)
    }
}
#endif
