import CacheSemantics
import Testing

/// The dictionary as `(key, member)` pairs, compared through `StructuredMember`'s `==`.
private func entries(_ text: String) -> [(key: String, value: StructuredMember)]? {
    StructuredFields.parseDictionary(text)
}

private func item(_ item: StructuredItem, _ parameters: [(String, StructuredItem)] = []) -> StructuredMember {
    .item(item, parameters: parameters)
}

@Suite("RFC 9651 §4.2.2 Dictionary parsing")
struct StructuredDictionaryTests {
    @Test("RFC 9651 §3.2: the RFC's example dictionary with booleans and parameters")
    func rfcExampleBooleans() throws {
        let dictionary = try #require(entries("a=?0, b, c; foo=bar"))
        #expect(dictionary.map(\.key) == ["a", "b", "c"])
        #expect(dictionary[0].value == item(.boolean(false)))
        #expect(dictionary[1].value == item(.boolean(true)))
        #expect(dictionary[2].value == item(.boolean(true), [("foo", .token("bar"))]))
    }

    @Test("RFC 9651 §4.2.4: integers, including negative and 15-digit ones")
    func integers() throws {
        let dictionary = try #require(entries("a=1, b=-42, c=0, d=999999999999999, e=-999999999999999"))
        #expect(
            dictionary.map(\.value) == [
                item(.integer(1)), item(.integer(-42)), item(.integer(0)), item(.integer(999_999_999_999_999)),
                item(.integer(-999_999_999_999_999)),
            ])
    }

    @Test("RFC 9651 §4.2.4: decimals parse to the nearest binary value")
    func decimals() throws {
        let dictionary = try #require(entries("a=1.5, b=-0.25, c=0.009, d=123456789012.999, e=0.1"))
        var values: [Double] = []
        for (_, member) in dictionary {
            guard case .item(.decimal(let value), _) = member else {
                Issue.record("not a decimal: \(member)")
                continue
            }
            values.append(value)
        }
        #expect(values == [1.5, -0.25, 0.009, 123_456_789_012.999, 0.1])
    }

    @Test("RFC 9651 §4.2.5: strings with escaped quotes and backslashes")
    func strings() throws {
        let dictionary = try #require(entries(#"a="he said \"hi\"", b="back\\slash", c="", d=" sp ace ""#))
        #expect(
            dictionary.map(\.value) == [
                item(.string(#"he said "hi""#)), item(.string(#"back\slash"#)), item(.string("")),
                item(.string(" sp ace ")),
            ])
    }

    @Test("RFC 9651 §4.2.6: tokens may contain : and / after the first character")
    func tokens() throws {
        let dictionary = try #require(entries("a=foo, b=*x, c=text/html, d=a:b!#$%&'*+-.^_`|~"))
        #expect(
            dictionary.map(\.value) == [
                item(.token("foo")), item(.token("*x")), item(.token("text/html")), item(.token("a:b!#$%&'*+-.^_`|~")),
            ])
    }

    @Test("RFC 9651 §4.2.7: byte sequences keep their base64 text")
    func byteSequences() throws {
        let dictionary = try #require(entries("a=:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:, b=::"))
        #expect(
            dictionary.map(\.value) == [
                item(.byteSequence("cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==")), item(.byteSequence("")),
            ])
    }

    @Test("RFC 9651 §4.2.9, §4.2.10: dates and display strings")
    func datesAndDisplayStrings() throws {
        let dictionary = try #require(entries(#"a=@1659578233, b=%"f%c3%bc%c3%bc", c=@-1"#))
        #expect(
            dictionary.map(\.value) == [
                item(.date(1_659_578_233)), item(.displayString("füü")), item(.date(-1)),
            ])
    }

    @Test("RFC 9651 §4.2.3.2: parameters, with a repeated parameter keeping the last value")
    func parameters() throws {
        let dictionary = try #require(entries(#"a=1;x=2;y;z="s", b;q=1;q=2"#))
        #expect(
            dictionary[0].value == item(.integer(1), [("x", .integer(2)), ("y", .boolean(true)), ("z", .string("s"))]))
        #expect(dictionary[1].value == item(.boolean(true), [("q", .integer(2))]))
    }

    @Test("RFC 9651 §4.2.1.2: inner lists with item and list parameters, and the empty inner list")
    func innerLists() throws {
        let dictionary = try #require(entries("a=(1 2;p=3  foo);q=x, b=(), c=( \"s\" )"))
        #expect(
            dictionary[0].value
                == .innerList(
                    [(.integer(1), []), (.integer(2), [("p", .integer(3))]), (.token("foo"), [])],
                    parameters: [("q", .token("x"))]))
        #expect(dictionary[1].value == .innerList([], parameters: []))
        #expect(dictionary[2].value == .innerList([(.string("s"), [])], parameters: []))
    }

    @Test("RFC 9651 §4.2.2: a repeated key keeps the last value in its first position")
    func duplicateKeysKeepLast() throws {
        let dictionary = try #require(entries("a=1, b=2, a=3"))
        #expect(dictionary.map(\.key) == ["a", "b"])
        #expect(dictionary.map(\.value) == [item(.integer(3)), item(.integer(2))])
    }

    @Test("RFC 9651 §4.2: leading spaces, trailing spaces and tabs after commas are allowed")
    func whitespace() throws {
        let dictionary = try #require(entries("   a=1 ,\tb=2   "))
        #expect(dictionary.map(\.key) == ["a", "b"])
        #expect(dictionary.map(\.value) == [item(.integer(1)), item(.integer(2))])
    }

    @Test("RFC 9651 §4.2: an empty field is an empty dictionary")
    func emptyDictionary() throws {
        #expect(try #require(entries("")).isEmpty)
        #expect(try #require(entries("   ")).isEmpty)
    }

    @Test("RFC 9651 §4.2.3.3: keys may use lower case, digits, _ - . and *")
    func keyCharacters() throws {
        let dictionary = try #require(entries("a1_-.*=1, *b=2"))
        #expect(dictionary.map(\.key) == ["a1_-.*", "*b"])
    }

    @Test(
        "RFC 9651 §4.2: syntax errors fail the whole dictionary",
        arguments: [
            "a=1,", "a=1, ", "a=1,,b=2", ",a=1", ",", "A=1", "aB=1", "1a=1", "_a=1", "a=1 b=2", "a=1;", "a=1;B=2",
            "a=", "a=-", "a=1234567890123456", "a=-1234567890123456", "a=1.2345", "a=1.", "a=1234567890123.0",
            "a=-.5", "a=.5", "a=?", "a=?2", "a=?true", "a=@", "a=@1.5", "a=@x", "a=(1 2", "a=(1,2)", "a=(1  2)x",
            "a=((1))", "a=:abc", "a=:ab$c:", "a=\"", "a=\"unterminated", "a=\"\\", "a=\"\\x\"", "a=\"é\"",
            "a=\"tab\there\"", "a=é", "é=1", "a=%\"", "a=%\"%zz\"", "a=%\"%C3%BC\"", "a=%\"%ff\"", "a=%x",
            "\ta=1", "a=1\u{0}", "\\", "\"", "a=1;b=\"",
        ])
    func syntaxErrorsFail(text: String) {
        #expect(StructuredFields.parseDictionary(text) == nil)
    }

    @Test("RFC 9651 §4.2.4: a huge digit string fails without crashing")
    func hugeDigits() {
        let digits = String(repeating: "9", count: 10_000)
        #expect(StructuredFields.parseDictionary("a=\(digits)") == nil)
        #expect(StructuredFields.parseList("\(digits).5") == nil)
        #expect(StructuredFields.parseList("1.\(digits)") == nil)
    }
}

@Suite("RFC 9651 §4.2.1 List parsing")
struct StructuredListTests {
    @Test("RFC 9651 §3.1: the RFC's example list of tokens")
    func tokenList() throws {
        let list = try #require(StructuredFields.parseList("sugar, tea, rum"))
        #expect(list == [item(.token("sugar")), item(.token("tea")), item(.token("rum"))])
    }

    @Test("RFC 9651 §3.1.1: the RFC's example list of inner lists")
    func innerListList() throws {
        let list = try #require(StructuredFields.parseList(#"("foo" "bar"), ("baz"), ("bat" "one"), ()"#))
        #expect(
            list == [
                .innerList([(.string("foo"), []), (.string("bar"), [])], parameters: []),
                .innerList([(.string("baz"), [])], parameters: []),
                .innerList([(.string("bat"), []), (.string("one"), [])], parameters: []),
                .innerList([], parameters: []),
            ])
    }

    @Test("RFC 9651 §3.1.2: the RFC's example list with parameters")
    func parameterizedList() throws {
        let list = try #require(StructuredFields.parseList("abc;a=1;b=2; cde_456, (ghi;jk=4 l);q=\"9\";r=w"))
        #expect(
            list == [
                item(.token("abc"), [("a", .integer(1)), ("b", .integer(2)), ("cde_456", .boolean(true))]),
                .innerList(
                    [(.token("ghi"), [("jk", .integer(4))]), (.token("l"), [])],
                    parameters: [("q", .string("9")), ("r", .token("w"))]),
            ])
    }

    @Test("RFC 9651 §4.2.1: an empty field is an empty list")
    func emptyList() {
        #expect(StructuredFields.parseList("")?.isEmpty == true)
        #expect(StructuredFields.parseList("  ")?.isEmpty == true)
    }

    @Test(
        "RFC 9651 §4.2.1: syntax errors fail the whole list",
        arguments: ["a,", "a, ", ",a", "a,,b", "a b", "(a", "a)", "\"", "\\", "é", "1.", "?", "a;", "a;B", "(a)b"])
    func syntaxErrorsFail(text: String) {
        #expect(StructuredFields.parseList(text) == nil)
    }
}

@Suite("RFC 9651 §4.1 serialization")
struct StructuredSerializationTests {
    @Test(
        "RFC 9651 §4.1.3: bare items serialize to their canonical text",
        arguments: [
            (StructuredItem.integer(42), "42"),
            (.integer(-999_999_999_999_999), "-999999999999999"),
            (.decimal(1.5), "1.5"),
            (.decimal(2), "2.0"),
            (.decimal(-0.25), "-0.25"),
            (.decimal(1.23456), "1.235"),
            (.string(#"a"b\c"#), #""a\"b\\c""#),
            (.string(""), #""""#),
            (.token("text/html"), "text/html"),
            (.byteSequence("AQID"), ":AQID:"),
            (.boolean(true), "?1"),
            (.boolean(false), "?0"),
            (.date(1_659_578_233), "@1659578233"),
            (.displayString("füü"), #"%"f%c3%bc%c3%bc""#),
            (.displayString(#"100% "ok""#), #"%"100%25 %22ok%22""#),
        ])
    func bareItems(value: StructuredItem, expected: String) {
        #expect(StructuredFields.serialize(value) == expected)
    }

    @Test("RFC 9651 §4.1.1.2: parameters serialize with true booleans as the bare key")
    func parameters() {
        #expect(
            StructuredFields.serialize([("a", .boolean(true)), ("b", .integer(2)), ("c", .boolean(false))])
                == ";a;b=2;c=?0")
        #expect(StructuredFields.serialize([(String, StructuredItem)]()) == "")
    }

    @Test("RFC 9651 §4.1, §4.2: serialized items parse back to the same value")
    func roundTrip() throws {
        let items: [StructuredItem] = [
            .integer(-7), .decimal(0.009), .string(#"q"\"#), .token("*tok/en"), .byteSequence("AQID"),
            .boolean(false), .date(0), .displayString("é%"),
        ]
        for original in items {
            let text = StructuredFields.serialize(original)
            let list = try #require(StructuredFields.parseList(text))
            #expect(list == [item(original)], "\(text)")
        }
    }

    @Test(
        "RFC 9651 §3.3.4: which strings can be serialized as a Token",
        arguments: [
            ("foo", true), ("*x", true), ("a:b/c", true), ("Example-Cache.1", true), ("", false), ("1abc", false),
            ("a b", false), ("a,b", false), ("-x", false), ("é", false), ("a\"", false),
        ])
    func isToken(text: String, expected: Bool) {
        #expect(StructuredFields.isToken(text) == expected)
    }
}

@Suite("RFC 9211 §2 Cache-Status serialization")
struct CacheStatusTests {
    @Test("RFC 9211 §2.1: a hit is the cache name and the hit parameter")
    func hit() {
        #expect(CacheStatus(cache: "ExampleCache").fieldValue == "ExampleCache; hit")
        #expect(CacheStatus(cache: "ExampleCache", ttl: 376).fieldValue == "ExampleCache; hit; ttl=376")
        #expect(CacheStatus(cache: "ExampleCache", ttl: -5).fieldValue == "ExampleCache; hit; ttl=-5")
    }

    @Test("RFC 9211 §2.2, §2.5: a forwarded and stored response")
    func forwardedAndStored() {
        #expect(
            CacheStatus(cache: "ExampleCache", forward: .uriMiss, stored: true).fieldValue
                == "ExampleCache; fwd=uri-miss; stored")
        #expect(
            CacheStatus(cache: "ExampleCache", forward: .stale, forwardStatus: 304, stored: false).fieldValue
                == "ExampleCache; fwd=stale; fwd-status=304; stored=?0")
        // The widest numbers, every parameter set: the member is written whole.
        var widest = CacheStatus(cache: "C", forward: .stale, forwardStatus: .max, stored: true)
        (widest.ttl, widest.collapsed, widest.key, widest.detail) = (.min, false, #"k"\"#, "d d")
        #expect(
            widest.fieldValue
                == #"C; fwd=stale; fwd-status=9223372036854775807; stored; collapsed=?0; ttl=-9223372036854775808; key="k\"\\"; detail="d d""#
        )
    }

    @Test(
        "RFC 9211 §2.2: every forward reason serializes as its token",
        arguments: CacheStatus.ForwardReason.allCases)
    func forwardReasons(reason: CacheStatus.ForwardReason) throws {
        let text = CacheStatus(cache: "C", forward: reason).fieldValue
        #expect(text == "C; fwd=\(reason.rawValue)")
        let list = try #require(StructuredFields.parseList(text))
        #expect(list == [item(.token("C"), [("fwd", .token(reason.rawValue))])])
    }

    @Test("RFC 9211 §2: a cache name that is not a token is serialized as a String")
    func nameAsString() {
        #expect(CacheStatus(cache: "Example Cache").fieldValue == #""Example Cache"; hit"#)
        #expect(CacheStatus(cache: "1cache").fieldValue == #""1cache"; hit"#)
        #expect(CacheStatus(cache: #"a"b"#).fieldValue == #""a\"b"; hit"#)
    }

    @Test("RFC 9211 §2.6-§2.8: collapsed, key and detail parameters")
    func otherParameters() throws {
        var status = CacheStatus(cache: "C", detail: "memory")
        status.collapsed = true
        status.key = "https://example.com/a"
        #expect(status.fieldValue == #"C; hit; collapsed; key="https://example.com/a"; detail=memory"#)
        status.detail = "not a token"
        #expect(status.fieldValue == #"C; hit; collapsed; key="https://example.com/a"; detail="not a token""#)
        let list = try #require(StructuredFields.parseList(status.fieldValue))
        #expect(list.count == 1)
    }

    @Test("RFC 9651 §4.1.1.2, §4.1.6: a false Boolean is written ?0, a key's quote and backslash escaped")
    func falseBooleanAndEscapedKey() throws {
        var status = CacheStatus(cache: "C", forward: .miss, forwardStatus: 200, stored: false)
        status.collapsed = false
        status.ttl = 0
        status.key = #"a"b\c"#
        let text = status.fieldValue
        #expect(text == #"C; fwd=miss; fwd-status=200; stored=?0; collapsed=?0; ttl=0; key="a\"b\\c""#)
        let list = try #require(StructuredFields.parseList(text))
        #expect(
            list == [
                item(
                    .token("C"),
                    [
                        ("fwd", .token("miss")), ("fwd-status", .integer(200)), ("stored", .boolean(false)),
                        ("collapsed", .boolean(false)), ("ttl", .integer(0)), ("key", .string(#"a"b\c"#)),
                    ])
            ])
    }

    @Test("RFC 9211 §2: appended(to:) puts this cache after an existing value")
    func appended() {
        let status = CacheStatus(cache: "ExampleCache")
        #expect(status.appended(to: "OriginCache; hit; ttl=1100") == "OriginCache; hit; ttl=1100, ExampleCache; hit")
        #expect(status.appended(to: nil) == "ExampleCache; hit")
        #expect(status.appended(to: "") == "ExampleCache; hit")
        #expect(status.appended(to: " \t") == "ExampleCache; hit")
        #expect(status.description == "ExampleCache; hit")
    }

    @Test("RFC 9211 §2: the appended field parses as a Structured Fields list")
    func appendedParses() throws {
        let text = CacheStatus(cache: "B", forward: .miss).appended(to: CacheStatus(cache: "A").fieldValue)
        let list = try #require(StructuredFields.parseList(text))
        #expect(list == [item(.token("A"), [("hit", .boolean(true))]), item(.token("B"), [("fwd", .token("miss"))])])
    }
}
