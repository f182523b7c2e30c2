import CacheSemantics
import Testing

@Suite("RFC 9110 §8.8.3 entity tags")
struct EntityTagTests {
    @Test("RFC 9110 §8.8.3: a strong entity tag is parsed")
    func strongTag() throws {
        let tag = try #require(EntityTag(#""xyzzy""#))
        #expect(!tag.isWeak)
        #expect(tag.opaqueTag == "xyzzy")
        #expect(tag.description == #""xyzzy""#)
    }

    @Test("RFC 9110 §8.8.3: a weak entity tag is parsed")
    func weakTag() throws {
        let tag = try #require(EntityTag(#"W/"xyzzy""#))
        #expect(tag.isWeak)
        #expect(tag.opaqueTag == "xyzzy")
        #expect(tag.description == #"W/"xyzzy""#)
    }

    @Test("RFC 9110 §8.8.3: the empty opaque-tag and surrounding white space are accepted")
    func emptyAndWhitespace() {
        #expect(EntityTag(#""""#) == EntityTag(opaqueTag: ""))
        #expect(EntityTag(#"W/"""#) == EntityTag(opaqueTag: "", isWeak: true))
        #expect(EntityTag(" \t\"a\" ") == EntityTag(opaqueTag: "a"))
    }

    @Test("RFC 9110 §8.8.3: etagc allows ! and %x23-7E and obs-text")
    func etagcCharacters() {
        #expect(
            EntityTag(#""!#$%&'()*+,-./09:;<=>?@AZ[\]^_`az{|}~""#)?.opaqueTag
                == #"!#$%&'()*+,-./09:;<=>?@AZ[\]^_`az{|}~"#)
        #expect(EntityTag("\"caf\u{E9}\"")?.opaqueTag == "caf\u{E9}")
        // A backslash is an ordinary etagc, not an escape.
        #expect(EntityTag(#""\""#)?.opaqueTag == "\\")
    }

    @Test(
        "RFC 9110 §8.8.3: invalid entity tags are rejected",
        arguments: [
            "", " ", "\"", "W/", "W/\"", "xyzzy", "W/xyzzy", "\"xyzzy", "xyzzy\"", "W/\"xyzzy", #""xy"zzy""#,
            #""a" "b""#, "w/\"xyzzy\"", "W \"x\"", "W//\"x\"", "\"x y\"", "\"x\ty\"", "\"\u{7F}\"", "\"\u{0}\"",
            "\\", "\"\\", "*", "W/*",
        ])
    func invalidTags(text: String) {
        #expect(EntityTag(text) == nil)
    }

    @Test(
        "RFC 9110 §8.8.3.2: the comparison table (Table 3) for strong and weak comparison",
        arguments: [
            (#"W/"1""#, #"W/"1""#, false, true),
            (#"W/"1""#, #"W/"2""#, false, false),
            (#"W/"1""#, #""1""#, false, true),
            (#""1""#, #""1""#, true, true),
        ])
    func comparisonTable(first: String, second: String, strong: Bool, weak: Bool) throws {
        let a = try #require(EntityTag(first))
        let b = try #require(EntityTag(second))
        #expect(a.strongMatches(b) == strong)
        #expect(b.strongMatches(a) == strong)
        #expect(a.weakMatches(b) == weak)
        #expect(b.weakMatches(a) == weak)
    }

    @Test("RFC 9110 §8.8.3.2: opaque-tags are compared octet by octet and case-sensitively")
    func octetComparison() throws {
        let upper = try #require(EntityTag(#""ABC""#))
        let lower = try #require(EntityTag(#""abc""#))
        #expect(!upper.strongMatches(lower))
        #expect(!upper.weakMatches(lower))
        // U+00E9 and "e" + U+0301 are canonically equivalent strings but different octets.
        let precomposed = try #require(EntityTag("\"\u{E9}\""))
        let decomposed = try #require(EntityTag("\"e\u{301}\""))
        #expect(!precomposed.strongMatches(decomposed))
        #expect(!precomposed.weakMatches(decomposed))
        #expect(precomposed.strongMatches(precomposed))
    }
}

@Suite("RFC 9110 §13.1.1, §13.1.2 entity tag lists")
struct EntityTagListTests {
    @Test("RFC 9110 §13.1.2: * matches any current representation")
    func star() throws {
        let list = try #require(EntityTagList(fields: ["If-None-Match": "*"], name: "If-None-Match"))
        #expect(list == .any)
        #expect(list.fieldValue == "*")
        #expect(list.weakMatches(EntityTag(opaqueTag: "anything", isWeak: true)))
    }

    @Test("RFC 9110 §13.1.2: * among other members still means any")
    func starAmongTags() {
        #expect(EntityTagList(fields: ["If-None-Match": #""a", *"#], name: "If-None-Match") == .any)
    }

    @Test("RFC 9110 §8.8.3, §13.1.2: lists across lines keep order, and commas inside tags do not split")
    func listWithCommas() throws {
        let fields: HeaderFields = [
            HeaderField(name: "If-None-Match", value: #""a,b", W/"c,d""#),
            HeaderField(name: "if-none-match", value: #""e""#),
        ]
        let list = try #require(EntityTagList(fields: fields, name: "If-None-Match"))
        #expect(
            list
                == .tags([
                    EntityTag(opaqueTag: "a,b"), EntityTag(opaqueTag: "c,d", isWeak: true), EntityTag(opaqueTag: "e"),
                ]))
        #expect(list.fieldValue == #""a,b", W/"c,d", "e""#)
    }

    @Test("RFC 9110 §13.1.2: If-None-Match uses weak comparison")
    func weakMatching() throws {
        let list = try #require(EntityTagList(fields: ["If-None-Match": #"W/"1", "2""#], name: "If-None-Match"))
        #expect(list.weakMatches(EntityTag(opaqueTag: "1")))
        #expect(list.weakMatches(EntityTag(opaqueTag: "2", isWeak: true)))
        #expect(!list.weakMatches(EntityTag(opaqueTag: "3")))
    }

    @Test("RFC 9110 §13.1.2: invalid members are skipped; a list with none valid is nil")
    func invalidMembers() throws {
        let list = try #require(EntityTagList(fields: ["If-Match": #"bogus, "ok", W/x"#], name: "If-Match"))
        #expect(list == .tags([EntityTag(opaqueTag: "ok")]))
        #expect(EntityTagList(fields: ["If-Match": "bogus, W/x"], name: "If-Match") == nil)
    }

    @Test(
        "RFC 9110 §13.1.2: absent, empty and hostile list fields give nil",
        arguments: ["", ",", " , ", "\"", "\\", "\"a", "W/", "**", "é"])
    func hostileLists(value: String) {
        #expect(EntityTagList(fields: ["If-None-Match": value], name: "If-None-Match") == nil)
        #expect(EntityTagList(fields: [:], name: "If-None-Match") == nil)
    }
}
