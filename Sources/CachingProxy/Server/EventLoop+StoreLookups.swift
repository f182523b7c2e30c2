#if os(Linux)
// A loop's own way to the store's server or index (CacheStore.makeLookupChannel: the Redis
// tier's connection, the disk index's reading thread): a lookup the store cannot answer without
// waiting parks its request here instead of holding the loop for a round trip or for the index's
// lock. The channel's descriptor is in the loop's epoll set, watched for writing only while
// lookups are queued, so what one pass queued goes out in one write at the start of the next;
// a timerfd, armed for the oldest lookup's deadline, gives up what is late.
import CEpollHTTPCache
import CacheStorage
import Glibc

/// The lookup channel of one loop, watched by it.
final class LoopLookups {
    private let channel: any LookupChannel
    private unowned let loop: EventLoop
    private var socketWatch: LoopWatch?
    private let timer: Int32
    private var timerWatch: LoopWatch?
    private var timerArmed = false
    /// The loop could not watch a descriptor, or stopped: lookups are made where they are needed.
    private var stopped = false

    /// The channel `store` makes for `loop`; `nil` when it has none, or epoll or a timerfd
    /// cannot be had.
    init?(store: any CacheStore, loop: EventLoop) {
        guard let channel = store.makeLookupChannel() else { return nil }
        timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        guard timer >= 0 else { return nil }
        self.channel = channel
        self.loop = loop
        let timerWatch = LoopWatch(
            fd: timer, ready: { [unowned self] in timerFired() }, expired: { [unowned self] in stop() })
        guard loop.watch(timerWatch, readable: true, writable: false, for: 0) else {
            Glibc.close(timer)
            return nil
        }
        self.timerWatch = timerWatch
        channel.willClose = { [unowned self] fd in
            if let watch = socketWatch, watch.fd == fd { loop.unwatch(watch) }
            socketWatch = nil
        }
    }

    deinit {
        if !stopped { Glibc.close(timer) }
    }

    /// Queues a lookup of `primaryKey`; what `resume` makes is called on this loop once the
    /// store answers it without a round trip (or fails it: a miss). `false`: not queued, go on
    /// at once. `resume` is called only when the channel may queue the lookup: most lookups
    /// (a disk store's index not held by an open batch) copy nothing into a closure.
    func lookUp(_ primaryKey: String, _ resume: () -> () -> Void) -> Bool {
        guard !stopped, channel.mayQueue(primaryKey), channel.lookUp(primaryKey, resume()) else { return false }
        update()
        return true
    }

    /// Watches the channel's socket as it now needs, and arms the timer for its deadline.
    private func update() {
        guard !stopped else { return }
        if channel.descriptor >= 0 {
            let watch =
                socketWatch
                ?? LoopWatch(
                    fd: channel.descriptor, ready: { [unowned self] in ready() }, expired: { [unowned self] in stop() })
            socketWatch = watch
            guard loop.watch(watch, readable: true, writable: channel.wantsToWrite, for: 0) else { return stop() }
        }
        if !timerArmed, let deadline = channel.deadline {
            var spec = itimerspec()
            spec.it_value.tv_sec = Int(deadline.rounded(.down))
            spec.it_value.tv_nsec = Int((deadline - deadline.rounded(.down)) * 1e9)
            timerArmed = timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &spec, nil) == 0
        }
    }

    private func ready() {
        channel.descriptorReady()
        update()
    }

    /// The oldest lookup's deadline came (or an earlier one's, answered since): the late are
    /// given up, and the timer armed again for what is left.
    private func timerFired() {
        var expirations: UInt64 = 0
        _ = read(timer, &expirations, 8)
        timerArmed = false
        channel.expire()
        update()
    }

    /// The loop stops (or could not watch): the lookups in flight are answered as failed.
    private func stop() {
        guard !stopped else { return }
        stopped = true
        if let timerWatch { loop.unwatch(timerWatch) }
        Glibc.close(timer)
        channel.close()
    }
}

@available(*, unavailable)
extension LoopLookups: Sendable {}

extension EventLoop {
    /// Queues a lookup of `primaryKey` in `store` on this loop's channel (made on first use);
    /// what `resume` makes (only when the channel may queue it) is called on this loop once it
    /// is answered. `false` when the store has no channel or it is not queued: go on at once.
    func lookUp(_ primaryKey: String, in store: any CacheStore, _ resume: () -> () -> Void) -> Bool {
        if storeLookups == nil { storeLookups = LoopLookups(store: store, loop: self) }
        return storeLookups?.lookUp(primaryKey, resume) ?? false
    }
}
#endif
