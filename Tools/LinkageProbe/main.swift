// Links CacheSemantics and nothing else, so `scripts/check-linkage` can show with `ldd` and
// `nm` that the engine pulls in neither Foundation(Networking) nor SQLite.
import CacheSemantics

let engine = CacheEngine()
let request = RequestHead(uri: "https://example.com/")
let response = ResponseHead(status: 200, fields: ["Cache-Control": "max-age=60"])
let now = Timestamp(secondsSince1970: 1_000_000_000)
if case .store(let stored) = engine.storageDecision(
    for: request, response: response, requestTime: now, responseTime: now)
{
    print(engine.lookup(CacheRequest(request), candidates: [stored.facts], now: now + 10).reasons)
}
