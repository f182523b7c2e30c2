import CacheSemantics
import FuzzSupport

/// QUERY content as its cache key holds it (RFC 10008 §2.7): the first byte picks the media
/// type, the rest is the content. Normalizing never traps, never grows the content, and is
/// idempotent (the normalized content keys as itself), so two requests that normalize alike
/// share one key whichever of them came first; JSON stays valid JSON.
runFuzzer { data, size in
    let bytes = fuzzBytes(data, size)
    guard let choice = bytes.first else { return 0 }
    let types = [
        "application/json", "application/problem+json; charset=UTF-8", "application/x-www-form-urlencoded",
        "text/plain", "Application/JSON ; a=\"b\\\"c\"",
    ]
    let fields: HeaderFields = ["Content-Type": types[Int(choice) % types.count]]
    let keyed = QueryContent(content: Array(bytes.dropFirst()), fields: fields)
    precondition(keyed.bytes.count <= bytes.count - 1, "normalization grew \(bytes.dropFirst())")
    let again = QueryContent(content: keyed.bytes, fields: fields)
    precondition(again.bytes == keyed.bytes, "not idempotent: \(bytes.dropFirst()) → \(keyed.bytes) → \(again.bytes)")
    precondition(keyed.normalization != .json || again.normalization == .json, "JSON did not stay JSON")
    precondition(again.mediaType == keyed.mediaType)
    return 0
}
