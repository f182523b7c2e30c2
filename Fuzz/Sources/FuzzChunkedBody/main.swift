import FuzzSupport
import RequestOracle

/// Chunked request bodies as the proxy's server decodes them (RFC 9112 §7.1), in one piece
/// and in pieces, checked against the grammar; `RequestOracle.chunkedBody(_:)` has the layout.
runFuzzer { data, size in
    RequestOracle.chunkedBody(fuzzBytes(data, size))
    return 0
}
