#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A thread of the operating system, started with `pthread_create`: for work that blocks (a
/// socket, the disk, a wait on a ``Locked``) and so must not hold a thread of Swift's
/// cooperative pool, in modules that do without Foundation.
///
/// ```swift
/// try SystemThread.detached(name: "accept") { acceptLoop(listener) }
/// let loop = try SystemThread.joinable { runLoop() }
/// …
/// loop.join()
/// ```
public struct SystemThread: @unchecked Sendable {
    private let handle: pthread_t

    private init(_ handle: pthread_t) { self.handle = handle }

    /// Starts a thread running `body` that nobody waits for: its resources go back to the
    /// system when `body` returns.
    /// - Parameters:
    ///   - name: What debuggers and `top -H` show (Linux keeps the first 15 bytes).
    ///   - stackSize: Bytes of stack; `nil` for the system's default (8 MiB on most Linux systems).
    /// - Throws: ``SystemError`` (`pthread_create`, e.g. `EAGAIN` when the system has no
    ///   threads to spare); `body` then never runs.
    public static func detached(
        name: String? = nil, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) throws(SystemError) {
        _ = try start(name: name, stackSize: stackSize, detached: true, body)
    }

    /// Starts a thread running `body` that someone waits for, with ``join()`` (or gives up
    /// waiting for, with ``detach()``): one of the two must follow, once.
    /// - Parameters:
    ///   - name: What debuggers and `top -H` show (Linux keeps the first 15 bytes).
    ///   - stackSize: Bytes of stack; `nil` for the system's default.
    /// - Throws: ``SystemError`` (`pthread_create`); `body` then never runs.
    public static func joinable(
        name: String? = nil, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) throws(SystemError) -> SystemThread {
        try start(name: name, stackSize: stackSize, detached: false, body)
    }

    /// Waits until the thread's body returned. Never call it on the thread itself.
    public func join() {
        pthread_join(handle, nil)
    }

    /// Lets the thread end on its own, its resources going back to the system then.
    public func detach() {
        pthread_detach(handle)
    }

    private static func start(
        name: String?, stackSize: Int?, detached: Bool, _ body: @escaping @Sendable () -> Void
    ) throws(SystemError) -> SystemThread {
        // Raw memory that pthread_attr_init fills (the zero initializer of the imported type is
        // not visible here on Linux without importing Dispatch's C module).
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        defer { attributes.deallocate() }
        let initialized = pthread_attr_init(attributes)
        guard initialized == 0 else { throw SystemError("pthread_attr_init", code: initialized) }
        defer { pthread_attr_destroy(attributes) }
        if detached { _ = pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        if let stackSize { _ = pthread_attr_setstacksize(attributes, stackSize) }
        let context = Unmanaged.passRetained(ThreadBody(name: name, body)).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        let created = pthread_create(
            &thread, attributes,
            { raw in
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        #else
        var thread = pthread_t()
        let created = pthread_create(
            &thread, attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        #endif
        guard created == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            throw SystemError("pthread_create", code: created)
        }
        #if canImport(Darwin)
        guard let thread else { throw SystemError("pthread_create", code: EAGAIN) }
        #endif
        return SystemThread(thread)
    }
}

/// The closure a new thread runs, boxed to pass through `pthread_create`'s context pointer.
private final class ThreadBody {
    let name: String?
    let body: @Sendable () -> Void

    init(name: String?, _ body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }

    func run() {
        if let name {
            #if canImport(Darwin)
            _ = pthread_setname_np(name)
            #else
            // Linux keeps 15 bytes and refuses a longer name whole; pthread_setname_np is not in
            // Swift's Glibc module, so the name goes where it writes it.
            let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if fd >= 0 {
                let bytes = Array(name.utf8.prefix(15))
                _ = write(fd, bytes, bytes.count)
                close(fd)
            }
            #endif
        }
        body()
    }
}
