import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

@Suite("DiskStore: an index row written by another hand")
struct DamagedIndexTests {
    @Test(
        "an entry whose id was changed to a path (../../file) is removed without unlinking that file: the index names body files, never paths",
        arguments: ["removeAll", "remove(primaryKey:)"])
    func idThatIsAPathUnlinksNothingOutside(removal: String) throws {
        let directory = TemporaryDirectory()
        let victim = TemporaryDirectory()
        let victimFile = victim.path + "/important.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victimFile))
        let url = "http://origin.test/big"
        // Larger than the inline limit: the body is a file of `bodies/`, named by the entry's id.
        let body = Fixtures.bytes(count: 256 << 10) { UInt8(truncatingIfNeeded: $0) }
        let entry = try InlineBodyRowTests.stored(directory, url, body)
        let traversal = String(repeating: "../", count: 12) + victimFile.dropFirst()
        for table in ["entries", "access"] {
            try InlineBodyRowTests.edit(
                directory, "UPDATE \(table) SET id = '\(traversal)' WHERE id = '\(entry.id.rawValue)'")
        }
        let store = try DiskStore(InlineBodyRowTests.configuration(directory))
        switch removal {
        case "removeAll": try store.removeAll()
        default: _ = try store.remove(primaryKey: entry.head.primaryKey)
        }
        #expect(FileManager.default.fileExists(atPath: victimFile), "the index unlinked a file outside the store")
        #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
    }
}
