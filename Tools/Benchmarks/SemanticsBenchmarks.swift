import CacheSemantics
import CacheTestSupport
import Foundation

/// ns/op for the engine's hot paths, with Foundation's DateFormatter (the usual way Swift code
/// parses HTTP dates) timed in the same run for comparison.
func runSemanticsBenchmarks() -> [Measurement] {
    let engine = CacheEngine()
    let request = RequestHead(uri: "https://api.example.com/v1/items?page=2", fields: Fixtures.typicalRequestFields)
    let response = ResponseHead(status: 200, fields: Fixtures.typicalResponseFields)
    let requestTime = Fixtures.epoch - 0.120
    let responseTime = Fixtures.epoch
    guard
        case .store(let stored) = engine.storageDecision(
            for: request, response: response, requestTime: requestTime, responseTime: responseTime)
    else { fatalError("the typical response must be storable") }
    let prepared = CacheRequest(request)
    let candidates = [stored.facts]
    let serialized = stored.facts.serialized()
    let now = responseTime + 30
    let staleNow = responseTime + 330

    /// Consumes a decision without copying it: which action, as a cache reads first.
    @inline(never)
    func consume(_ decision: LookupDecision) {
        switch decision {
        case .serve: blackHole(1)
        case .serveStaleWhileRevalidate: blackHole(2)
        case .forward: blackHole(3)
        case .gatewayTimeout: blackHole(4)
        }
    }

    var results: [Measurement] = []
    results.append(
        measure("store: typical response fields -> stored facts") {
            blackHole(
                engine.storageDecision(
                    for: request, response: response, requestTime: requestTime, responseTime: responseTime))
        })
    results.append(
        measure("lookup decision from stored facts (fresh hit)") {
            consume(engine.lookup(prepared, candidates: candidates, now: now))
        })
    results.append(
        measure("lookup decision from stored facts (stale-while-revalidate)") {
            consume(engine.lookup(prepared, candidates: candidates, now: staleNow))
        })
    results.append(
        measure("lookup incl. parsing the request (CacheRequest)") {
            consume(engine.lookup(CacheRequest(request), candidates: candidates, now: now))
        })
    results.append(
        measure("stored facts: decode from bytes") {
            blackHole(StoredResponseFacts(serialized: serialized))
        })
    results.append(
        measure("stored facts: encode to bytes") {
            blackHole(stored.facts.serialized())
        })
    let date = "Sun, 06 Nov 1994 08:49:37 GMT"
    results.append(
        measure("HTTP-date parse (HTTPDate.parse)") {
            blackHole(HTTPDate.parse(date))
        })
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
    precondition(formatter.date(from: date)?.timeIntervalSince1970 == HTTPDate.parse(date)?.secondsSince1970)
    results.append(
        measure("HTTP-date parse (Foundation DateFormatter, same run)", samples: 31, batch: 200) {
            blackHole(formatter.date(from: date))
        })
    let cacheControl = "public, max-age=300, stale-while-revalidate=60, stale-if-error=86400"
    results.append(
        measure("Cache-Control parse (4 directives)") {
            blackHole(ResponseCacheControl(CacheControl(cacheControl)))
        })
    return results
}
