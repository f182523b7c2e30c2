import CacheSemantics
import Testing

@Suite("RFC 9110 §5 HeaderFields")
struct HeaderFieldsTests {
    @Test("RFC 9110 §5.1: field names are compared case-insensitively")
    func namesAreCaseInsensitive() {
        let fields: HeaderFields = ["Cache-Control": "max-age=60"]
        #expect(fields["cache-control"] == "max-age=60")
        #expect(fields["CACHE-CONTROL"] == "max-age=60")
        #expect(fields.contains("cAcHe-CoNtRoL"))
        #expect(fields.values(named: "CACHE-control") == ["max-age=60"])
        #expect(fields["Cache-Contro"] == nil)
        #expect(!fields.contains("Cache-Controls"))
        // Longer names, non-ASCII bytes (compared as they are), lists and removal.
        var more: HeaderFields = ["If-Modified-Since": "a", "X-Ünïcode": "b", "Accept-Encoding": "gzip, br"]
        #expect(more["IF-MODIFIED-SINCE"] == "a")
        #expect(more["x-Ünïcode"] == "b")
        #expect(more["x-ünïcode"] == nil)
        #expect(more.listMembers(named: "accept-ENCODING") == ["gzip", "br"])
        more.removeAll(named: "if-modified-SINCE")
        #expect(!more.contains("If-Modified-Since"))
        #expect(more.count == 2)
    }

    @Test("RFC 9110 §5.3: two sections have the same lines of a name when they have as many, equal and in order")
    func sameLinesOfAName() {
        let cacheControl: (String) -> Bool = { $0 == "cache-control" }
        let stored: HeaderFields = HeaderFields([
            HeaderField(name: "Cache-Control", value: "max-age=1"), HeaderField(name: "ETag", value: "\"a\""),
            HeaderField(name: "cache-control", value: "public"),
        ])
        // Other fields between them and the names' spelling do not matter.
        let same = HeaderFields([
            HeaderField(name: "CACHE-CONTROL", value: "max-age=1"), HeaderField(name: "cache-control", value: "public"),
        ])
        #expect(stored.hasSameLines(as: same, where: cacheControl))
        #expect(same.hasSameLines(as: stored, where: cacheControl))
        // Neither has a line: the same.
        #expect(HeaderFields().hasSameLines(as: ["ETag": "\"b\""], where: cacheControl))
        for other: HeaderFields in [
            ["Cache-Control": "max-age=1"],  // one line fewer
            ["Cache-Control": "max-age=1, public"],  // combined: another line
            HeaderFields([
                HeaderField(name: "Cache-Control", value: "public"),
                HeaderField(name: "Cache-Control", value: "max-age=1"),
            ]),  // another order
            HeaderFields([
                HeaderField(name: "Cache-Control", value: "max-age=1"),
                HeaderField(name: "Cache-Control", value: "public"),
                HeaderField(name: "Cache-Control", value: "public"),
            ]),  // one line more
            [:],
        ] {
            #expect(!stored.hasSameLines(as: other, where: cacheControl), "\(other)")
            #expect(!other.hasSameLines(as: stored, where: cacheControl), "\(other)")
        }
    }

    @Test("RFC 9110 §5.2: field lines keep their order and original name spelling")
    func orderAndSpellingAreKept() {
        let fields = HeaderFields([("B", "2"), ("a", "1"), ("C", "3")])
        #expect(fields.map(\.name) == ["B", "a", "C"])
        #expect(fields.map(\.value) == ["2", "1", "3"])
        #expect(fields.count == 3)
        #expect(fields.description == "B: 2\na: 1\nC: 3")
    }

    @Test("RFC 9110 §5.3: repeated field lines are kept and combined with a comma in order")
    func repeatedLinesAreCombined() {
        let fields: HeaderFields = [
            HeaderField(name: "Vary", value: "Accept"),
            HeaderField(name: "Date", value: "x"),
            HeaderField(name: "vary", value: "Accept-Encoding"),
            HeaderField(name: "VARY", value: "Accept-Language"),
        ]
        #expect(fields.count == 4)
        #expect(fields.values(named: "Vary") == ["Accept", "Accept-Encoding", "Accept-Language"])
        #expect(fields["Vary"] == "Accept, Accept-Encoding, Accept-Language")
    }

    @Test("RFC 9110 §5.3: empty field lines add no empty list member when combined")
    func emptyLinesDoNotAddMembers() {
        let fields: HeaderFields = [
            HeaderField(name: "Accept", value: ""),
            HeaderField(name: "Accept", value: "text/html"),
            HeaderField(name: "Accept", value: ""),
        ]
        #expect(fields["Accept"] == "text/html")
        let onlyEmpty: HeaderFields = [HeaderField(name: "Accept", value: "")]
        #expect(onlyEmpty["Accept"] == "")
        #expect(onlyEmpty.contains("Accept"))
    }

    @Test("RFC 9110 §5.3: an absent field has no value, no lines and no members")
    func absentField() {
        let fields = HeaderFields()
        #expect(fields.isEmpty)
        #expect(fields["Vary"] == nil)
        #expect(fields.values(named: "Vary").isEmpty)
        #expect(fields.listMembers(named: "Vary").isEmpty)
        #expect(!fields.contains(""))
    }

    @Test("RFC 9110 §5.6.1: list members are split at commas, trimmed, empty members dropped")
    func listMembersSplitAndTrim() {
        let fields: HeaderFields = [
            HeaderField(name: "Cache-Control", value: " no-cache ,, max-age=0 ,\t,"),
            HeaderField(name: "cache-control", value: ",private"),
        ]
        #expect(fields.listMembers(named: "Cache-Control") == ["no-cache", "max-age=0", "private"])
    }

    @Test("RFC 9110 §5.6.1: commas inside quoted strings do not split list members")
    func listMembersRespectQuotes() {
        let fields: HeaderFields = [
            "Cache-Control": #"no-cache="Set-Cookie, X-Foo", private="a\",b", max-age=5"#
        ]
        #expect(
            fields.listMembers(named: "Cache-Control") == [
                #"no-cache="Set-Cookie, X-Foo""#, #"private="a\",b""#, "max-age=5",
            ])
    }

    @Test("RFC 9110 §5.6.1: a quoted string does not continue onto the next field line")
    func quotesDoNotSpanLines() {
        let fields: HeaderFields = [
            HeaderField(name: "X", value: #"a="open, b"#),
            HeaderField(name: "X", value: "c, d"),
        ]
        #expect(fields.listMembers(named: "X") == [#"a="open, b"#, "c", "d"])
    }

    @Test(
        "RFC 9110 §5.6.1: hostile list values never crash",
        arguments: [
            ("", [String]()),
            (",", []),
            (" , ,\t", []),
            ("\"", ["\""]),
            ("\\", ["\\"]),
            ("a, \"b\\", ["a", "\"b\\"]),
            ("\"\\\"", ["\"\\\""]),
            ("é, ü", ["é", "ü"]),
            ("\u{0}, x", ["\u{0}", "x"]),
        ])
    func hostileListValues(value: String, expected: [String]) {
        let fields: HeaderFields = ["X": value]
        #expect(fields.listMembers(named: "X").map(String.init) == expected)
    }

    @Test("RFC 9110 §5.3: setting a value replaces every line of that name with one line")
    func subscriptSetReplacesAllLines() {
        var fields: HeaderFields = [
            HeaderField(name: "Vary", value: "Accept"),
            HeaderField(name: "Date", value: "d"),
            HeaderField(name: "vary", value: "Accept-Encoding"),
        ]
        fields["VARY"] = "Origin"
        #expect(fields.count == 2)
        #expect(fields.values(named: "Vary") == ["Origin"])
        #expect(fields[0] == HeaderField(name: "Vary", value: "Origin"))
        #expect(fields[1] == HeaderField(name: "Date", value: "d"))
    }

    @Test("RFC 9110 §5.2: setting an absent field appends a line at the end")
    func subscriptSetAppends() {
        var fields: HeaderFields = ["Date": "d"]
        fields["ETag"] = "\"x\""
        #expect(fields.map(\.name) == ["Date", "ETag"])
        #expect(fields["etag"] == "\"x\"")
    }

    @Test("RFC 9110 §5.3: setting nil removes every line of that name")
    func subscriptSetNilRemoves() {
        var fields: HeaderFields = [
            HeaderField(name: "Warning", value: "1"),
            HeaderField(name: "Date", value: "d"),
            HeaderField(name: "WARNING", value: "2"),
        ]
        fields["warning"] = nil
        #expect(fields.count == 1)
        #expect(fields["Warning"] == nil)
        #expect(fields["Date"] == "d")
    }

    @Test("RFC 9110 §5.3: append keeps existing lines of the same name")
    func appendKeepsLines() {
        var fields: HeaderFields = ["Vary": "Accept"]
        fields.append(name: "vary", value: "Accept-Encoding")
        #expect(fields.count == 2)
        #expect(fields[1] == HeaderField(name: "vary", value: "Accept-Encoding"))
        #expect(fields["Vary"] == "Accept, Accept-Encoding")
        #expect(fields.listMembers(named: "VARY") == ["Accept", "Accept-Encoding"])
    }

    @Test("RFC 9110 §5.1: removeAll(named:) removes lines of that name, ignoring case")
    func removeAllNamed() {
        var fields: HeaderFields = [
            HeaderField(name: "A", value: "1"),
            HeaderField(name: "b", value: "2"),
            HeaderField(name: "a", value: "3"),
        ]
        fields.removeAll(named: "A")
        #expect(fields == [HeaderField(name: "b", value: "2")])
        fields.removeAll(named: "missing")
        #expect(fields.count == 1)
    }

    @Test("RFC 9110 §5.1: removeAll(namedAnyOf:) removes every listed name, ignoring case")
    func removeAllNamedAnyOf() {
        var fields: HeaderFields = [
            HeaderField(name: "Connection", value: "close"),
            HeaderField(name: "ETag", value: "\"1\""),
            HeaderField(name: "keep-alive", value: "5"),
            HeaderField(name: "TE", value: "trailers"),
        ]
        fields.removeAll(namedAnyOf: ["connection", "KEEP-ALIVE", "te"])
        #expect(fields == [HeaderField(name: "ETag", value: "\"1\"")])
        fields.removeAll(namedAnyOf: [String]())
        #expect(fields.count == 1)
    }

    @Test("RFC 9110 §5.3: extractLines(where:) returns the lines it removes, both kept and removed in order")
    func extractLinesKeepsOrder() {
        var fields: HeaderFields = [
            HeaderField(name: "A", value: "1"),
            HeaderField(name: "Connection", value: "x-a"),
            HeaderField(name: "B", value: "2"),
            HeaderField(name: "x-a", value: "3"),
            HeaderField(name: "A", value: "4"),
        ]
        let removed = fields.extractLines { ["connection", "x-a"].contains($0.lowercasedName) }
        #expect(removed == [HeaderField(name: "Connection", value: "x-a"), HeaderField(name: "x-a", value: "3")])
        #expect(
            fields == [
                HeaderField(name: "A", value: "1"), HeaderField(name: "B", value: "2"),
                HeaderField(name: "A", value: "4"),
            ])
        #expect(fields["a"] == "1, 4")
        // Nothing matching: nothing returned, the lines as they were; everything matching: none left.
        #expect(fields.extractLines { $0.name == "missing" }.isEmpty)
        #expect(fields.count == 3)
        #expect(fields.extractLines { _ in true }.count == 3)
        #expect(fields.isEmpty)
    }
}
