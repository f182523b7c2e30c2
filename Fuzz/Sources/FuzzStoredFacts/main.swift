import CacheSemantics
import FuzzSupport

/// Stored facts read back from arbitrary bytes (a corrupted store): never traps, and
/// whatever decodes re-encodes to bytes that decode to the same facts.
runFuzzer { data, size in
    let bytes = fuzzBytes(data, size)
    if let facts = StoredResponseFacts(serialized: bytes) {
        precondition(StoredResponseFacts(serialized: facts.serialized()) == facts)
        let engine = CacheEngine()
        let request = CacheRequest(RequestHead(uri: "https://example.com/"))
        _ = engine.lookup(request, candidates: [facts], now: facts.responseTime + 5)
    }
    return 0
}
