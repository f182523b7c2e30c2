@_spi(Fuzzing) import CachingProxy
import FuzzSupport

/// Origin response heads line by line, as libcurl hands them to the proxy (RFC 9112 §4–§6),
/// checked against the grammar; see `WireParserFuzzing.responseHead(_:)`.
runFuzzer { data, size in
    WireParserFuzzing.responseHead(fuzzBytes(data, size))
    return 0
}
