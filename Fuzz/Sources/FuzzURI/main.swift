import CacheSemantics
import FuzzSupport

/// Cache keys: normalization never traps and is idempotent; invalidation resolves
/// arbitrary Location references without trapping.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    if let normalized = CacheKey.normalize(text) {
        precondition(CacheKey.normalize(normalized) == normalized, "\(text.debugDescription) -> \(normalized)")
    }
    let engine = CacheEngine()
    let request = RequestHead(method: "POST", uri: "https://example.com/a/b?c")
    let response = ResponseHead(status: 201, fields: ["Location": text, "Content-Location": text])
    let uris = engine.invalidatedURIs(request: request, response: response)
    precondition(uris.first == "https://example.com/a/b?c")
    return 0
}
