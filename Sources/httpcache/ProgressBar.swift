/// A progress bar on standard error for large downloads, drawn only when standard error is a
/// terminal and at most ten times a second.
struct ProgressBar {
    /// Bodies smaller than this (or of unknown length until this much has arrived) get no bar.
    static let threshold: Int64 = 1 << 20

    private var total: Int64?
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var received: Int64 = 0
    /// Bytes that were already there when this run started (a resumed download).
    private var resumedFrom: Int64 = 0
    /// The rate the caller measured (``update(received:total:bytesPerSecond:)``); else the
    /// average since the start is shown.
    private var rate: Double?
    private var lastDrawn: ContinuousClock.Instant?
    private var drawn = false
    private let enabled: Bool

    /// A bar for a body of `total` bytes (`nil`: unknown), shown when `enabled`.
    init(total: Int64?, enabled: Bool) {
        self.total = total
        self.enabled = enabled
        started = clock.now
    }

    /// Counts `count` more bytes and redraws when due.
    mutating func advance(by count: Int) {
        received += Int64(count)
        redraw()
    }

    /// Sets the bytes so far, the total when known and the current rate (for a download that
    /// resumes or starts over, whose count is not a running sum), and redraws when due.
    mutating func update(received: Int64, total: Int64?, bytesPerSecond: Double) {
        if !drawn, lastDrawn == nil, self.received == 0 { resumedFrom = received }
        if received < resumedFrom { resumedFrom = 0 }  // started over
        self.received = received
        self.total = total
        rate = bytesPerSecond
        redraw()
    }

    private mutating func redraw() {
        guard enabled, (total ?? received) >= Self.threshold else { return }
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

    /// `[#########           ]  45%  4.5 MiB of 10 MiB  12 MiB/s`, with `(resumed at 2.0 MiB)`
    /// after a resumption.
    func line(at now: ContinuousClock.Instant) -> String {
        let elapsed = now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let perSecond = rate ?? (seconds > 0 ? Double(received - resumedFrom) / seconds : 0)
        let rateText = perSecond > 0 ? Format.bytes(Int64(perSecond)) + "/s" : ""
        let resumed = resumedFrom > 0 ? "  (resumed at \(Format.bytes(resumedFrom)))" : ""
        guard let total, total > 0 else { return "\(Format.bytes(received))  \(rateText)\(resumed)" }
        let fraction = min(1, Double(received) / Double(total))
        let width = 30
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        let percent = String(Int(fraction * 100)) + "%"
        return "[\(bar)] \(percent)  \(Format.bytes(received)) of \(Format.bytes(total))  \(rateText)\(resumed)"
    }
}
