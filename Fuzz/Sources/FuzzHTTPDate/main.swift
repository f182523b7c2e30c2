import CacheSemantics
import FuzzSupport

/// HTTP-date in all three formats: parsing never traps, and a parsed date formats to an
/// IMF-fixdate that parses back to the same second.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    let now = Timestamp(secondsSince1970: 1_700_000_000)
    for parsed in [HTTPDate.parse(text), HTTPDate.parse(text, now: now)].compactMap({ $0 }) {
        let formatted = HTTPDate.format(parsed)
        precondition(HTTPDate.parse(formatted) == parsed, "\(text.debugDescription) -> \(formatted)")
    }
    return 0
}
