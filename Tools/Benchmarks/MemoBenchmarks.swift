import CacheExchange
import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

// The memo suite: what the exchange remembers per key (ExchangeDriver's candidates, their
// decoded facts and the fields their answers start with), measured against what its byte
// bound charges, for a working set like scripts/proxy-bench's 20,000 URLs (nginx's heads,
// the proxy's Via and serializer). `httpcache serve` remembers keys in three quarters of
// `memoByteLimit`: 84 MiB at its default --memory of 256 MiB (ProxyHandler).
//   20,000 entries stored in a memory store (their heads are the store's, which the memo
//   shares), then every key answered once (a hit) through a driver: anonymous memory grown per key,
//   measured, against the bytes charged per key, and how many keys the proxy's default bound
//   holds at that charge.

/// A head as nginx answers `/set20000/N` (the benchmark's origin), as the proxy stores it.
private func proxyHead(_ number: Int) -> EntryHead {
    let url = "http://127.0.0.1:28081/set20000/\(number)"
    var fields: HeaderFields = [
        "Server": "nginx/1.22.1", "Content-Type": "application/octet-stream", "Content-Length": "1",
        "Connection": "keep-alive", "Accept-Ranges": "bytes", "Cache-Control": "max-age=3600",
    ]
    fields["Date"] = HTTPDate.format(Timestamp(secondsSince1970: 1_764_000_000 + Double(number % 60)))
    fields["Last-Modified"] = HTTPDate.format(Timestamp(secondsSince1970: 1_763_000_000))
    fields["ETag"] = "\"6930c6a0-4000\""
    let request = RequestHead(uri: url, fields: [:])
    let response = ResponseHead(status: 200, fields: fields)
    let now = Timestamp(secondsSince1970: 1_764_000_000)
    guard
        case .store(let stored) = CacheEngine(configuration: .sharedCache(named: "httpcache")).storageDecision(
            for: request, response: response, requestTime: now, responseTime: now)
    else { fatalError("the benchmark's response must be storable") }
    return EntryHead(primaryKey: url, url: url, status: 200, fields: fields, facts: stored.facts.serialized())
}

/// Measures and prints the memo's bytes per key; `false` when a key is charged less than it takes.
func runMemoBenchmarks() throws -> Bool {
    let keys = 20_000
    let store = MemoryStore(capacity: 1 << 40)
    for number in 0..<keys {
        let writer = try store.makeWriter(for: proxyHead(number))
        try writer.append([1])
        try writer.commit()
    }
    var configuration = ExchangeDriver.Configuration(
        engine: CacheEngine(configuration: .sharedCache(named: "httpcache")), name: "httpcache",
        clock: { 1_764_000_000 }, log: { print("benchmarks: \($0)") })
    // As the proxy: its Via on every stored answer, and the fields' bytes kept; room for all.
    (configuration.memoCapacity, configuration.memoByteLimit, configuration.trace) = (65_536, 3 << 30, nil)
    let via = HeaderField(name: "Via", value: "1.1 httpcache")
    configuration.storedFieldsTransform = { HeaderFields(Array($0) + [via]) }
    configuration.storedFieldsSerializer = { $0.serialized() }
    let driver = ExchangeDriver(store: store, configuration: configuration)
    let url = { (number: Int) in "http://127.0.0.1:28081/set20000/\(number)" }
    let before = residentBytes("RssAnon")
    var hits = 0
    for number in 0..<keys {
        // A hit, as the proxy makes it: the memo then holds what its answers start with too.
        let request = ExchangeRequest(head: RequestHead(uri: url(number)), primaryKey: url(number))
        var exchange = driver.exchange(for: request)
        if case .serve(let served, _) = driver.start(&exchange) {
            hits += 1
            blackHole(served)
        }
    }
    let grown = Double(residentBytes("RssAnon") - before) / Double(keys)
    let remembered = driver.rememberedKeys
    let charged = Double(remembered.bytes) / Double(max(1, remembered.count))
    let keyBytes = url(keys / 2).utf8.count
    let bound = (128 << 20) - (128 << 20) / 8
    let held = Int(Double(bound - bound / 4) / charged)
    print(
        "the exchange's memo, \(keys) keys of a proxy-bench working set (nginx heads; one-byte bodies): "
            + "+\(Int(grown)) B of memory per key remembered (its head shared with the store; the key \(keyBytes) B), "
            + "charged \(Int(charged)) B per key (\(String(format: "%.2f", charged / grown))x); "
            + "serve's default --memory 256M remembers up to \(held) keys at that charge")
    if hits != keys { print("  FAILED: \(keys - hits) of the \(keys) keys were not hits") }
    if charged < grown { print("  FAILED: a key is charged less than it takes") }
    return hits == keys && charged >= grown
}
