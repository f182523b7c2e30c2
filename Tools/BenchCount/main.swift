// bench-count: one hot operation, a fixed number of times, for `scripts/bench-check`, which
// runs it under callgrind and compares the instructions of the measured region with
// reference counts.
//
//   bench-count <operation> <iterations>
//   operations: memory-hit, disk-hit, proxy-hit, lookup
//
// Setup and warm-up run first; then callgrind's instrumentation starts and the operation runs
// `iterations` times inside `countedRegion` (the others) or the proxy's request handler
// (proxy-hit), the only places collection is switched on. Run natively it does the same work
// and counts nothing.
//
// The main is synchronous on purpose. An async main on Linux parks the main thread in
// libdispatch's `_dispatch_sigsuspend`, which calls `sigsuspend` on a `static const` (read-only)
// mask; valgrind 3.19 (Debian 12) deletes its own signal from that mask in place before the
// syscall and dies with SIGSEGV ("the 'impossible' happened"), whichever tool runs. The one
// async operation (`HTTPCache.data(for:)`) runs in a detached task the main thread waits for.

import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let operation = Operation(rawValue: arguments[0]), let iterations = Int(arguments[1]),
    iterations > 0
else {
    let names = Operation.allCases.map(\.rawValue).joined(separator: ", ")
    FileHandle.standardError.write(
        Data("usage: bench-count <operation> <iterations>\n  operations: \(names)\n".utf8))
    exit(2)
}
do {
    try operation.run(iterations: iterations)
} catch {
    FileHandle.standardError.write(Data("bench-count: \(operation.rawValue) failed: \(error)\n".utf8))
    exit(1)
}
let counted = Callgrind.isRunning ? "counted by callgrind" : "not under valgrind: nothing counted"
print("bench-count: \(operation.rawValue) x \(iterations) (\(counted))")
