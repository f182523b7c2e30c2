#if os(Linux)
// Descriptors a loop watches for others than its client connections: the origin connections of
// transfers the loop runs itself (ProxyExchange), one-shot (EPOLLONESHOT), and the store's lookup
// channel and its timer (EventLoop+StoreLookups), level-triggered; each with a deadline the sweep
// enforces.
//
// One-shot, so that a transfer that ends after the event it waited for (a miss, a revalidation:
// the response comes in one read) leaves its descriptor in epoll disabled instead of paying an
// EPOLL_CTL_DEL: a disabled registration reports nothing, and the kernel drops it when the
// connection is closed. The next watch of that descriptor from this loop (the pooled connection
// again) re-arms it with EPOLL_CTL_MOD rather than adding it.
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
    /// Reported once per ``EventLoop/watch(_:readable:writable:for:)`` (EPOLLONESHOT), where a
    /// level-triggered watch reports for as long as the descriptor is ready.
    let oneShot: Bool
    fileprivate(set) var generation: UInt32 = 0
    fileprivate var events: UInt32 = 0
    fileprivate var deadline = Int.max
    fileprivate var registered = false
    /// Registered and enabled in epoll: a one-shot watch is not once it reported.
    fileprivate var armed = false

    init(fd: Int32, oneShot: Bool = false, ready: @escaping () -> Void, expired: @escaping () -> Void) {
        self.fd = fd
        self.oneShot = oneShot
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
        if watch.armed && watch.events == events { return true }
        var event = epoll_event()
        event.events = events | (watch.oneShot ? EPOLLONESHOT.rawValue : 0)
        if !watch.registered {
            watch.generation = nextWatchGeneration()
        }
        event.data.u64 = UInt64(watch.generation) << 32 | UInt64(UInt32(bitPattern: watch.fd))
        // Registered already: by this watch, or disabled in epoll by an earlier one on the same
        // connection (`dormantWatches`). Else new. Either guess is checked by epoll: a dormant
        // descriptor closed since is gone from epoll (ENOENT), and one registered before is
        // there (EEXIST).
        let known = watch.registered || dormantWatches.contains(watch.fd)
        var done = epoll_ctl(epollFD, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, watch.fd, &event) == 0
        if !done && errno == (known ? ENOENT : EEXIST) {
            done = epoll_ctl(epollFD, known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, watch.fd, &event) == 0
        }
        dormantWatches.remove(watch.fd)
        guard done else { return false }
        watch.events = events
        watch.registered = true
        watch.armed = true
        watches[watch.fd] = watch
        return true
    }

    /// Stops watching: before the descriptor is closed or handed to anyone else. A one-shot
    /// registration that reported its event is disabled already and stays in epoll (see the top
    /// of the file).
    func unwatch(_ watch: LoopWatch) {
        guard watch.registered else { return }
        if watch.armed {
            var event = epoll_event()
            epoll_ctl(epollFD, EPOLL_CTL_DEL, watch.fd, &event)
            watch.armed = false
        } else {
            dormantWatches.insert(watch.fd)
        }
        watch.registered = false
        if watches[watch.fd] === watch { watches[watch.fd] = nil }
    }

    /// An event for a watched descriptor (one from before a change of hands is ignored).
    func watchReady(_ watch: LoopWatch, token: UInt64) {
        guard watch.registered, UInt32(truncatingIfNeeded: token >> 32) == watch.generation else { return }
        // One-shot: epoll reports nothing more until the watch is armed again.
        if watch.oneShot { watch.armed = false }
        watch.ready()
    }

    /// Calls `expired` of the watches past their deadline (of all of them when the loop stops).
    func expireWatches(all: Bool) {
        // Every sweep of every loop comes here, and most find no watch. A debug build runs
        // `filter` in the standard library's unspecialized code, which looks up type metadata
        // even for an empty dictionary; under ThreadSanitizer each lookup takes a process-wide
        // lock, and the sweeps of a test process's hundreds of idle loops queued on it.
        guard !watches.isEmpty else { return }
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
