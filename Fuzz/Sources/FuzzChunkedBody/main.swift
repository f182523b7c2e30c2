@_spi(Fuzzing) import CachingProxy
import FuzzSupport

/// Chunked request bodies as the proxy's server decodes them (RFC 9112 §7.1), in one piece
/// and in pieces, checked against the grammar; `WireParserFuzzing.chunkedBody(_:)` has the layout.
runFuzzer { data, size in
    WireParserFuzzing.chunkedBody(fuzzBytes(data, size))
    return 0
}
