// The `httpcache` command-line tool: fetch through the cache, explain its decisions, inspect
// and manage what is stored, and a self-contained demo. See `httpcache --help`.
//
// The main is synchronous on purpose. A short command runs in a task whose jobs the main thread
// runs itself (MainThreadExecutor): no thread hands it work and none waits for it. The others
// (servers, several transfers at once) run in a task on the global pool that the main thread
// waits for. An async main on Linux would park the main thread inside libdispatch's
// `dispatch_main`, half-way through `pthread_exit`, where glibc's `setuid` no longer reaches it:
// after `serve --user` gave up root, that thread (the one /proc/PID/status and `ps` show) would
// still be root's.
import CacheStorage
import CacheSystem
import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

Console.ignoreBrokenPipes()
// The process's SQLite is the cache's alone: its allocations need not count themselves.
DiskStore.stopSQLiteMemoryStatistics()
let arguments = Array(CommandLine.arguments.dropFirst())
if Commands.runsOnMainThread(arguments) {
    exit(MainThreadExecutor.run { await Commands.run(arguments) }.rawValue)
}
let finished = DispatchSemaphore(value: 0)
let status = Locked(ExitCode.success)
Task.detached {
    let code = await Commands.run(arguments)
    status.withLock { $0 = code }
    finished.signal()
}
finished.wait()
exit(status.withLock { $0 }.rawValue)
