#if os(Linux)
// Descriptors a loop watches for others than its client connections: the origin connections of
// transfers the loop runs itself (ProxyExchange), level-triggered, each with a deadline the
// sweep enforces.
import CEpollHTTPCache
import CacheSystem
import Glibc

/// One watched descriptor and what to do when it is ready or its deadline passes; both called on
/// the loop's thread.
final class LoopWatch {
    let fd: Int32
    /// Called when the descriptor is ready for what was asked (or failed: the next call on it
    /// says how).
    let ready: () -> Void
    /// Called once, instead of `ready`, when the deadline passed or the loop stopped; the watch
    /// is already removed.
    let expired: () -> Void
    fileprivate(set) var generation: UInt32 = 0
    fileprivate var events: UInt32 = 0
    fileprivate var deadline = Int.max
    fileprivate var registered = false

    init(fd: Int32, ready: @escaping () -> Void, expired: @escaping () -> Void) {
        self.fd = fd
        self.ready = ready
        self.expired = expired
    }
}

@available(*, unavailable)
extension LoopWatch: Sendable {}

extension EventLoop {
    /// Watches `watch`'s descriptor for reading and/or writing, until `seconds` from now (0 or
    /// less: no deadline); a watch already registered is changed. On the loop thread only.
    /// `false` when epoll refused it (errno says why).
    func watch(_ watch: LoopWatch, readable: Bool, writable: Bool, for seconds: Double) -> Bool {
        let events = (readable ? EPOLLIN.rawValue : 0) | (writable ? EPOLLOUT.rawValue : 0)
        watch.deadline = seconds > 0 && seconds.isFinite ? now + Int(min(seconds, 86_400) * 1000) : Int.max
        if watch.registered && watch.events == events { return true }
        var event = epoll_event()
        event.events = events
        if !watch.registered {
            watch.generation = nextWatchGeneration()
        }
        event.data.u64 = UInt64(watch.generation) << 32 | UInt64(UInt32(bitPattern: watch.fd))
        guard epoll_ctl(epollFD, watch.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, watch.fd, &event) == 0 else {
            return false
        }
        watch.events = events
        watch.registered = true
        watches[watch.fd] = watch
        return true
    }

    /// Stops watching: before the descriptor is closed or handed to anyone else.
    func unwatch(_ watch: LoopWatch) {
        guard watch.registered else { return }
        var event = epoll_event()
        epoll_ctl(epollFD, EPOLL_CTL_DEL, watch.fd, &event)
        watch.registered = false
        if watches[watch.fd] === watch { watches[watch.fd] = nil }
    }

    /// An event for a watched descriptor (one from before a change of hands is ignored).
    func watchReady(_ watch: LoopWatch, token: UInt64) {
        guard watch.registered, UInt32(truncatingIfNeeded: token >> 32) == watch.generation else { return }
        watch.ready()
    }

    /// Calls `expired` of the watches past their deadline (of all of them when the loop stops).
    func expireWatches(all: Bool) {
        let due = watches.values.filter { all || $0.deadline <= now }
        for watch in due {
            unwatch(watch)
            watch.expired()
        }
    }

    private func nextWatchGeneration() -> UInt32 {
        watchGenerations &+= 1
        return watchGenerations
    }
}
#endif
