import CacheSystem
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("SystemThread: the one way a thread starts")
struct SystemThreadTests {
    @Test("a detached thread runs its body, on another thread than the caller's")
    func detachedRuns() throws {
        let caller = pthread_self()
        let ran = Locked<Bool?>(nil)
        try SystemThread.detached {
            let elsewhere = pthread_equal(pthread_self(), caller) == 0
            ran.withLock { $0 = elsewhere }
            ran.wakeWaiters()
        }
        #expect(ran.withLock(when: { $0 != nil }, deadline: MonotonicClock.seconds() + 30) { $0 } == true)
    }

    @Test("join returns once the body has returned")
    func joinWaits() throws {
        let count = Locked(0)
        let thread = try SystemThread.joinable {
            for _ in 0..<100_000 { count.withLock { $0 += 1 } }
        }
        thread.join()
        #expect(count.withLock { $0 } == 100_000)
    }

    #if os(Linux)
    @Test("a name is the thread's, cut to the 15 bytes Linux keeps")
    func named() throws {
        let seen = Locked<String?>(nil)
        let thread = try SystemThread.joinable(name: "redis-invalidations") {
            seen.withLock { $0 = currentThreadName() }
        }
        thread.join()
        #expect(seen.withLock { $0 } == "redis-invalidat")
    }
    #endif
}

#if os(Linux)
/// The calling thread's name, as Linux keeps it (`/proc/thread-self/comm`, newline cut).
private func currentThreadName() -> String? {
    let fd = open("/proc/thread-self/comm", O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count].prefix { $0 != 0x0A }, as: UTF8.self)
}
#endif
