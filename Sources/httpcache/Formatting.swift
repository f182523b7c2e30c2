import CacheSemantics
import Foundation

/// How the tool writes sizes, durations and times for people.
enum Format {
    /// `512 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`.
    static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: value < 10 ? "%.1f" : "%.0f", value) + " " + units[unit]
    }

    /// A span of seconds, whole and readable: `0 s`, `59 s`, `5 min`, `2 h 3 min`, `3 d 4 h`.
    static func seconds(_ value: Double) -> String {
        let total = Int(value.rounded(.down))
        if total < 120 { return "\(max(0, total)) s" }
        let minutes = total / 60
        if minutes < 120 { return "\(minutes) min" }
        let hours = minutes / 60
        if hours < 48 { return minutes % 60 == 0 ? "\(hours) h" : "\(hours) h \(minutes % 60) min" }
        let days = hours / 24
        return hours % 24 == 0 ? "\(days) d" : "\(days) d \(hours % 24) h"
    }

    /// An elapsed time with a unit that suits it: `85 µs`, `3.1 ms`, `1.25 s`.
    static func elapsed(_ duration: Duration) -> String {
        let micros = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
        if micros < 1000 { return "\(Int(micros.rounded())) µs" }
        if micros < 1_000_000 { return String(format: "%.1f ms", micros / 1000) }
        return String(format: "%.2f s", micros / 1e6)
    }

    /// Microseconds in `duration`, rounded.
    static func microseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    }

    /// A time in seconds since 1970 as ISO 8601 in UTC, e.g. `2025-05-01T12:00:00Z`.
    static func timestamp(_ secondsSince1970: Double) -> String {
        HTTPDate.iso8601(Timestamp(secondsSince1970: secondsSince1970))
    }

    /// `count` and the noun, singular or plural: `1 entry`, `2 entries`.
    static func count(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
    }

    /// A percentage with one decimal: `66.7%`.
    static func percent(_ ratio: Double) -> String { String(format: "%.1f%%", ratio * 100) }

    /// Rows of columns padded to line up; the last column is not padded.
    static func table(_ rows: [[String]]) -> String {
        guard let columns = rows.map(\.count).max() else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (index, cell) in row.enumerated() where index < columns - 1 {
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
