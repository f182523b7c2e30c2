import CacheSemantics
import CacheTestSupport

/// `CacheEngine.lookup` on a typical fresh response (the stored facts and the parsed request
/// made beforehand), as the semantics benchmark's "fresh hit".
func countLookups(iterations: Int) {
    let engine = CacheEngine()
    let uri = "https://api.example.com/v1/items?page=2"
    let prepared = CacheRequest(RequestHead(uri: uri, fields: Fixtures.typicalRequestFields))
    let candidates = [Fixtures.typicalStoredFacts(uri: uri, roundTrip: 0.120)]
    let now = Fixtures.epoch + 30
    guard case .serve = engine.lookup(prepared, candidates: candidates, now: now) else {
        fatalError("the typical response must be served fresh")
    }
    for _ in 0..<1_000 { consume(engine.lookup(prepared, candidates: candidates, now: now)) }
    Callgrind.startInstrumentation()
    countedRegion(iterations: iterations) { _ in
        consume(engine.lookup(prepared, candidates: candidates, now: now))
    }
    Callgrind.stopInstrumentation()
}

/// Consumes a decision without copying it: which action, as a cache reads first.
@inline(never)
private func consume(_ decision: LookupDecision) {
    switch decision {
    case .serve: blackHole(1)
    case .serveStaleWhileRevalidate: blackHole(2)
    case .forward: blackHole(3)
    case .gatewayTimeout: blackHole(4)
    }
}
