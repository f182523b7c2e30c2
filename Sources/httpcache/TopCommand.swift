import Foundation

#if os(Linux)
import CachingProxy
import Glibc
import Synchronization
#endif

/// `httpcache top`: a running proxy's figures, live in the terminal (like varnishstat).
struct TopCommand {
    static let name = "top"
    static let summary = "a running proxy's figures, live in the terminal"
    static let specs: [OptionSpec] = [
        .value("--proxy"), .value("--interval"), .flag("--once"), .value("--admin-token"),
    ]
    static let help = """
        Usage: httpcache top [--proxy http://HOST:PORT] [--interval SEC] [--once]
                             [--admin-token TOKEN]

        Reads a running `httpcache serve`'s status (/_httpcache/status.json) and shows it,
        redrawn every SEC seconds: version and uptime, requests per second, hit ratio, bytes
        from the cache and from the origin, origin errors, hit and miss latency (p50/p99), the
        store's tiers, Redis when there is a shared tier, and the busiest URLs. Rates and
        latencies cover the last 10 seconds; counts are since the proxy started. q quits.

        Options:
          --proxy URL          the proxy (default http://127.0.0.1:8080)
          --interval SEC       seconds between redraws (default 2)
          --once               print one plain-text frame and exit (for scripts)
          --admin-token TOKEN  sent as Authorization: Bearer TOKEN (default
                               $HTTPCACHE_ADMIN_TOKEN); needed unless the proxy is on loopback
        """

    let proxy: String
    let interval: Double
    let once: Bool
    let token: String?

    init(_ arguments: ParsedArguments) throws(Failure) {
        _ = try arguments.positionals("nothing", minimum: 0, maximum: 0)
        proxy = arguments.value("--proxy") ?? "http://127.0.0.1:8080"
        let interval = arguments.value("--interval").map { Double($0) } ?? 2
        guard let interval, interval >= 0.1, interval <= 3600 else {
            throw .usage(Self.name, "--interval needs a number of seconds from 0.1 to 3600, e.g. --interval 2")
        }
        self.interval = interval
        once = arguments.has("--once")
        token = arguments.value("--admin-token") ?? ProcessInfo.processInfo.environment["HTTPCACHE_ADMIN_TOKEN"]
    }

    #if os(Linux)
    func run() throws(Failure) {
        let first = try fetch()
        guard !once else {
            Console.out(Self.frame(first, proxy: proxy, interval: nil).joined(separator: "\n") + "\n")
            return
        }
        let terminal = Terminal.enter()
        defer { terminal.leave() }
        var status = first
        var problem: String?
        while true {
            var lines = Self.frame(status, proxy: proxy, interval: interval)
            if let problem { lines.insert("\(Terminal.bold)! \(problem)\(Terminal.plain)", at: 1) }
            terminal.draw(lines)
            if terminal.waitForQuit(seconds: interval) { return }
            do {
                status = try fetch()
                problem = nil
            } catch {
                problem = error.message + " (retrying)"
            }
        }
    }

    private func fetch() throws(Failure) -> ProxyStatus {
        do {
            return try CachingProxy.status(proxy: proxy, token: token)
        } catch {
            throw Failure(.failure, "\(error)")
        }
    }

    /// One frame as lines; `interval` nil: plain text for `--once`, else with bold headings.
    static func frame(_ status: ProxyStatus, proxy: String, interval: Double?) -> [String] {
        let (bold, plain) = interval == nil ? ("", "") : (Terminal.bold, Terminal.plain)
        func f(_ value: Double?, _ format: StatusPage.Format) -> String { StatusPage.formatted(value, format) }
        func f(_ value: Int?, _ format: StatusPage.Format) -> String { f(value.map(Double.init), format) }
        func pad(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
        }
        func line(_ label: String, _ recent: String, _ total: String) -> String {
            pad("  " + label, 20) + pad(recent, 22) + total
        }
        let recent = status.recent
        let totals = status.totals
        let seconds = Double(recent.seconds)
        let last = status.history.seconds - recent.seconds..<status.history.seconds
        let hitsPerSecond = Double(last.reduce(0) { $0 + status.history.hits[$1] }) / seconds
        let missesPerSecond = Double(last.reduce(0) { $0 + status.history.misses[$1] }) / seconds
        var lines = [
            "\(bold)httpcache top\(plain)  \(proxy)  \(status.name) \(status.version)  up \(f(status.uptimeSeconds, .duration))  \(f(status.time, .time))",
            "",
            bold + pad("", 20) + pad("last \(recent.seconds) s", 22) + "since start" + plain,
            line("Requests", f(recent.requestsPerSecond, .rate) + "/s", f(totals.requests, .int)),
            line("Hits", f(hitsPerSecond, .rate) + "/s", f(totals.hits, .int)),
            line("Misses", f(missesPerSecond, .rate) + "/s", f(totals.misses, .int)),
            line("Hit ratio", f(recent.hitRatio, .pct), f(totals.hitRatio, .pct)),
            line("From cache", f(recent.bytesFromCachePerSecond, .byteRate), f(totals.bytesFromCache, .bytes)),
            line("From origin", f(recent.bytesFromOriginPerSecond, .byteRate), f(totals.bytesFromOrigin, .bytes)),
            line("Origin errors", f(recent.originErrorsPerSecond, .rate) + "/s", f(totals.originErrors, .int)),
            line(
                "Hit latency",
                "p50 \(f(recent.hitLatency.p50Microseconds, .micros))  p99 \(f(recent.hitLatency.p99Microseconds, .micros))",
                ""),
            line(
                "Miss latency",
                "p50 \(f(recent.missLatency.p50Microseconds, .micros))  p99 \(f(recent.missLatency.p99Microseconds, .micros))",
                ""),
            line("Connections", f(status.connectionsOpen, .int), ""),
            "",
            "\(bold)Store\(plain)  \(f(status.entries, .int)) entries",
        ]
        for tier in status.tiers {
            let fill = tier.capacityBytes.flatMap { $0 > 0 ? Double(tier.bodyBytes) / Double($0) : nil }
            let capacity = tier.capacityBytes.map { " of \(f(Double($0), .bytes)) (\(f(fill, .pct)))" } ?? ""
            lines.append(
                "  " + pad(tier.name, 12) + pad("\(tier.entries) entries", 16) + f(Double(tier.bodyBytes), .bytes)
                    + capacity)
        }
        lines.append(
            "\(bold)Origin\(plain)  error rate (5 min) \(f(status.origin.errorRate, .pct))"
                + (status.origin.lastError.map { "  last error at \(f(status.origin.lastErrorTime, .time)): \($0)" }
                    ?? "  no error"))
        if let redis = status.redis {
            lines.append(
                "\(bold)Redis\(plain)  \(redis.roundTrips) round trips, \(redis.errors) errors, \(redis.timeouts) timeouts, "
                    + "mean \(f(redis.meanRoundTripSeconds, .seconds)), slowest \(f(redis.slowestRoundTripSeconds, .seconds))"
            )
        }
        lines += ["", "\(bold)Busiest URLs\(plain) (recent; counts halve every minute)"]
        lines += status.busiest.map { pad(String($0.count), 10) + "  " + Self.printable($0.target) }
        if status.busiest.isEmpty { lines.append("  none yet") }
        if let interval { lines += ["", "q quits · every \(f(interval, .rate)) s"] }
        return lines
    }

    /// `text` with control characters (an attacker's escape sequences in a URL) shown as `?`.
    static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? "?" : $0 }))
    }
    #else
    func run() throws(Failure) {
        _ = (proxy, interval, once, token)
        throw Failure(.failure, "top needs Linux, as httpcache serve does; run it on the proxy's host")
    }
    #endif
}

#if os(Linux)
/// The terminal in `top`'s live mode: the alternate screen, no cursor, keys read one by one
/// without echo; restored on every way out (return, SIGINT, SIGTERM).
private struct Terminal {
    static let bold = "\u{1B}[1m"
    static let plain = "\u{1B}[0m"
    private static let enterScreen = "\u{1B}[?1049h\u{1B}[?25l"
    fileprivate static let leaveScreen = "\u{1B}[?25h\u{1B}[?1049l"

    static func enter() -> Terminal {
        if isatty(0) == 1 {
            var settings = termios()
            tcgetattr(0, &settings)
            savedSettings = settings
            settings.c_lflag &= ~tcflag_t(ICANON | ECHO)
            tcsetattr(0, TCSANOW, &settings)
        }
        _ = leaveScreenBytes.count  // made now, not in the signal handler
        _ = terminalWriter.load(ordering: .relaxed)
        signal(SIGINT, signalled)
        signal(SIGTERM, signalled)
        Console.out(enterScreen)
        return Terminal()
    }

    func leave() {
        Console.out(Self.leaveScreen)
        if var settings = savedSettings { tcsetattr(0, TCSANOW, &settings) }
    }

    func draw(_ lines: [String]) {
        // Home, then each line cleared to its end, then the rest of the screen.
        let frame = "\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J"
        let start = terminalWriter.compareExchange(
            expected: TerminalWriter.idle, desired: TerminalWriter.drawing, ordering: .acquiringAndReleasing)
        // Not idle: a signal handler has left the alternate screen and is ending the process.
        guard start.exchanged else { while true { pause() } }
        Console.out(frame)
        let end = terminalWriter.compareExchange(
            expected: TerminalWriter.drawing, desired: TerminalWriter.idle, ordering: .acquiringAndReleasing)
        // A signal came while the frame was written: leave now that it is whole.
        if !end.exchanged { restoreAndExit(Int32(end.original - TerminalWriter.signalled)) }
    }

    /// Waits up to `seconds` for a key; whether it was `q` (or standard input ended).
    func waitForQuit(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            var descriptor = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var byte: UInt8 = 0
            let count = read(0, &byte, 1)
            if count <= 0 { return true }
            if byte == UInt8(ascii: "q") || byte == UInt8(ascii: "Q") { return true }
        }
    }
}

/// The terminal's settings before `top` changed them (read by the signal handler).
nonisolated(unsafe) private var savedSettings: termios?
private let leaveScreenBytes = Array(Terminal.leaveScreen.utf8)

/// Who writes to the terminal. SIGINT and SIGTERM may come to any thread while another draws
/// a frame; a handler that left the alternate screen then would let the rest of the frame land
/// on the user's screen. So the handler leaves at once only when no frame is being written;
/// otherwise it marks the signal and the drawing thread leaves after its frame.
private enum TerminalWriter {
    static let idle = 0
    static let drawing = 1
    static let leaving = 2
    /// `signalled + n`: signal `n` came during a frame.
    static let signalled = 1000
}

private let terminalWriter = Atomic<Int>(TerminalWriter.idle)

private func signalled(_ signal: Int32) {
    // Only lock-free atomics here, and what restoreAndExit calls.
    while true {
        let leave = terminalWriter.compareExchange(
            expected: TerminalWriter.idle, desired: TerminalWriter.leaving, ordering: .acquiringAndReleasing)
        if leave.exchanged { restoreAndExit(signal) }
        let mark = terminalWriter.compareExchange(
            expected: TerminalWriter.drawing, desired: TerminalWriter.signalled + Int(signal),
            ordering: .acquiringAndReleasing)
        // Marked, or already leaving or marked by another signal: the process is ending.
        if mark.exchanged || mark.original != TerminalWriter.idle { return }
    }
}

private func restoreAndExit(_ signal: Int32) -> Never {
    // Only async-signal-safe calls: write, tcsetattr, _exit.
    _ = leaveScreenBytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    if var settings = savedSettings { tcsetattr(0, TCSANOW, &settings) }
    _exit(128 + signal)
}
#endif
