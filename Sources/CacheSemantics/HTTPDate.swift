/// HTTP-date parsing and formatting (RFC 9110 §5.6.7), without `DateFormatter` or locales.
///
/// All three formats are accepted: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
/// obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`). Names are matched case-insensitively and a zone other than
/// `GMT` makes the value invalid (RFC 9111 §4.2). Invalid input yields `nil`; it never traps.
public enum HTTPDate {
    private static let monthNames: [[UInt8]] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ].map { Array($0.utf8) }
    private static let dayNames: [[UInt8]] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map { Array($0.utf8) }
    private static let longDayNames: [[UInt8]] = [
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    ].map { Array($0.utf8) }

    /// Parses an HTTP-date.
    ///
    /// - Parameters:
    ///   - value: The field value.
    ///   - now: Used only for RFC 850 two-digit years, read as the year with those digits at
    ///     most 50 years after `now`: one more than 50 years in the future is the most recent
    ///     past year with those digits (RFC 9110 §5.6.7). Without it (or when it is not
    ///     finite), years 00–69 mean 20xx.
    /// - Returns: The time, or `nil` when `value` is not a valid HTTP-date.
    public static func parse(_ value: some StringProtocol, now: Timestamp? = nil) -> Timestamp? {
        // What nearly every server sends, read in place first.
        if let time = value.utf8.withContiguousStorageIfAvailable(fixdate) ?? nil { return time }
        return parseAnyForm(value, now: now)
    }

    /// ``parse(_:now:)`` without its quick reading of an exact IMF-fixdate.
    static func parseAnyForm(_ value: some StringProtocol, now: Timestamp?) -> Timestamp? {
        var bytes = Array(value.utf8)
        while let last = bytes.last, ASCII.isOWS(last) { bytes.removeLast() }
        var cursor = Cursor(bytes: bytes)
        cursor.skipOWS()
        let name = cursor.letters()
        if cursor.take(UInt8(ascii: ",")) {
            // IMF-fixdate or RFC 850.
            guard cursor.take(0x20) else { return nil }
            if name.count == 3 {
                guard dayNames.contains(name) else { return nil }
                return imfFixdate(&cursor)
            }
            guard longDayNames.contains(name) else { return nil }
            return rfc850(&cursor, now: now)
        }
        guard name.count == 3, dayNames.contains(name), cursor.take(0x20) else { return nil }
        return asctime(&cursor)
    }

    /// An IMF-fixdate of exactly 29 bytes between optional white space
    /// (`Sun, 06 Nov 1994 08:49:37 GMT`), read in place; `nil` for anything else, which
    /// ``parseAnyForm(_:now:)`` then reads. What this accepts, that reads alike (names in any
    /// case, the time and date checked the same way), so it changes no result, only the cost
    /// (an array and several name arrays a date before).
    private static func fixdate(_ all: UnsafeBufferPointer<UInt8>) -> Timestamp? {
        let range = ASCII.trimmedRange(all, 0..<all.count)
        guard range.count == 29 else { return nil }
        let bytes = UnsafeBufferPointer(rebasing: all[range])
        func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for index in start..<(start + count) {
                guard ASCII.isDigit(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        /// Whether the three bytes at `start`, lowered, are `name`.
        func named(_ start: Int, _ name: [UInt8]) -> Bool {
            ASCII.lower(bytes[start]) == name[0] && ASCII.lower(bytes[start + 1]) == name[1]
                && ASCII.lower(bytes[start + 2]) == name[2]
        }
        guard bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
            bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20,
            named(26, Self.gmtName), dayNames.contains(where: { named(0, $0) }),
            let month = monthNames.firstIndex(where: { named(8, $0) }),
            let day = digits(5, 2), let year = digits(12, 4), let hour = digits(17, 2), let minute = digits(20, 2),
            let second = digits(23, 2), hour < 24, minute < 60, second <= 60
        else { return nil }
        return make(year: year, month: month + 1, day: day, time: hour * 3600 + minute * 60 + second)
    }

    private static let gmtName = Array("gmt".utf8)

    /// `Sun, 06 Nov 1994 08:49:37 GMT` after the comma and space.
    private static func imfFixdate(_ cursor: inout Cursor) -> Timestamp? {
        guard let day = cursor.number(minDigits: 1, maxDigits: 2), cursor.take(0x20),
            let month = month(cursor.letters()), cursor.take(0x20),
            let year = cursor.number(minDigits: 4, maxDigits: 4), cursor.take(0x20),
            let time = timeOfDay(&cursor), cursor.take(0x20), gmt(&cursor), cursor.atEnd
        else { return nil }
        return make(year: year, month: month, day: day, time: time)
    }

    /// `06-Nov-94 08:49:37 GMT` after the comma and space.
    private static func rfc850(_ cursor: inout Cursor, now: Timestamp?) -> Timestamp? {
        guard let day = cursor.number(minDigits: 1, maxDigits: 2), cursor.take(UInt8(ascii: "-")),
            let month = month(cursor.letters()), cursor.take(UInt8(ascii: "-"))
        else { return nil }
        let start = cursor.index
        guard var year = cursor.number(minDigits: 2, maxDigits: 4) else { return nil }
        let yearDigits = cursor.index - start
        guard yearDigits != 3, cursor.take(0x20),
            let time = timeOfDay(&cursor), cursor.take(0x20), gmt(&cursor), cursor.atEnd
        else { return nil }
        if yearDigits == 2 {
            if let now, now.secondsSince1970.isFinite {
                let seconds = min(max(now.secondsSince1970, -62_135_596_800), 253_402_300_799)  // years 1-9999
                let currentYear = civil(fromDays: Int((seconds / 86_400).rounded(.down))).year
                year += (currentYear / 100) * 100
                // A sliding window: at most 50 years ahead, otherwise the most recent past year.
                if year > currentYear + 50 {
                    year -= 100
                } else if year <= currentYear - 50 {
                    year += 100
                }
            } else {
                year += year < 70 ? 2000 : 1900
            }
        }
        return make(year: year, month: month, day: day, time: time)
    }

    /// `Nov  6 08:49:37 1994` after the day name and space.
    private static func asctime(_ cursor: inout Cursor) -> Timestamp? {
        guard let month = month(cursor.letters()), cursor.take(0x20) else { return nil }
        _ = cursor.take(0x20)  // a one-digit day is padded with a space
        guard let day = cursor.number(minDigits: 1, maxDigits: 2), cursor.take(0x20),
            let time = timeOfDay(&cursor), cursor.take(0x20),
            let year = cursor.number(minDigits: 4, maxDigits: 4), cursor.atEnd
        else { return nil }
        return make(year: year, month: month, day: day, time: time)
    }

    private static func month(_ letters: [UInt8]) -> Int? {
        monthNames.firstIndex(of: letters).map { $0 + 1 }
    }

    private static func gmt(_ cursor: inout Cursor) -> Bool {
        cursor.letters() == gmtName
    }

    private static func timeOfDay(_ cursor: inout Cursor) -> Int? {
        guard let hour = cursor.number(minDigits: 2, maxDigits: 2), cursor.take(UInt8(ascii: ":")),
            let minute = cursor.number(minDigits: 2, maxDigits: 2), cursor.take(UInt8(ascii: ":")),
            let second = cursor.number(minDigits: 2, maxDigits: 2),
            hour < 24, minute < 60, second <= 60  // 60: a leap second
        else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    private static func make(year: Int, month: Int, day: Int, time: Int) -> Timestamp? {
        guard year >= 1, year <= 9999, day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Timestamp(secondsSince1970: Double(days * 86_400 + time))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01.
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Formats `time` as an IMF-fixdate, rounding down to the second (RFC 9110 §5.6.7).
    /// Times outside years 1–9999 are clamped to that range.
    public static func format(_ time: Timestamp) -> String {
        let (days, secondsOfDay) = dayAndSecond(time, from: -62_135_596_800)  // 0001-01-01T00:00:00Z
        let (year, month, day) = civil(fromDays: days)
        let weekday = ((days % 7) + 7 + 3) % 7  // 1970-01-01 was a Thursday (index 3 from Monday)
        // Written byte by byte (29 of them): on a revalidation's path, where interpolation
        // cost several thousand instructions.
        return String(unsafeUninitializedCapacity: 29) { buffer in
            var end = 0
            func put(_ byte: UInt8) {
                buffer[end] = byte
                end += 1
            }
            func put(_ name: StaticString) {
                for byte in UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount) { put(byte) }
            }
            func put(_ number: Int, digits: Int) {
                var divisor = 1
                for _ in 1..<digits { divisor *= 10 }
                while divisor > 0 {
                    put(UInt8(ascii: "0") + UInt8(number / divisor % 10))
                    divisor /= 10
                }
            }
            put(imfDayNames[weekday])
            put(UInt8(ascii: ","))
            put(UInt8(ascii: " "))
            put(day, digits: 2)
            put(UInt8(ascii: " "))
            put(imfMonthNames[month - 1])
            put(UInt8(ascii: " "))
            put(year, digits: 4)
            put(UInt8(ascii: " "))
            put(secondsOfDay / 3600, digits: 2)
            put(UInt8(ascii: ":"))
            put(secondsOfDay / 60 % 60, digits: 2)
            put(UInt8(ascii: ":"))
            put(secondsOfDay % 60, digits: 2)
            put(" GMT")
            return end
        }
    }

    /// The names IMF-fixdate writes (RFC 9110 §5.6.7), as bytes.
    private static let imfDayNames: [StaticString] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let imfMonthNames: [StaticString] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// Formats `time` as ISO 8601 in UTC to the second, rounding down: `2026-12-02T10:00:00Z`
    /// (W3C-ISO8601, as `WARC-Date` and access logs write it), or to the millisecond with
    /// `milliseconds`: `2026-12-02T10:00:00.250Z` (RFC 3339 §5.6 `time-secfrac`). Times outside
    /// years 0–9999 are clamped to that range.
    public static func iso8601(_ time: Timestamp, milliseconds: Bool = false) -> String {
        let (days, secondsOfDay) = dayAndSecond(time, from: -62_167_219_200)  // 0000-01-01T00:00:00Z
        let (year, month, day) = civil(fromDays: days)
        var text =
            "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T"
            + "\(pad(secondsOfDay / 3600, 2)):\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2))"
        if milliseconds {
            let seconds = time.secondsSince1970
            let fraction = seconds.isFinite ? seconds - seconds.rounded(.down) : 0
            text += "." + pad(min(999, Int(fraction * 1000)), 3)
        }
        return text + "Z"
    }

    /// Formats `time` in UTC as the Common Log Format writes it (Apache's and nginx's
    /// `%d/%b/%Y:%H:%M:%S %z`), rounding down: `02/Dec/2026:10:00:00 +0000`. Times outside years
    /// 0–9999 are clamped to that range.
    public static func commonLogFormat(_ time: Timestamp) -> String {
        let (days, secondsOfDay) = dayAndSecond(time, from: -62_167_219_200)
        let (year, month, day) = civil(fromDays: days)
        return "\(pad(day, 2))/\(writtenMonthNames[month - 1])/\(pad(year, 4)):"
            + "\(pad(secondsOfDay / 3600, 2)):\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)) +0000"
    }

    private static let writtenMonthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The day since 1970-01-01 and the second of that day of `time` (rounded down), clamped
    /// to `start` … 9999-12-31T23:59:59Z.
    private static func dayAndSecond(_ time: Timestamp, from start: Double) -> (days: Int, second: Int) {
        let limit = 253_402_300_799.0  // 9999-12-31T23:59:59Z
        let clamped = time.secondsSince1970.isNaN ? 0 : min(max(time.secondsSince1970, start), limit)
        let total = Int(clamped.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        return (days, total - days * 86_400)
    }

    /// `n` in decimal, zero-padded to `width` digits.
    private static func pad(_ n: Int, _ width: Int) -> String {
        let digits = String(n)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    private struct Cursor {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func skipOWS() {
            while index < bytes.count, ASCII.isOWS(bytes[index]) { index += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// Letters, lowered.
        mutating func letters() -> [UInt8] {
            var out: [UInt8] = []
            while index < bytes.count, ASCII.isAlpha(bytes[index]), out.count < 10 {
                out.append(ASCII.lower(bytes[index]))
                index += 1
            }
            return out
        }

        mutating func number(minDigits: Int, maxDigits: Int) -> Int? {
            var value = 0
            var count = 0
            while index < bytes.count, ASCII.isDigit(bytes[index]), count < maxDigits {
                value = value * 10 + Int(bytes[index] - 0x30)
                index += 1
                count += 1
            }
            return count >= minDigits ? value : nil
        }
    }
}
