import CacheSemantics
import FuzzSupport

/// Structured Field dictionaries and lists (RFC 9651), as targeted cache-control fields
/// use them: parsing never traps, and a parsed list serializes to text that parses back.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    _ = StructuredFields.parseDictionary(text)
    if let list = StructuredFields.parseList(text) {
        let serialized = list.map { member -> String in
            switch member {
            case .item(let item, let parameters):
                return StructuredFields.serialize(item) + StructuredFields.serialize(parameters)
            case .innerList(let items, let parameters):
                let inner = items.map { StructuredFields.serialize($0.0) + StructuredFields.serialize($0.1) }
                return "(" + inner.joined(separator: " ") + ")" + StructuredFields.serialize(parameters)
            }
        }.joined(separator: ", ")
        precondition(StructuredFields.parseList(serialized) != nil, "\(text.debugDescription) -> \(serialized)")
    }
    let engine = CacheEngine(configuration: .sharedCache)
    _ = engine.effectiveDirectives(["CDN-Cache-Control": text, "Cache-Control": "max-age=1"])
    return 0
}
