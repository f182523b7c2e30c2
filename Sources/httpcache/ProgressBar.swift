/// A progress bar on standard error for large downloads, drawn only when standard error is a
/// terminal and at most ten times a second.
struct ProgressBar {
    /// Bodies smaller than this (or of unknown length until this much has arrived) get no bar.
    static let threshold: Int64 = 1 << 20

    private let total: Int64?
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var received: Int64 = 0
    private var lastDrawn: ContinuousClock.Instant?
    private var drawn = false
    private let enabled: Bool

    /// A bar for a body of `total` bytes (`nil`: unknown), shown when `enabled`.
    init(total: Int64?, enabled: Bool) {
        self.total = total
        self.enabled = enabled && (total.map { $0 >= Self.threshold } ?? true)
        started = clock.now
    }

    /// Counts `count` more bytes and redraws when due.
    mutating func advance(by count: Int) {
        received += Int64(count)
        guard enabled, total != nil || received >= Self.threshold else { return }
        let now = clock.now
        if let lastDrawn, now - lastDrawn < .milliseconds(100) { return }
        lastDrawn = now
        drawn = true
        Console.error("\r" + line(at: now) + "\u{1B}[K")
    }

    /// Clears the bar.
    mutating func finish() {
        guard drawn else { return }
        Console.error("\r\u{1B}[K")
        drawn = false
    }

    /// `[#########           ]  45%  4.5 MiB of 10 MiB  12 MiB/s`.
    func line(at now: ContinuousClock.Instant) -> String {
        let elapsed = now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Format.bytes(Int64(Double(received) / seconds)) + "/s" : ""
        guard let total, total > 0 else { return "\(Format.bytes(received))  \(rate)" }
        let fraction = min(1, Double(received) / Double(total))
        let width = 30
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        let percent = String(Int(fraction * 100)) + "%"
        return "[\(bar)] \(percent)  \(Format.bytes(received)) of \(Format.bytes(total))  \(rate)"
    }
}
