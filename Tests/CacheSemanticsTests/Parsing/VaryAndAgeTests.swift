import CacheSemantics
import Testing

@Suite("RFC 9110 §12.5.5 Vary parsing")
struct VaryParsingTests {
    @Test("RFC 9110 §12.5.5: field names are lowered, de-duplicated and kept in order across lines")
    func namesLoweredAndDeduplicated() {
        let fields: HeaderFields = [
            HeaderField(name: "Vary", value: "Accept-Encoding, ACCEPT-LANGUAGE"),
            HeaderField(name: "vary", value: "accept-encoding, Origin,,"),
        ]
        let vary = Vary(fields: fields)
        #expect(!vary.isAny)
        #expect(vary.fieldNames == ["accept-encoding", "accept-language", "origin"])
        #expect(!vary.isEmpty)
    }

    @Test(
        "RFC 9110 §12.5.5: a * member anywhere means the response varies on everything",
        arguments: ["*", "Accept-Encoding, *", "*, Accept", " * ", "Accept,*,Origin"])
    func starAnywhere(value: String) {
        let vary = Vary(fields: ["Vary": value])
        #expect(vary.isAny)
        #expect(!vary.isEmpty)
    }

    @Test("RFC 9110 §12.5.5: * on a later field line still counts")
    func starOnLaterLine() {
        let fields: HeaderFields = [
            HeaderField(name: "Vary", value: "Accept-Encoding"),
            HeaderField(name: "Vary", value: "*"),
        ]
        let vary = Vary(fields: fields)
        #expect(vary.isAny)
        #expect(vary.fieldNames == ["accept-encoding"])
    }

    @Test("RFC 9110 §12.5.5: no Vary, or an empty one, varies on nothing")
    func emptyVary() {
        #expect(Vary(fields: [:]).isEmpty)
        #expect(Vary(fields: ["Vary": ""]).isEmpty)
        #expect(Vary(fields: ["Vary": " , ,"]).fieldNames == [])
    }

    @Test(
        "RFC 9110 §12.5.5: members that are not field names are ignored, never crash",
        arguments: ["\"", "\\", "\"Accept\"", "Accept Encoding", "é", "Accept;q=1", "\u{0}", "\"Accept, *"])
    func nonTokenMembersIgnored(value: String) {
        let vary = Vary(fields: ["Vary": "Origin, " + value])
        #expect(vary.fieldNames == ["origin"])
        #expect(!vary.isAny)
    }

    @Test("RFC 9110 §12.5.5: Vary built from names lowers them")
    func fromNames() {
        let vary = Vary(fieldNames: ["Accept-Encoding", "X-Foo"])
        #expect(vary.fieldNames == ["accept-encoding", "x-foo"])
        #expect(!vary.isAny)
        #expect(Vary(fieldNames: [], isAny: true).isAny)
    }
}

@Suite("RFC 9111 §4.1 Vary request value normalization")
struct VaryRequestValuesTests {
    let vary = Vary(fieldNames: ["Accept-Encoding", "Accept-Language"])

    @Test("RFC 9111 §4.1: request values are taken in Vary order, case-insensitively by name")
    func valuesInOrder() {
        let request: HeaderFields = ["accept-language": "en", "ACCEPT-ENCODING": "gzip"]
        #expect(vary.requestValues(request) == ["gzip", "en"])
    }

    @Test(
        "RFC 9111 §4.1: white space around commas and at the ends does not matter",
        arguments: ["gzip,br", "gzip, br", " gzip ,\tbr ", "gzip ,  br", "gzip,,br", ",gzip, br,"])
    func whitespaceDoesNotMatter(value: String) {
        #expect(vary.requestValues(["Accept-Encoding": value]) == ["br,gzip", nil])
    }

    @Test("RFC 9111 §4.1: combining field lines does not matter")
    func combiningLinesDoesNotMatter() {
        let split: HeaderFields = [
            HeaderField(name: "Accept-Encoding", value: "gzip"),
            HeaderField(name: "accept-encoding", value: " br"),
        ]
        let combined: HeaderFields = ["Accept-Encoding": "gzip, br"]
        #expect(vary.requestValues(split) == vary.requestValues(combined))
        #expect(vary.requestValues(split) == ["br,gzip", nil])
    }

    @Test("RFC 9111 §4.1: in a field whose semantics the cache does not know, member order and case are significant")
    func orderAndCaseMatter() {
        let vary = Vary(fieldNames: ["X-Variant"])
        #expect(vary.requestValues(["X-Variant": "b, a"]) != vary.requestValues(["X-Variant": "a, b"]))
        #expect(vary.requestValues(["X-Variant": "A"]) != vary.requestValues(["X-Variant": "a"]))
    }

    @Test(
        "RFC 9111 §4.1, RFC 9110 §12.5.3–4: Accept-Encoding and Accept-Language ignore member order and case",
        arguments: [
            ("Accept-Language", "en, fr", "FR,EN"), ("Accept-Language", "en;q=0.8, fr", "fr , EN ; Q=0.80"),
            ("Accept-Language", "de-CH, de;q=0.9", "de;q=0.900,de-ch;q=1"), ("Accept-Encoding", "gzip, br", "BR,GZIP"),
            ("Accept-Encoding", "gzip;q=1.0, identity; q=0.5", "identity;q=0.5,gzip"),
            ("Accept", "text/HTML;level=1, */*;q=0.1", "text/html; level=1 ,*/*; q=0.10"),
        ])
    func sameMeaningMatches(name: String, stored: String, later: String) {
        let vary = Vary(fieldNames: [name])
        let values = vary.requestValues([name: stored])
        #expect(values == vary.requestValues([name: later]))
        #expect(vary.matches([name: later], values: values))
    }

    @Test(
        "RFC 9111 §4.1: values of different meaning stay apart",
        arguments: [
            ("Accept-Language", "en, fr;q=0.5", "fr, en;q=0.5"), ("Accept-Language", "en", "en-GB"),
            ("Accept-Encoding", "gzip", "gzip, br"), ("Accept-Encoding", "gzip;q=0", "gzip"),
            ("Accept", "text/html, application/json", "application/json, text/html"),
            ("Accept", "text/plain;charset=UTF-8", "text/plain;charset=utf-16"),
        ])
    func differentMeaningDiffers(name: String, stored: String, later: String) {
        let vary = Vary(fieldNames: [name])
        #expect(!vary.matches([name: later], values: vary.requestValues([name: stored])))
    }

    @Test("RFC 9110 §12.4.2: a weight that is not a qvalue is kept as sent")
    func invalidWeightKept() {
        let vary = Vary(fieldNames: ["Accept-Language"])
        #expect(vary.requestValues(["Accept-Language": "en;q=1.5"]) == ["en;q=1.5"])
        #expect(vary.requestValues(["Accept-Language": "en;q=0.5000"]) == ["en;q=0.5000"])
        #expect(vary.requestValues(["Accept-Language": "en;q=0.050"]) == ["en;q=0.05"])
        #expect(vary.requestValues(["Accept-Language": "en;q=0"]) == ["en;q=0"])
    }

    @Test("RFC 9111 §4.1: quoted strings are kept intact")
    func quotedStringsIntact() {
        let vary = Vary(fieldNames: ["X-Q"])
        #expect(vary.requestValues(["X-Q": #" "a , b" , c "#]) == [#""a , b",c"#])
    }

    @Test("RFC 9111 §4.1: an absent field differs from an empty one")
    func absentDiffersFromEmpty() {
        let absent = vary.requestValues([:])
        let empty = vary.requestValues(["Accept-Encoding": "", "Accept-Language": " "])
        #expect(absent == [nil, nil])
        #expect(empty == ["", ""])
        #expect(absent != empty)
    }

    @Test("RFC 9111 §4.1: Vary: * and an empty Vary nominate no values")
    func noNominatedValues() {
        #expect(Vary(fields: ["Vary": "*"]).requestValues(["Accept": "x"]) == [])
        #expect(Vary(fields: [:]).requestValues(["Accept": "x"]) == [])
    }
}

@Suite("RFC 9111 §5.1 Age parsing in CacheEngine.makeFacts")
struct AgeParsingTests {
    let time = Timestamp(secondsSince1970: 784_111_777)

    func facts(_ fields: HeaderFields) -> (facts: StoredResponseFacts, notes: [Reason]) {
        CacheEngine().makeFacts(
            status: 200, fields: fields, requestFields: [:], requestTime: time, responseTime: time)
    }

    @Test("RFC 9111 §5.1: a valid Age is the age_value")
    func validAge() {
        let result = facts(["Age": "42"])
        #expect(result.facts.ageValue == 42)
        #expect(result.notes.isEmpty)
    }

    @Test("RFC 9111 §5.1: with several Age members, the first is used")
    func firstMemberUsed() {
        #expect(facts(["Age": "10, 20"]).facts.ageValue == 10)
        let lines: HeaderFields = [HeaderField(name: "Age", value: "30"), HeaderField(name: "age", value: "5")]
        #expect(facts(lines).facts.ageValue == 30)
        #expect(facts(lines).notes.isEmpty)
    }

    @Test(
        "RFC 9111 §5.1: an invalid Age is ignored with an invalidAge note",
        arguments: ["abc", "-1", "1.5", "+3", "1 2", "\"10\"", "\\", "\"", "٣", "10abc"])
    func invalidAgeIgnored(value: String) {
        let result = facts(["Age": value])
        #expect(result.facts.ageValue == 0)
        #expect(result.notes == [.invalidAge(value)])
    }

    @Test("RFC 9111 §5.1: only the first Age member is checked")
    func invalidFirstMember() {
        let result = facts(["Age": "abc, 20"])
        #expect(result.facts.ageValue == 0)
        #expect(result.notes == [.invalidAge("abc")])
    }

    @Test("RFC 9111 §1.2.2, §5.1: an overflowing Age clamps to 2147483648")
    func overflowClamps() {
        let result = facts(["Age": "99999999999999999999999999999999"])
        #expect(result.facts.ageValue == 2_147_483_648)
        #expect(result.notes.isEmpty)
        #expect(facts(["Age": "2147483647"]).facts.ageValue == 2_147_483_647)
    }

    @Test("RFC 9111 §5.1: an absent or empty Age is 0 without a note")
    func absentAge() {
        #expect(facts([:]).facts.ageValue == 0)
        #expect(facts([:]).notes.isEmpty)
        #expect(facts(["Age": ""]).facts.ageValue == 0)
        #expect(facts(["Age": ""]).notes.isEmpty)
    }
}
