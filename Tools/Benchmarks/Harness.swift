import CacheTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps a value alive so the optimizer cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// The figures of one benchmark.
struct Measurement {
    var name: String
    var medianNanoseconds: Double
    var p99Nanoseconds: Double
    var iterations: Int

    var line: String {
        let padded = name.padding(toLength: 58, withPad: " ", startingAt: 0)
        return "\(padded) median \(format(medianNanoseconds)) ns/op   p99 \(format(p99Nanoseconds)) ns/op"
    }

    private func format(_ value: Double) -> String {
        let text = value < 100 ? String(Double(Int(value * 10)) / 10) : String(Int(value.rounded()))
        return String(repeating: " ", count: max(0, 8 - text.count)) + text
    }
}

/// Times `body` in `samples` batches of `batch` calls after a warm-up, and reports the
/// median and 99th percentile of the per-call time across batches.
func measure(_ name: String, samples: Int = 101, batch: Int = 2_000, _ body: () -> Void) -> Measurement {
    // BENCHMARK_FILTER=text runs only the benchmarks whose name contains it (for profiling).
    if let filter = ProcessInfo.processInfo.environment["BENCHMARK_FILTER"], !name.contains(filter) {
        return Measurement(name: name + " (skipped)", medianNanoseconds: 0, p99Nanoseconds: 0, iterations: 0)
    }
    for _ in 0..<batch { body() }
    let clock = ContinuousClock()
    var perCall: [Double] = []
    perCall.reserveCapacity(samples)
    for _ in 0..<samples {
        let start = clock.now
        for _ in 0..<batch { body() }
        let elapsed = start.duration(to: clock.now)
        let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        perCall.append(nanoseconds / Double(batch))
    }
    perCall.sort()
    let p99 = perCall[min(perCall.count - 1, Int(Double(perCall.count) * 0.99))]
    return Measurement(
        name: name, medianNanoseconds: perCall[perCall.count / 2], p99Nanoseconds: p99, iterations: samples * batch)
}

/// Peak resident set size of this process, in MiB: on Linux its own high-water mark (`VmHWM`),
/// since `ru_maxrss` keeps the parent's peak across `exec` in a child such as the storage
/// suite's opens.
func peakResidentMiB() -> Double {
    if let kib = MeasuredRun.peakResidentKiB(of: getpid()) { return Double(kib) / 1024 }
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    #if canImport(Darwin)
    return Double(usage.ru_maxrss) / 1_048_576  // bytes on Darwin
    #else
    return Double(usage.ru_maxrss) / 1024  // KiB on Linux
    #endif
}
