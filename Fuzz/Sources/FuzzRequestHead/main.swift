@_spi(Fuzzing) import CachingProxy
import FuzzSupport

/// Request heads as the proxy's server parses them (RFC 9112 §2–§6), in one piece and in
/// pieces, checked against the grammar; `WireParserFuzzing.requestHead(_:)` has the layout.
runFuzzer { data, size in
    WireParserFuzzing.requestHead(fuzzBytes(data, size))
    return 0
}
