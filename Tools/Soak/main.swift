// The soak: `httpcache serve` in front of an origin whose resources change versions and that
// now and then gets its framing wrong, under mixed traffic for minutes. Every body a client
// receives is compared byte for byte with the version its ETag names. It fails on one
// mismatch, one stall, one proxy exit, or proxy memory above the bound. With --redis-cluster,
// several proxies share a Redis Cluster the soak starts and damages on purpose (masters
// killed, body chunks deleted). With --tls, the origin serves HTTPS and the proxies reach it
// over TLS. With --http2, the clients speak HTTP/2 to the proxies' TLS listener (ALPN h2),
// several requests at once on a connection's streams. Run by `scripts/soak`.
// `soak memory-bound` measures the proxy's memory under distinct URLs instead
// (MemoryBound.swift, run by `scripts/memory-bound`).
#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import Glibc

if CommandLine.arguments.dropFirst().first == "memory-bound" {
    exit(memoryBound(Array(CommandLine.arguments.dropFirst(2))))
}

let usage = """
    Usage: soak [--seconds N] [--clients N] [--urls N] [--big-mb N] [--misbehave RATE]
                [--memory BYTES] [--max-rss-mb N] [--httpcache PATH] [--tls] [--http2]
                [--redis-cluster [NODES] [--kill-every S] [--delete-chunks R] [--redis-timeout MS]]

      --seconds N       how long to run (default 600)
      --clients N       client threads for the small resources (default 16); two more fetch the big ones
      --urls N          resources on the origin (default 200; /r/99, /r/199… are the big ones)
      --big-mb N        size of the big resources in MiB (default 100; 16 with --redis-cluster)
      --misbehave RATE  share of small responses the origin frames wrongly (default 0.01)
      --memory BYTES    the proxy's memory tier (default 64M); with --redis-cluster, each node's
                        local tier (default 4M, so that most hits are read from Redis)
      --max-rss-mb N    fail when a proxy's resident memory goes above this (default 1024)
      --httpcache PATH  the httpcache to run (default: the one next to this executable)
      --tls             the origin serves HTTPS (a certificate for 127.0.0.1 from a CA made for
                        the run) and the proxies reach it with --origin https://127.0.0.1:PORT
                        --origin-cacert CA; its cuts and resets end without close_notify
      --http2           the clients speak HTTP/2 over TLS (ALPN h2) to the proxies, started with
                        --tls-cert/--tls-key (a certificate for localhost from the run's CA);
                        each small-resource client sends 1 to 4 requests at once on streams of
                        one connection. A stream the proxy resets with INTERNAL_ERROR or CANCEL
                        counts as a cut; any other reset, a response nghttp2 finds malformed, or
                        a GOAWAY with an error code fails the run

      --redis-cluster [NODES]
                        NODES proxies (default 3), the clients spread over them, sharing one
                        Redis Cluster of 3 masters and 3 replicas that the soak starts on
                        loopback (redis-server and redis-cli must be installed; 256 MB and
                        allkeys-lru each, so Redis evicts too), with chaos:
      --kill-every S    a master SIGKILLed every S seconds (default 60; 0: never); its replica
                        takes over, and it is started again 3 s later and rejoins as a replica
      --delete-chunks R body chunks deleted per second (default 2; 0: none), and every 5 s a
                        entry's record replaced by junk: entries that cannot be read
      --redis-timeout MS
                        the proxies' --redis-timeout (default 250: on a busy machine a read of
                        8 MiB often takes longer than httpcache's default of 50)
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
        if name == "--tls" || name == "--http2" {
            options[String(name.dropFirst(2))] = "yes"
            continue
        }
        // The one option whose value may be left out.
        if name == "--redis-cluster", arguments.first.map({ Int($0) == nil }) ?? true {
            options["redis-cluster"] = "3"
            continue
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
let clusterNodes = option("redis-cluster", 0, { Int($0).flatMap { $0 >= 1 && $0 <= 16 ? $0 : nil } })
let clustered = clusterNodes > 0
let tls = option("tls", false, { $0 == "yes" })
let http2 = option("http2", false, { $0 == "yes" })
if !clustered, let chaos = ["kill-every", "delete-chunks", "redis-timeout"].first(where: { options[$0] != nil }) {
    FileHandle.standardError.write(Data("soak: --\(chaos) goes with --redis-cluster\n\(usage)\n".utf8))
    exit(2)
}
let seconds = option("seconds", 600.0, Double.init)
let clients = option("clients", 16, Int.init)
let urls = option("urls", 200, Int.init)
let bigSize = option("big-mb", Int64(clustered ? 16 : 100), Int64.init) << 20
let misbehave = option("misbehave", 0.01, Double.init)
let memory = option("memory", clustered ? "4M" : "64M", { $0 })
let maxRSS = option("max-rss-mb", Int64(1024), Int64.init) << 20
let killEvery = option("kill-every", 60.0, { Double($0).flatMap { $0 >= 0 ? $0 : nil } })
let deletionsPerSecond = option("delete-chunks", 2.0, { Double($0).flatMap { $0 >= 0 ? $0 : nil } })
let redisTimeout = option("redis-timeout", 250, { Int($0).flatMap { $0 > 0 ? $0 : nil } })
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

/// The Redis key prefix of the proxies in --redis-cluster mode.
let redisPrefix = "soak:"

/// One proxy's memory over the run.
struct MemoryWatch {
    var peak: Int64 = 0
    var firstMinutePeak: Int64 = 0
    var lastMinutePeak: Int64 = 0
}

/// Runs the soak and prints its figures; whether it was clean. Each proxy's log is written to
/// `logs`.
func soak(directory: String, logs: String) throws -> Bool {
    let origin = try SoakOrigin(urls: urls, bigSize: bigSize, misbehaviourRate: misbehave, tls: tls)
    let cluster =
        clustered
        // No output buffer limit for replicas: a restarted server's full sync is not cut off
        // (and started again, and again) while the proxies write 16 MiB bodies; and it starts at
        // once (not 5 s later).
        ? try RedisCluster(arguments: [
            "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru", "--client-output-buffer-limit", "replica",
            "0", "0", "0", "--repl-diskless-sync-delay", "0", "--logfile", "redis.log", "--loglevel", "notice",
        ]) : nil
    var proxies: [ProxyProcess] = []
    var chaos: ClusterChaos?
    defer {
        chaos?.stop()
        proxies.forEach { $0.stop() }
        origin.stop()
        for server in cluster?.servers ?? [] {
            server.stop()
            try? FileManager.default.removeItem(atPath: server.directory.path)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
    let originURL = "\(tls ? "https" : "http")://127.0.0.1:\(origin.port)"
    // The CA of the origin's certificate, trusted by the proxies for it alone.
    let originArguments =
        ["--origin", originURL] + (tls ? ["--origin-cacert", try TestCertificates.shared().caFile] : [])
    let overTLS = (tls ? ", the origin over TLS" : "") + (http2 ? ", the clients over HTTP/2 (TLS, ALPN h2)" : "")
    // With --http2, every proxy also listens for TLS, and the clients speak HTTP/2 there.
    var listeners: [String] = []
    if http2 {
        let leaf = try TestCertificates.shared().localhost
        listeners = ["--tls-cert", leaf.certificateFile, "--tls-key", leaf.keyFile, "--tls-listen", "127.0.0.1:0"]
    }
    let clientTLS = http2 ? try HTTP2Client.TLSOptions.testCA() : nil
    if let cluster {
        for node in 1...clusterNodes {
            proxies.append(
                try ProxyProcess(
                    executable: httpcache,
                    arguments: originArguments + listeners + [
                        "--memory-only", "--redis-cluster", cluster.seeds, "--redis-prefix",
                        redisPrefix, "--redis-timeout", String(redisTimeout), "--local-memory", memory,
                        "--redis-required",
                    ], logPath: "\(logs)/node-\(node).log"))
        }
        say(
            "soak: \(Int(seconds)) s, \(clients)+2 clients over \(clusterNodes) proxies on a Redis Cluster of 3 masters "
                + "and 3 replicas (\(cluster.seeds)), \(urls) resources (big ones \(megabytes(bigSize))), "
                + "\(misbehave * 100)% of small responses framed wrongly; local tiers \(memory), Redis timeout "
                + "\(redisTimeout) ms; "
                + (killEvery > 0 ? "a master killed every \(Int(killEvery)) s, " : "no master killed, ")
                + "\(deletionsPerSecond) chunks deleted per second\(overTLS); proxy logs in \(logs)")
    } else {
        proxies.append(
            try ProxyProcess(
                executable: httpcache,
                arguments: originArguments + listeners + ["--cache-dir", directory, "--memory", memory],
                logPath: "\(logs)/proxy.log"))
        say(
            "soak: \(Int(seconds)) s, \(clients)+2 clients, \(urls) resources (big ones \(megabytes(bigSize))), "
                + "\(misbehave * 100)% of small responses framed wrongly; proxy pid \(proxies[0].process.processIdentifier) "
                + "on port \(proxies[0].tlsPort ?? proxies[0].port), memory tier \(memory)\(overTLS); its log in \(logs)"
        )
    }

    let deadline = MonotonicClock.seconds() + seconds
    let running = Locked(true)
    Thread.detachNewThread {
        // About 20 version changes a second: each resource changes every 10 s or so.
        while running.withLock({ $0 }) {
            origin.changeOneVersion()
            usleep(50_000)
        }
    }
    if let cluster {
        chaos = ClusterChaos(
            cluster: cluster, prefix: redisPrefix, killEvery: killEvery, deletionsPerSecond: deletionsPerSecond)
        chaos?.start(deadline: deadline)
    }
    // Worker i talks to proxy i mod N (the two big ones included).
    let workers = (0..<clients + 2).map {
        let proxy = proxies[$0 % proxies.count]
        return SoakWorker(
            origin: origin, proxyPort: http2 ? proxy.tlsPort ?? 0 : proxy.port, big: $0 >= clients, http2: clientTLS,
            running: running)
    }
    let finished = Locked(0)
    for worker in workers {
        Thread.detachNewThread {
            worker.run(until: deadline)
            finished.withLock { $0 += 1 }
            finished.wakeWaiters()
        }
    }

    var watches = [MemoryWatch](repeating: MemoryWatch(), count: proxies.count)
    var exited: (index: Int, proxy: ProxyProcess)?
    let started = MonotonicClock.seconds()
    var nextReport = started + 60
    var previous = Tally()
    while finished.withLock(when: { $0 == workers.count }, deadline: MonotonicClock.seconds() + 1, { _ in true })
        == nil
    {
        let now = MonotonicClock.seconds()
        var rss: [Int64] = []
        for (index, proxy) in proxies.enumerated() {
            let current = proxy.memory("VmRSS") ?? 0
            rss.append(current)
            watches[index].peak = max(watches[index].peak, current)
            if now - started < 60 { watches[index].firstMinutePeak = max(watches[index].firstMinutePeak, current) }
            if deadline - now < 60 { watches[index].lastMinutePeak = max(watches[index].lastMinutePeak, current) }
        }
        if now >= nextReport {
            var tally = Tally()
            workers.forEach { worker in tally.add(worker.published.withLock { $0 }) }
            let chaosNow = chaos.map { chaos in
                let counted = chaos.counted
                return ", \(counted.kills) kills, \(counted.chunksDeleted) chunks deleted"
            }
            say(
                "  \(Int(now - started)) s: \((tally.requests - previous.requests) / 60) req/s, "
                    + "\(tally.mismatches) mismatches, \(tally.stalls) stalls\(chaosNow ?? ""), proxy RSS "
                    + rss.map { megabytes($0) }.joined(separator: " / ") + " (peak "
                    + watches.map { megabytes($0.peak) }.joined(separator: " / ") + ")")
            previous = tally
            nextReport += 60
        }
        if let index = proxies.firstIndex(where: { !$0.process.isRunning }) {
            exited = (index, proxies[index])
            running.withLock { $0 = false }
            _ = finished.withLock(when: { $0 == workers.count }) { _ in true }
            break
        }
    }
    running.withLock { $0 = false }
    chaos?.stop()
    if exited == nil, let index = proxies.firstIndex(where: { !$0.process.isRunning }) {
        exited = (index, proxies[index])
    }
    let elapsed = MonotonicClock.seconds() - started

    var tally = Tally()
    workers.forEach { tally.add($0.tally) }
    let served = origin.counted
    for (index, proxy) in proxies.enumerated() {
        watches[index].peak = max(watches[index].peak, proxy.memory("VmHWM") ?? 0)
    }
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
          late strays sent on a quiet connection \(served.lateStraysSent); crossed by the proxy's next request on \
        that connection \(served.strayFollowUps.count) (limit a quarter), answers that were such a stray \(tally.strayRaces)
          the clients saw: 502/503/504 blamed on the origin \(tally.gatewayErrors), \
        \(http2 ? "streams reset (INTERNAL_ERROR, CANCEL) or cut" : "connections cut") before the end \(tally.visibleCuts)
          mismatches (another URL's bytes, another version's bytes, or a cut body that looked complete): \(tally.mismatches)
          stalls (60 s without a byte): \(tally.stalls); malformed responses: \(tally.malformed); \
        unexpected statuses: \(tally.unexpectedStatus); 502/503/504 not blamed on the origin: \(tally.storeErrors)
        """)
    if let race = tally.strayRace { say("  the first answer that was a crossed stray: \(race)") }
    // A proxy that looked at idle connections before reusing them loses only the rare race;
    // one that did not would send a request after most strays.
    let strayRacesTooMany = served.strayFollowUps.count >= 3 && served.strayFollowUps.count * 4 > served.lateStraysSent
    if tally.purgesRefused > 0 {
        say("  PURGEs refused because Redis did not answer: \(tally.purgesRefused) (\(tally.purgeRefusal ?? ""))")
    }
    if let cluster, let chaos {
        let counted = chaos.counted
        say(
            """
              chaos: \(counted.kills) masters SIGKILLed, \(counted.failovers) replicas took over, \
            \(counted.restarts) restarted, \(counted.rejoined) rejoined as replicas (longest kill to \
            cluster_state:ok \(String(format: "%.1f", counted.longestRecovery)) s); \(counted.chunksDeleted) body \
            chunks deleted, \(counted.recordsJunked) records replaced by junk
              Redis at the end: \(redisSummary(cluster))
            """)
        for problem in counted.problems { say("  - chaos: \(problem)") }
    }
    for (index, proxy) in proxies.enumerated() {
        let name = clustered ? "node \(index + 1)" : "proxy"
        let lines = proxy.logLines
        let unreadable = lines.filter { $0.contains("could not be read") }
        let timeouts = unreadable.count { $0.contains("did not answer in time") }
        let gone = unreadable.count {
            $0.contains("in Redis (removed") || $0.contains("gone from Redis") || $0.contains("has the wrong length")
        }
        // "could not be read (…); the request is …" before the head went out, "could not be
        // read: …" after, when all the proxy can do is cut the response.
        let midBody = unreadable.count { $0.contains("could not be read: ") }
        var figures = ""
        let metrics = proxy.process.isRunning && (clustered || http2) ? proxy.metrics() : [:]
        func count(_ name: String) -> String { metrics[name].map { String(Int($0)) } ?? "?" }
        if http2 {
            figures += "; HTTP/2 streams \(count("httpcache_http2_streams_total"))"
        }
        if clustered && proxy.process.isRunning {
            figures +=
                "; Redis round trips \(count("httpcache_redis_round_trips_total")), errors "
                + "\(count("httpcache_redis_errors_total")), timeouts \(count("httpcache_redis_timeouts_total")), "
                + "invalidations received \(count("httpcache_redis_invalidations_received_total"))"
        }
        say(
            "  \(name) (pid \(proxy.process.processIdentifier)): memory peak \(megabytes(watches[index].peak)) "
                + "(limit \(megabytes(maxRSS))), in the first minute \(megabytes(watches[index].firstMinutePeak)), "
                + "in the last \(megabytes(watches[index].lastMinutePeak)); \(lines.count) log lines, "
                + "\(unreadable.count) \"could not be read\""
                + (clustered
                    ? " (\(timeouts) Redis timeouts, \(gone) bodies gone or undecodable, "
                        + "\(unreadable.count - timeouts - gone) other; \(midBody) in the middle of a body, which was cut)"
                    : "") + figures)
    }
    for problem in tally.problems { say("  - \(problem)") }
    if let exited {
        let proxy = exited.proxy
        say(
            "\n\(clustered ? "node \(exited.index + 1)" : "the proxy") (pid \(proxy.process.processIdentifier)) exited "
                + "during the soak (\(proxy.exitDescription ?? "?")); the last lines of its log (\(proxy.logPath ?? "")):"
        )
        for line in proxy.logLines.suffix(20) { say("    \(line)") }
    }
    let failed =
        exited != nil || tally.mismatches > 0 || tally.stalls > 0 || tally.malformed > 0 || tally.unexpectedStatus > 0
        || tally.storeErrors > 0 || strayRacesTooMany || watches.contains { $0.peak > maxRSS }
        || !(chaos?.counted.problems.isEmpty ?? true)
    say(failed ? "soak: FAILED" : "soak: clean")
    return !failed
}

/// Keys, memory and evictions on each master.
func redisSummary(_ cluster: RedisCluster) -> String {
    cluster.servers.compactMap { server -> String? in
        func info(_ section: String, _ field: String) -> Substring? {
            let lines = (try? server.cli(["INFO", section]))?.split(whereSeparator: \.isNewline) ?? []
            return lines.first { $0.hasPrefix(field + ":") }?.dropFirst(field.count + 1)
        }
        guard info("replication", "role") == "master", let keys = try? server.command("DBSIZE") else { return nil }
        return "master \(server.port): \(keys.dropFirst()) keys, \(info("memory", "used_memory_human") ?? "?") used, "
            + "\(info("stats", "evicted_keys") ?? "?") keys evicted since it started"
    }.joined(separator: "; ")
}

ProxyProcess.stopOnInterrupt()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("httpcache-soak-\(getpid())").path
let logs = directory + "-logs"
do {
    try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
    exit(try soak(directory: directory, logs: logs) ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("soak: \(error) (logs in \(logs))\n".utf8))
    exit(1)
}
#else
print("soak: runs `httpcache serve`, which is built on Linux only")
#endif
