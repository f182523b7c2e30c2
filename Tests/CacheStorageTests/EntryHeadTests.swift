import CacheSemantics
import Testing

@testable import CacheStorage

// An entry's head keeps its values in one box that copies share (a copy is one retain), and
// a copy that changes takes a box of its own first: a value type to whoever holds one.
@Suite("EntryHead: copies share one box of values until one of them changes")
struct EntryHeadTests {
    private static func head() -> EntryHead {
        EntryHead(
            primaryKey: "https://a.example/x", url: "https://a.example/x", status: 200,
            fields: ["ETag": "\"1\"", "Cache-Control": "max-age=60"], facts: [1, 2, 3], tags: ["group"])
    }

    @Test("a changed copy leaves the head it was copied from as it was, whichever value changes")
    func changedCopyLeavesTheOriginal() {
        let original = Self.head()
        var copy = original
        #expect(copy == original)
        copy.fields.append(name: "Age", value: "5")
        copy.facts.append(4)
        copy.tags.append("other")
        copy.userInfo = [9]
        copy.primaryKey = "https://b.example/y"
        copy.variantKey = "gzip"
        copy.url = "https://b.example/y"
        copy.status = 203
        copy.storagePolicy = .memoryOnly
        copy.isComplete = false

        #expect(original == Self.head())
        #expect(original.fields == ["ETag": "\"1\"", "Cache-Control": "max-age=60"])
        #expect(original.facts == [1, 2, 3])
        #expect(original.tags == ["group"])
        #expect(original.userInfo == nil)
        #expect(original.primaryKey == "https://a.example/x" && original.variantKey.isEmpty)
        #expect(original.status == 200 && original.storagePolicy == .allowed && original.isComplete)

        #expect(copy.fields.values(named: "Age") == ["5"] && copy.fields.count == 3)
        #expect(copy.facts == [1, 2, 3, 4] && copy.tags == ["group", "other"] && copy.userInfo == [9])
        #expect(copy.primaryKey == "https://b.example/y" && copy.variantKey == "gzip" && copy.url == copy.primaryKey)
        #expect(copy.status == 203 && copy.storagePolicy == .memoryOnly && !copy.isComplete)
        #expect(copy != original)
    }

    @Test("heads of the same values in different boxes are equal and hash alike")
    func equalByValues() {
        let first = Self.head()
        let second = Self.head()
        var changedBack = first
        changedBack.status = 304
        changedBack.status = 200
        #expect(first == second && changedBack == first)
        #expect(first.hashValue == second.hashValue && changedBack.hashValue == first.hashValue)
        #expect(Set([first, second, changedBack]).count == 1)
        var other = first
        other.fields[.eTag] = "\"2\""
        #expect(other != first && Set([first, other]).count == 2)
    }
}

extension EntryHeadTests {
    @Test("printed, a head shows its values, not the box they are kept in")
    func printedWithItsValues() {
        let text = String(describing: Self.head())
        #expect(text.contains("primaryKey: \"https://a.example/x\"") && text.contains("status: 200"), "\(text)")
        #expect(!text.contains("Box"), "\(text)")
    }
}
