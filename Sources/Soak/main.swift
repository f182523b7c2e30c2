// The soak: `httpcache serve` in front of an origin whose resources change versions and that
// now and then gets its framing wrong, under mixed traffic for minutes. Every body a client
// receives is compared byte for byte with the version its ETag names. It fails on one
// mismatch, one stall, or proxy memory above the bound. Run by `scripts/soak`.
// `soak memory-bound` measures the proxy's memory under distinct URLs instead
// (MemoryBound.swift, run by `scripts/memory-bound`).
#if os(Linux)
import CacheLocking
import Foundation
import Glibc

if CommandLine.arguments.dropFirst().first == "memory-bound" {
    exit(memoryBound(Array(CommandLine.arguments.dropFirst(2))))
}

let usage = """
    Usage: soak [--seconds N] [--clients N] [--urls N] [--big-mb N] [--misbehave RATE]
                [--memory BYTES] [--max-rss-mb N] [--httpcache PATH]

      --seconds N       how long to run (default 600)
      --clients N       client threads for the small resources (default 16); two more fetch the big ones
      --urls N          resources on the origin (default 200; /r/99, /r/199… are the big ones)
      --big-mb N        size of the big resources in MiB (default 100)
      --misbehave RATE  share of small responses the origin frames wrongly (default 0.01)
      --memory BYTES    the proxy's memory tier (default 64M)
      --max-rss-mb N    fail when the proxy's resident memory goes above this (default 1024)
      --httpcache PATH  the httpcache to run (default: the one next to this executable)
    """

/// `--name value` pairs from the command line, taken out as they are read.
nonisolated(unsafe) var options: [String: String] = {
    var options: [String: String] = [:]
    var arguments = CommandLine.arguments.dropFirst()
    while let name = arguments.popFirst() {
        if name == "--help" || name == "-h" {
            print(usage)
            exit(0)
        }
        guard name.hasPrefix("--"), let value = arguments.popFirst() else {
            FileHandle.standardError.write(Data("soak: \(name) needs a value\n\(usage)\n".utf8))
            exit(2)
        }
        options[String(name.dropFirst(2))] = value
    }
    return options
}()
@MainActor
func option<Value>(_ name: String, _ fallback: Value, _ parse: (String) -> Value?) -> Value {
    guard let text = options.removeValue(forKey: name) else { return fallback }
    guard let value = parse(text) else {
        FileHandle.standardError.write(Data("soak: --\(name) \(text) is not valid\n\(usage)\n".utf8))
        exit(2)
    }
    return value
}
let seconds = option("seconds", 600.0, Double.init)
let clients = option("clients", 16, Int.init)
let urls = option("urls", 200, Int.init)
let bigSize = option("big-mb", Int64(100), Int64.init) << 20
let misbehave = option("misbehave", 0.01, Double.init)
let memory = option("memory", "64M", { $0 })
let maxRSS = option("max-rss-mb", Int64(1024), Int64.init) << 20
let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
let httpcache = option("httpcache", here + "/httpcache", { $0 })
if let unknown = options.keys.first {
    FileHandle.standardError.write(Data("soak: unknown option --\(unknown)\n\(usage)\n".utf8))
    exit(2)
}

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
func megabytes(_ bytes: Int64?) -> String { bytes.map { "\($0 >> 20) MiB" } ?? "?" }

/// Runs the soak and prints its figures; whether it was clean.
func soak(directory: String) throws -> Bool {
    let origin = try SoakOrigin(urls: urls, bigSize: bigSize, misbehaviourRate: misbehave)
    let proxy = try ProxyProcess(
        executable: httpcache,
        arguments: ["--origin", "http://127.0.0.1:\(origin.port)", "--cache-dir", directory, "--memory", memory])
    defer {
        proxy.stop()
        origin.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
    say(
        "soak: \(Int(seconds)) s, \(clients)+2 clients, \(urls) resources (big ones \(megabytes(bigSize))), "
            + "\(misbehave * 100)% of small responses framed wrongly; proxy pid \(proxy.process.processIdentifier) "
            + "on port \(proxy.port), memory tier \(memory)")

    let deadline = Locked<Int>.monotonicSeconds() + seconds
    let running = Locked(true)
    Thread.detachNewThread {
        // About 20 version changes a second: each resource changes every 10 s or so.
        while running.withLock({ $0 }) {
            origin.changeOneVersion()
            usleep(50_000)
        }
    }
    let workers = (0..<clients + 2).map { SoakWorker(origin: origin, proxyPort: proxy.port, big: $0 >= clients) }
    let finished = Locked(0)
    for worker in workers {
        Thread.detachNewThread {
            worker.run(until: deadline)
            finished.withLock { $0 += 1 }
            finished.wakeWaiters()
        }
    }

    var peakRSS: Int64 = 0
    var firstMinutePeak: Int64 = 0
    var lastMinutePeak: Int64 = 0
    let started = Locked<Int>.monotonicSeconds()
    var nextReport = started + 60
    var previous = Tally()
    while finished.withLock(when: { $0 == workers.count }, deadline: Locked<Int>.monotonicSeconds() + 1, { _ in true })
        == nil
    {
        let now = Locked<Int>.monotonicSeconds()
        let rss = proxy.memory("VmRSS") ?? 0
        peakRSS = max(peakRSS, rss)
        if now - started < 60 { firstMinutePeak = max(firstMinutePeak, rss) }
        if deadline - now < 60 { lastMinutePeak = max(lastMinutePeak, rss) }
        if now >= nextReport {
            var tally = Tally()
            workers.forEach { worker in tally.add(worker.published.withLock { $0 }) }
            say(
                "  \(Int(now - started)) s: \((tally.requests - previous.requests) / 60) req/s, "
                    + "\(tally.mismatches) mismatches, \(tally.stalls) stalls, proxy RSS \(megabytes(rss)) "
                    + "(peak \(megabytes(peakRSS)))")
            previous = tally
            nextReport += 60
        }
        if !proxy.process.isRunning { throw SoakFailure("httpcache serve exited during the soak") }
    }
    running.withLock { $0 = false }
    let elapsed = Locked<Int>.monotonicSeconds() - started

    var tally = Tally()
    workers.forEach { tally.add($0.tally) }
    let served = origin.counted
    let hwm = proxy.memory("VmHWM")
    say(
        """

        \(tally.requests) requests in \(Int(elapsed)) s (\(Int(Double(tally.requests) / elapsed)) req/s), \
        \(megabytes(tally.verifiedBytes)) of bodies compared byte for byte
          hits \(tally.hits), revalidated \(tally.revalidated), forwarded \(tally.forwarded); \
        304 to conditional requests \(tally.notModified), ranges \(tally.partial), HEAD \(tally.heads), \
        purges \(tally.purges), big bodies \(tally.bigBodies)
          origin: \(served.requests) requests, \(served.notModified) answered 304, \
        \(megabytes(served.bodyBytes)) of bodies sent
          origin framed wrongly on purpose: \(served.misbehaviours.values.reduce(0, +)) \
        (\(served.misbehaviours.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", ")))
          the clients saw: 502/503/504 \(tally.gatewayErrors), connections cut before the end \(tally.visibleCuts)
          mismatches (another URL's bytes, another version's bytes, or a cut body that looked complete): \(tally.mismatches)
          stalls (60 s without a byte): \(tally.stalls); malformed responses: \(tally.malformed); \
        unexpected statuses: \(tally.unexpectedStatus)
          proxy memory: peak \(megabytes(max(peakRSS, hwm ?? 0))) (limit \(megabytes(maxRSS))), \
        peak in the first minute \(megabytes(firstMinutePeak)), in the last minute \(megabytes(lastMinutePeak))
        """)
    for problem in tally.problems { say("  - \(problem)") }
    let failed =
        tally.mismatches > 0 || tally.stalls > 0 || tally.malformed > 0 || tally.unexpectedStatus > 0
        || max(peakRSS, hwm ?? 0) > maxRSS
    say(failed ? "soak: FAILED" : "soak: clean")
    return !failed
}

ProxyProcess.stopOnInterrupt()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("httpcache-soak-\(getpid())").path
do {
    exit(try soak(directory: directory) ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("soak: \(error)\n".utf8))
    exit(1)
}
#else
print("soak: runs `httpcache serve`, which is built on Linux only")
#endif
