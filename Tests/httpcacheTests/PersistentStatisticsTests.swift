import Foundation
import HTTPCacheCore
import Testing

@testable import httpcache

/// The counts file `get` and `explain` add to and `stats` reads (`cli-stats.json`): what it
/// reads back, and what it refuses.
@Suite struct PersistentStatisticsTests {
    func counts() -> PersistentStatistics {
        var counts = PersistentStatistics(since: 1_796_361_315.25)
        counts.statistics.hits = 570
        counts.statistics.misses = 3
        counts.statistics.revalidated = 2
        counts.statistics.stale = 1
        counts.statistics.bypassed = 4
        counts.statistics.errors = 5
        counts.statistics.collapsed = 6
        counts.statistics.bytesServedFromCache = 583_680
        counts.statistics.bytesSavedByRevalidation = 2048
        counts.bytesFromOrigin = 3072
        return counts
    }

    func expectSame(_ read: PersistentStatistics?, _ written: PersistentStatistics) {
        #expect(read?.since == written.since)
        #expect(read?.statistics.hits == written.statistics.hits)
        #expect(read?.statistics.misses == written.statistics.misses)
        #expect(read?.statistics.revalidated == written.statistics.revalidated)
        #expect(read?.statistics.stale == written.statistics.stale)
        #expect(read?.statistics.bypassed == written.statistics.bypassed)
        #expect(read?.statistics.errors == written.statistics.errors)
        #expect(read?.statistics.collapsed == written.statistics.collapsed)
        #expect(read?.statistics.bytesServedFromCache == written.statistics.bytesServedFromCache)
        #expect(read?.statistics.bytesSavedByRevalidation == written.statistics.bytesSavedByRevalidation)
        #expect(read?.bytesFromOrigin == written.bytesFromOrigin)
    }

    @Test("What it writes reads back, every count")
    func roundTrip() {
        let written = counts()
        expectSame(PersistentStatistics(parsing: written.json.text), written)
        // The file is padded with spaces when it shrinks (a rewrite in place).
        expectSame(PersistentStatistics(parsing: written.json.text + "      \n"), written)
    }

    @Test("Spaced out as JSONEncoder's pretty printing writes it, in another order")
    func otherLayout() {
        let text = """
            {
              "bytesFromOrigin" : 3072,
              "since" : 1796361315.25,
              "statistics" : {
                "misses" : 3, "hits" : 570, "revalidated" : 2, "stale" : 1, "bypassed" : 4,
                "errors" : 5, "collapsed" : 6, "bytesServedFromCache" : 583680,
                "bytesSavedByRevalidation" : 2048
              },
              "version" : 1
            }
            """
        expectSame(PersistentStatistics(parsing: text), counts())
    }

    @Test("A missing count, another version, a number that is not one or a cut file is refused")
    func refused() {
        let text = counts().json.text
        func changed(_ from: String, _ to: String) -> PersistentStatistics? {
            #expect(text.contains(from))
            return PersistentStatistics(parsing: text.replacingOccurrences(of: from, with: to))
        }
        #expect(changed("\"hits\"", "\"hats\"") == nil)
        #expect(changed("\"version\":1", "\"version\":2") == nil)
        #expect(changed("\"misses\":3", "\"misses\":3.5") == nil)
        #expect(changed("\"errors\":5", "\"errors\":\"5\"") == nil)
        for length in [0, 1, text.utf8.count / 2, text.utf8.count - 10] {
            #expect(PersistentStatistics(parsing: String(text.utf8.prefix(length))!) == nil)
        }
        #expect(PersistentStatistics(parsing: "\"") == nil)
        #expect(PersistentStatistics(parsing: "\"version\":") == nil)
    }
}
