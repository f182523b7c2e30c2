import FuzzSupport
import RequestOracle

/// Request heads as the proxy's server parses them (RFC 9112 §2–§6), in one piece and in
/// pieces, checked against the grammar; `RequestOracle.requestHead(_:)` has the layout.
runFuzzer { data, size in
    RequestOracle.requestHead(fuzzBytes(data, size))
    return 0
}
