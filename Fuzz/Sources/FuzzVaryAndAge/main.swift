import CacheSemantics
import FuzzSupport

/// Header lines from arbitrary bytes through HeaderFields, Vary and the facts computation
/// (Age, Date, Expires, Last-Modified, ETag, Content-Length).
runFuzzer { data, size in
    let text = fuzzText(data, size)
    let fields = fuzzFields(Substring(text))
    let vary = Vary(fields: fields)
    precondition(vary.requestValues(fields).count == vary.fieldNames.count)
    let now = Timestamp(secondsSince1970: 1_700_000_000)
    for engine in [CacheEngine(), CacheEngine(configuration: .sharedCache)] {
        let (facts, _) = engine.makeFacts(
            status: 200, fields: fields, requestFields: fields, requestTime: now, responseTime: now + 1)
        precondition(facts.ageValue >= 0 && facts.ageValue <= Double(deltaSecondsLimit))
        precondition(facts.currentAge(at: now + 10) >= 0)
        precondition(StoredResponseFacts(serialized: facts.serialized()) == facts)
    }
    return 0
}
