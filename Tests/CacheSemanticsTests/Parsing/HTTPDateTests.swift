import Testing

@testable import CacheSemantics

/// Sun, 06 Nov 1994 08:49:37 GMT, the example date of RFC 9110 §5.6.7.
private let rfcExample = Timestamp(secondsSince1970: 784_111_777)

/// `year`-01-01T00:00:00Z, computed independently of the parser (years 1970-9999).
private func year(_ year: Int) -> Timestamp {
    var days = 0
    for y in 1970..<year { days += (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 366 : 365 }
    return Timestamp(secondsSince1970: Double(days) * 86_400)
}

@Suite("RFC 9110 §5.6.7 HTTP-date parsing")
struct HTTPDateParsingTests {
    @Test(
        "RFC 9110 §5.6.7: the three formats of the RFC's example all mean 784111777",
        arguments: [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ])
    func rfcExampleFormats(text: String) {
        #expect(HTTPDate.parse(text, now: rfcExample) == rfcExample)
    }

    @Test("RFC 9110 §5.6.7: IMF-fixdate is parsed exactly")
    func imfFixdate() {
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == Timestamp(secondsSince1970: 0))
        #expect(HTTPDate.parse("Fri, 31 Dec 1999 23:59:59 GMT") == Timestamp(secondsSince1970: 946_684_799))
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 12:00:00 GMT") == Timestamp(secondsSince1970: 951_825_600))
        #expect(HTTPDate.parse("Wed, 31 Dec 1969 23:59:59 GMT") == Timestamp(secondsSince1970: -1))
    }

    @Test(
        "RFC 9110 §5.6.7: an exact IMF-fixdate, read in place, means what the reader of every form makes of it; so does each of its variations"
    )
    func quickFixdateAgreesWithTheGeneralReader() {
        let replacements: [UInt8] = Array(" ,:-0159AGMTZamtz\t".utf8) + [0, 0x7F, 0xC3]
        var compared = 0
        var quick = 0
        for seconds in stride(from: -62_135_596_800.0, through: 253_402_300_799, by: 86_400 * 7919 + 3_607) {
            let text = HTTPDate.format(Timestamp(secondsSince1970: seconds))
            var variants = [text, text.uppercased(), text.lowercased(), " \(text)\t", text + "x", "x" + text]
            var bytes = Array(text.utf8)
            for index in bytes.indices {
                let kept = bytes[index]
                for byte in replacements {
                    bytes[index] = byte
                    variants.append(String(decoding: bytes, as: UTF8.self))
                }
                bytes[index] = kept
            }
            for variant in variants {
                let general = HTTPDate.parseAnyForm(variant, now: rfcExample)
                #expect(HTTPDate.parse(variant, now: rfcExample) == general, "\(variant.debugDescription)")
                compared += 1
                if general != nil && variant.utf8.count == 29 { quick += 1 }
            }
            #expect(HTTPDate.parse(text) == Timestamp(secondsSince1970: seconds))
        }
        #expect(compared > 100_000 && quick > 1_000)
        // Invalid dates are invalid both ways: Nov 31, Feb 29 of a common year, hour 24.
        let invalid = [
            "Sun, 31 Nov 1994 08:49:37 GMT", "Mon, 29 Feb 1993 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        ]
        for text in invalid {
            #expect(HTTPDate.parse(text) == nil && HTTPDate.parseAnyForm(text, now: nil) == nil)
        }
    }

    @Test("RFC 9110 §5.6.7: surrounding white space is tolerated")
    func surroundingWhitespace() {
        #expect(HTTPDate.parse("  Sun, 06 Nov 1994 08:49:37 GMT \t") == rfcExample)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994 ") == rfcExample)
    }

    @Test("RFC 9110 §5.6.7: asctime with a space-padded one-digit day")
    func asctimePaddedDay() {
        #expect(HTTPDate.parse("Thu Jan  1 00:00:00 1970") == Timestamp(secondsSince1970: 0))
        #expect(HTTPDate.parse("Fri Dec 31 23:59:59 1999") == Timestamp(secondsSince1970: 946_684_799))
    }

    @Test("RFC 9110 §5.6.7: RFC 850 two-digit years within 50 years of now stay in this century")
    func rfc850NearYears() {
        let now = year(2025)
        #expect(HTTPDate.parse("Friday, 31-Dec-99 23:59:59 GMT", now: now) == Timestamp(secondsSince1970: 946_684_799))
        #expect(HTTPDate.parse("Thursday, 01-Jan-70 00:00:00 GMT", now: now) == year(2070))
        #expect(HTTPDate.parse("Monday, 01-Jan-24 00:00:00 GMT", now: now) == year(2024))
        // 2075 is exactly 50 years ahead: not "more than 50 years in the future".
        #expect(HTTPDate.parse("Tuesday, 01-Jan-75 00:00:00 GMT", now: now) == year(2075))
    }

    @Test("RFC 9110 §5.6.7: an RFC 850 year more than 50 years in the future means the previous century")
    func rfc850PreviousCentury() {
        let now = year(2025)
        #expect(HTTPDate.parse("Thursday, 01-Jan-76 00:00:00 GMT", now: now) == year(1976))
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == rfcExample)
    }

    @Test("RFC 9110 §5.6.7: near the end of a century, small two-digit years are in the next century")
    func rfc850NextCentury() {
        let now = year(2095)
        // 2101 is 6 years ahead, not more than 50, so "01" is not 2001.
        #expect(HTTPDate.parse("Saturday, 01-Jan-01 00:00:00 GMT", now: now) == year(2101))
        #expect(HTTPDate.parse("Sunday, 01-Jan-45 00:00:00 GMT", now: now) == year(2145))
        #expect(HTTPDate.parse("Wednesday, 01-Jan-46 00:00:00 GMT", now: now) == year(2046))
        #expect(HTTPDate.parse("Saturday, 01-Jan-95 00:00:00 GMT", now: now) == year(2095))
    }

    @Test("RFC 9110 §5.6.7: without now, RFC 850 years 00-69 are 20xx and 70-99 are 19xx")
    func rfc850WithoutNow() {
        #expect(HTTPDate.parse("Thursday, 01-Jan-70 00:00:00 GMT") == Timestamp(secondsSince1970: 0))
        #expect(HTTPDate.parse("Saturday, 01-Jan-00 00:00:00 GMT") == year(2000))
        #expect(HTTPDate.parse("Sunday, 01-Jan-69 00:00:00 GMT") == year(2069))
    }

    @Test("RFC 9110 §5.6.7: an extreme now never traps RFC 850 year resolution")
    func rfc850ExtremeNow() {
        for seconds in [Double.nan, .infinity, -.infinity, 1e300, -1e300] {
            let now = Timestamp(secondsSince1970: seconds)
            #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == rfcExample)
            _ = HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now)
        }
        #expect(
            HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: Timestamp(secondsSince1970: .nan)) == rfcExample)
    }

    @Test(
        "RFC 9111 §4.2: day and month names and GMT are matched case-insensitively",
        arguments: [
            "sun, 06 nov 1994 08:49:37 gmt",
            "SUN, 06 NOV 1994 08:49:37 GMT",
            "SUNDAY, 06-NOV-94 08:49:37 Gmt",
            "sUn nOv  6 08:49:37 1994",
        ])
    func caseInsensitiveNames(text: String) {
        #expect(HTTPDate.parse(text, now: rfcExample) == rfcExample)
    }

    @Test(
        "RFC 9111 §4.2: a zone other than GMT makes the date invalid",
        arguments: [
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37 +0000",
            "Sun, 06 Nov 1994 08:49:37 Z",
            "Sun, 06 Nov 1994 08:49:37",
            "Sunday, 06-Nov-94 08:49:37 EST",
            "Sun Nov  6 08:49:37 1994 GMT",
        ])
    func nonGMTZonesInvalid(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test(
        "RFC 9110 §5.6.7: out-of-range fields make the date invalid",
        arguments: [
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT",
            "Sun, 32 Jan 1994 08:49:37 GMT",
            "Sun, 00 Jan 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 29 Feb 2023 08:49:37 GMT",
            "Sun, 31 Apr 2023 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 0000 08:49:37 GMT",
        ])
    func outOfRangeFieldsInvalid(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("RFC 9110 §5.6.7: Feb 29 in a leap year is valid")
    func leapDayValid() {
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 00:00:00 GMT") == Timestamp(secondsSince1970: 1_709_164_800))
    }

    @Test("RFC 9110 §5.6.7: a leap second (second 60) is accepted")
    func leapSecond() {
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == Timestamp(secondsSince1970: 1_483_228_800))
    }

    @Test(
        "RFC 9111 §5.3: 0, garbage and malformed dates are invalid (the caller treats Expires as expired)",
        arguments: [
            "", "0", "-1", " ", "\"", "\\", "GMT", "now", "Sun,", "Sun, ", "Sun, 06",
            "Sun, 06 Nov 1994", "Sun, 06 Nov 94 08:49:37 GMT", "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 19945 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMTX", "Sun, 06 Nov 1994 08:49:37 GMT junk",
            "Sunday, 06-Nov-994 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT",
            "Sundae, 06-Nov-94 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 94",
            "Sun Nov   6 08:49:37 1994", "Sunnnnnnnnnnnnnnnnnnnnnnnn, 06 Nov 1994",
            "Sün, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\u{0}",
            "Sun, ９９ Nov 1994 08:49:37 GMT", "Sun, 99999999999999999999999 Nov 1994 08:49:37 GMT",
            "\u{FEFF}Sun, 06 Nov 1994 08:49:37 GMT",
        ])
    func garbageInvalid(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }
}

@Suite("RFC 9110 §5.6.7 HTTP-date formatting")
struct HTTPDateFormattingTests {
    @Test("RFC 9110 §5.6.7: 784111777 formats as the RFC's example IMF-fixdate")
    func formatsRFCExample() {
        #expect(HTTPDate.format(rfcExample) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(rfcExample.description == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test("RFC 9110 §5.6.7: format rounds down to the second")
    func roundsDown() {
        #expect(HTTPDate.format(Timestamp(secondsSince1970: 784_111_777.999)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Timestamp(secondsSince1970: -0.5)) == "Wed, 31 Dec 1969 23:59:59 GMT")
    }

    @Test(
        "RFC 9110 §5.6.7: format and parse round-trip, with the right day name",
        arguments: [
            0.0, -1, 86_399, 951_782_400, 951_868_800, 1_709_164_800, 4_102_444_800, -2_208_988_800,
            253_402_300_799, -62_135_596_800, 784_111_777,
        ])
    func roundTrip(seconds: Double) throws {
        let text = HTTPDate.format(Timestamp(secondsSince1970: seconds))
        #expect(text.utf8.count == 29)
        let parsed = try #require(HTTPDate.parse(text))
        #expect(parsed.secondsSince1970 == seconds)
        #expect(HTTPDate.format(parsed) == text)
    }

    @Test("RFC 9110 §5.6.7: day names are computed correctly around the epoch and in the past")
    func dayNames() {
        #expect(HTTPDate.format(Timestamp(secondsSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Timestamp(secondsSince1970: -86_400)) == "Wed, 31 Dec 1969 00:00:00 GMT")
        #expect(HTTPDate.format(Timestamp(secondsSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(Timestamp(secondsSince1970: -62_135_596_800)) == "Mon, 01 Jan 0001 00:00:00 GMT")
    }

    @Test(
        "RFC 9110 §5.6.7: extreme times clamp to years 0001-9999",
        arguments: [
            (Double.infinity, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (1e300, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (253_402_300_800, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (-Double.infinity, "Mon, 01 Jan 0001 00:00:00 GMT"),
            (-1e300, "Mon, 01 Jan 0001 00:00:00 GMT"),
            (Double.nan, "Thu, 01 Jan 1970 00:00:00 GMT"),
        ])
    func extremeYearsClamp(seconds: Double, expected: String) {
        #expect(HTTPDate.format(Timestamp(secondsSince1970: seconds)) == expected)
    }
}

@Suite("Access-log times: RFC 3339 with milliseconds, the Common Log Format")
struct AccessLogTimeTests {
    @Test("RFC 3339 §5.6: time-secfrac to the millisecond, rounded down, UTC")
    func milliseconds() {
        #expect(HTTPDate.iso8601(Timestamp(secondsSince1970: 1_796_205_600.2509)) == "2026-12-02T10:00:00Z")
        #expect(
            HTTPDate.iso8601(Timestamp(secondsSince1970: 1_796_205_600.2509), milliseconds: true)
                == "2026-12-02T10:00:00.250Z")
        #expect(HTTPDate.iso8601(Timestamp(secondsSince1970: 0), milliseconds: true) == "1970-01-01T00:00:00.000Z")
        #expect(
            HTTPDate.iso8601(Timestamp(secondsSince1970: 951_782_399.9999), milliseconds: true)
                == "2000-02-28T23:59:59.999Z")
    }

    @Test("Common Log Format: %d/%b/%Y:%H:%M:%S %z in UTC, as Apache and nginx write it")
    func commonLogFormat() {
        #expect(HTTPDate.commonLogFormat(Timestamp(secondsSince1970: 1_796_205_600.9)) == "02/Dec/2026:10:00:00 +0000")
        #expect(HTTPDate.commonLogFormat(Timestamp(secondsSince1970: 951_782_400)) == "29/Feb/2000:00:00:00 +0000")
        #expect(HTTPDate.commonLogFormat(rfcExample) == "06/Nov/1994:08:49:37 +0000")
    }
}

@Suite("RFC 9111 §5.3 invalid Expires in CacheEngine.makeFacts")
struct ExpiresParsingTests {
    func facts(_ fields: HeaderFields) -> (facts: StoredResponseFacts, notes: [Reason]) {
        CacheEngine().makeFacts(
            status: 200, fields: fields, requestFields: [:], requestTime: rfcExample, responseTime: rfcExample)
    }

    @Test(
        "RFC 9111 §5.3: an invalid Expires such as 0 means already expired, with a note",
        arguments: ["0", "-1", "garbage", "", "Sun, 06 Nov 1994 08:49:37 UTC", "\""])
    func invalidExpiresIsExpired(value: String) {
        let result = facts(["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Expires": value])
        #expect(result.facts.lifetimeSource == .invalid)
        #expect(result.facts.freshnessLifetime == 0)
        #expect(result.notes == [.invalidExpires(value)])
    }

    @Test("RFC 9111 §5.3, §4.2.1: a valid Expires gives Expires minus Date as the lifetime")
    func validExpires() {
        let result = facts(["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Expires": "Sun, 06 Nov 1994 09:49:37 GMT"])
        #expect(result.facts.lifetimeSource == .expires)
        #expect(result.facts.freshnessLifetime == 3600)
        #expect(result.notes.isEmpty)
    }
}
