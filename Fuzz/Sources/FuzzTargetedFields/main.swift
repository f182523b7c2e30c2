import CacheSemantics
import FuzzSupport

/// Targeted cache-control fields read strictly (RFC 9213 §2.1): parsing never traps, and the
/// field is used exactly when it is a non-empty Structured Field Dictionary whose known
/// directives all have their types (an Integer ≥ 0 for lifetimes, Boolean true for flags,
/// Boolean true or a String for no-cache and private); otherwise Cache-Control applies.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    let engine = CacheEngine(configuration: .sharedCache(named: "edge"))
    let result = engine.effectiveDirectives(["Edge-Cache-Control": text, "Cache-Control": "max-age=1"])
    let expected = wellTyped(text)
    precondition(
        (result.targetedField != nil) == expected, "\(text.debugDescription): used \(result.targetedField ?? "-")")
    if expected == false { precondition(result.directives.maxAge == 1, "\(text.debugDescription): fallback lost") }
    return 0
}

/// The oracle: the type each known directive must have, checked on the parsed dictionary.
func wellTyped(_ text: String) -> Bool {
    guard let dictionary = StructuredFields.parseDictionary(text), !dictionary.isEmpty else { return false }
    for (key, member) in dictionary {
        let lifetimes = ["max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"]
        let flags = [
            "no-store", "must-revalidate", "proxy-revalidate", "public", "immutable", "must-understand", "no-transform",
        ]
        let known = lifetimes.contains(key) || flags.contains(key) || key == "no-cache" || key == "private"
        guard case .item(let item, _) = member else {
            if known { return false }
            continue
        }
        switch item {
        case .integer(let value) where lifetimes.contains(key): if value < 0 { return false }
        case .boolean(true) where !lifetimes.contains(key): continue
        case .string where key == "no-cache" || key == "private": continue
        default: if known { return false }
        }
    }
    return true
}
