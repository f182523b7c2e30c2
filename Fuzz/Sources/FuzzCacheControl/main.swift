import CacheSemantics
import FuzzSupport

/// Cache-Control, request and response interpretations, from arbitrary bytes.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    let parsed = CacheControl(text)
    let response = ResponseCacheControl(parsed)
    let request = RequestCacheControl(parsed)
    precondition(response.maxAge.map { $0 >= 0 && $0 <= deltaSecondsLimit } ?? true)
    precondition(request.minFresh.map { $0 >= 0 && $0 <= deltaSecondsLimit } ?? true)
    // Whatever was parsed serializes to a value that parses to the same directives.
    let reparsed = CacheControl(parsed.fieldValue)
    precondition(reparsed.directives == parsed.directives, "round trip changed \(text.debugDescription)")
    return 0
}
