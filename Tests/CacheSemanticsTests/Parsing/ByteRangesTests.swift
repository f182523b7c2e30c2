import CacheSemantics
import Testing

@Suite("RFC 9110 §14.1.1, §14.2 Range parsing")
struct ByteRangeRequestParsingTests {
    @Test("RFC 9110 §14.1.1: closed, open-ended and suffix ranges are parsed in order")
    func rangeKinds() throws {
        let request = try #require(ByteRangeRequest("bytes=0-499, 500-, -200"))
        #expect(request.ranges == [.closed(first: 0, last: 499), .from(500), .suffix(200)])
    }

    @Test(
        "RFC 9110 §14.1: the range unit is case-insensitive",
        arguments: ["bytes=0-1", "BYTES=0-1", "Bytes=0-1", " bytes=0-1 "])
    func unitCaseInsensitive(value: String) {
        #expect(ByteRangeRequest(value)?.ranges == [.closed(first: 0, last: 1)])
    }

    @Test("RFC 9110 §14.1.1: the RFC's examples parse")
    func rfcExamples() {
        #expect(ByteRangeRequest("bytes=0-499")?.ranges == [.closed(first: 0, last: 499)])
        #expect(ByteRangeRequest("bytes=500-999")?.ranges == [.closed(first: 500, last: 999)])
        #expect(ByteRangeRequest("bytes=-500")?.ranges == [.suffix(500)])
        #expect(ByteRangeRequest("bytes=9500-")?.ranges == [.from(9500)])
        #expect(ByteRangeRequest("bytes=0-0,-1")?.ranges == [.closed(first: 0, last: 0), .suffix(1)])
        #expect(
            ByteRangeRequest("bytes= 0-999, 4500-5499, -1000")?.ranges == [
                .closed(first: 0, last: 999), .closed(first: 4500, last: 5499), .suffix(1000),
            ])
    }

    @Test("RFC 9110 §14.1.1: a zero-length suffix parses (and is unsatisfiable)")
    func zeroSuffixParses() {
        #expect(ByteRangeRequest("bytes=-0")?.ranges == [.suffix(0)])
    }

    @Test(
        "RFC 9110 §14.1.1, §14.2: invalid range specifiers make the field ignorable (nil)",
        arguments: [
            "bytes=500-499", "bytes=1-2, 5-4", "bytes=", "bytes= , ", "bytes=-", "bytes=a-b", "bytes=1-2-3",
            "bytes=0--1", "bytes=--1", "bytes=1", "bytes=+1-2", "bytes=0x1-2", "bytes=1 - 2", "bytes=1-2;x",
            "bytes", "0-499", "=0-1", "", "=", "\"", "\\", "bytes=\"", "bytes=\\", "bytes=é-1", "bytes=٣-٤",
        ])
    func invalidSpecifiers(value: String) {
        #expect(ByteRangeRequest(value) == nil)
    }

    @Test(
        "RFC 9110 §14.2: a unit other than bytes is ignored (nil)",
        arguments: ["items=0-1", "bytesx=0-1", "byte=0-1", "none=0-1", "bytes 0-1"])
    func otherUnits(value: String) {
        #expect(ByteRangeRequest(value) == nil)
    }

    @Test("RFC 9110 §14.2, §17.15: more than 100 ranges are ignored (nil)")
    func tooManyRanges() {
        let hundred = (0..<100).map { "\($0 * 2)-\($0 * 2)" }.joined(separator: ",")
        #expect(ByteRangeRequest("bytes=" + hundred)?.ranges.count == 100)
        #expect(ByteRangeRequest("bytes=" + hundred + ",300-301") == nil)
        #expect(ByteRangeRequest.maximumRanges == 100)
    }

    @Test("RFC 9110 §14.1.1: huge positions never crash or wrap")
    func hugeNumbers() throws {
        let digits = String(repeating: "9", count: 40)
        let from = try #require(ByteRangeRequest("bytes=\(digits)-"))
        #expect(from.ranges == [.from(Int64.max / 2)])
        let suffix = try #require(ByteRangeRequest("bytes=-\(digits)"))
        #expect(suffix.ranges == [.suffix(Int64.max / 2)])
        let closed = try #require(ByteRangeRequest("bytes=0-\(digits)"))
        #expect(closed.ranges == [.closed(first: 0, last: Int64.max / 2)])
        #expect(closed.satisfiableRanges(length: 10) == [0...9])
        #expect(suffix.satisfiableRanges(length: 10) == [0...9])
        #expect(from.satisfiableRanges(length: 10) == [])
        #expect(ByteRangeRequest("bytes=9223372036854775807-9223372036854775808")?.ranges.count == 1)
    }

    @Test("RFC 9110 §14.2: fieldValue round-trips")
    func fieldValueRoundTrip() throws {
        let request = ByteRangeRequest(ranges: [.closed(first: 0, last: 499), .from(500), .suffix(200)])
        #expect(request.fieldValue == "bytes=0-499, 500-, -200")
        #expect(ByteRangeRequest(request.fieldValue) == request)
        let parsed = try #require(ByteRangeRequest("BYTES=1-2,3-"))
        #expect(parsed.fieldValue == "bytes=1-2, 3-")
    }
}

@Suite("RFC 9110 §14.1.2 satisfiable ranges")
struct SatisfiableRangesTests {
    @Test(
        "RFC 9110 §14.1.2: ranges are clipped to the representation and kept in request order",
        arguments: [
            ("bytes=0-499", Int64(1000), [Int64(0)...499]),
            ("bytes=500-2000", 1000, [500...999]),
            ("bytes=999-", 1000, [999...999]),
            ("bytes=-200", 1000, [800...999]),
            ("bytes=-2000", 1000, [0...999]),
            ("bytes=900-, 0-0", 1000, [900...999, 0...0]),
            ("bytes=1000-, 5-5", 1000, [5...5]),
        ])
    func clipped(value: String, length: Int64, expected: [ClosedRange<Int64>]) throws {
        let request = try #require(ByteRangeRequest(value))
        #expect(request.satisfiableRanges(length: length) == expected)
    }

    @Test(
        "RFC 9110 §14.1.2, §15.5.17: nothing satisfiable gives an empty list (416)",
        arguments: [
            ("bytes=1000-", Int64(1000)),
            ("bytes=1000-1999", 1000),
            ("bytes=5000-6000, 1000-", 1000),
            ("bytes=-0", 1000),
            ("bytes=0-0", 0),
            ("bytes=-10", 0),
            ("bytes=0-", 0),
        ])
    func unsatisfiable(value: String, length: Int64) throws {
        let request = try #require(ByteRangeRequest(value))
        #expect(request.satisfiableRanges(length: length).isEmpty)
    }
}

@Suite("RFC 9110 §14.4 Content-Range")
struct ContentRangeTests {
    @Test("RFC 9110 §14.4: a range with a complete length is parsed")
    func rangeWithLength() throws {
        let value = try #require(ContentRange("bytes 0-499/1234"))
        #expect(value.range == 0...499)
        #expect(value.completeLength == 1234)
        #expect(value.fieldValue == "bytes 0-499/1234")
    }

    @Test("RFC 9110 §14.4: the unsatisfied form bytes */length is parsed")
    func unsatisfiedForm() throws {
        let value = try #require(ContentRange("bytes */1234"))
        #expect(value.range == nil)
        #expect(value.completeLength == 1234)
        #expect(value.fieldValue == "bytes */1234")
    }

    @Test("RFC 9110 §14.4: an unknown complete length (*) is parsed")
    func unknownLength() throws {
        let value = try #require(ContentRange("bytes 0-499/*"))
        #expect(value.range == 0...499)
        #expect(value.completeLength == nil)
        #expect(value.fieldValue == "bytes 0-499/*")
    }

    @Test("RFC 9110 §14.4: the unit is case-insensitive and the RFC's examples parse")
    func rfcExamples() {
        #expect(ContentRange("BYTES 42-1233/1234") == ContentRange(range: 42...1233, completeLength: 1234))
        #expect(ContentRange("bytes 42-1233/*") == ContentRange(range: 42...1233, completeLength: nil))
        #expect(ContentRange("bytes 21010-47021/47022") == ContentRange(range: 21010...47021, completeLength: 47022))
    }

    @Test(
        "RFC 9110 §14.4: invalid values, including last-pos >= complete-length, are nil",
        arguments: [
            "bytes 0-1234/1234", "bytes 0-2000/1234", "bytes 500-499/1234", "bytes */*", "bytes 0-499", "bytes",
            "bytes 0-/1234", "bytes -499/1234", "bytes a-b/1234", "bytes 0-499/abc", "bytes 0-499/-1",
            "items 0-499/1234", "bytes=0-499/1234", "0-499/1234", "", " ", "\"", "\\", "bytes \\", "bytes */",
            "bytes 0-499/", "bytes /1234", "bytes 0-0/0", "bytes é-1/2",
        ])
    func invalidValues(value: String) {
        #expect(ContentRange(value) == nil)
    }

    @Test("RFC 9110 §14.4: huge numbers never crash")
    func hugeNumbers() {
        let digits = String(repeating: "9", count: 40)
        #expect(ContentRange("bytes 0-1/\(digits)") == ContentRange(range: 0...1, completeLength: Int64.max / 2))
        #expect(ContentRange("bytes 0-\(digits)/\(digits)") == nil)
        #expect(
            ContentRange("bytes \(digits)-\(digits)/*")
                == ContentRange(range: (Int64.max / 2)...(Int64.max / 2), completeLength: nil))
    }

    @Test(
        "RFC 9110 §14.4: fieldValue round-trips",
        arguments: [
            ContentRange(range: 0...499, completeLength: 1234),
            ContentRange(range: nil, completeLength: 1234),
            ContentRange(range: 7...7, completeLength: nil),
            ContentRange(range: 0...0, completeLength: 1),
        ])
    func fieldValueRoundTrip(value: ContentRange) {
        #expect(ContentRange(value.fieldValue) == value)
    }
}
