import CacheSemantics
import FuzzSupport

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search): the input is a field value, then two
/// queries, on three lines. Parsing never traps; a config that is not the default compares
/// URIs reflexively and symmetrically, and two URIs are equivalent exactly when their
/// simplified forms (the store key) are equal, so a lookup by key finds what §6 calls equivalent.
runFuzzer { data, size in
    let parts = fuzzText(data, size).split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
    let value = parts.first.map(String.init) ?? ""
    let config = URLVariationConfig(fields: ["No-Vary-Search": value])
    guard !config.isDefault else { return 0 }
    let first = "https://example.com/p?" + (parts.count > 1 ? parts[1] : "")
    let second = "https://example.com/p?" + (parts.count > 2 ? parts[2] : "")
    for uri in [first, second] {
        precondition(config.equivalent(uri, uri), "not reflexive: \(value.debugDescription) \(uri.debugDescription)")
    }
    let equivalent = config.equivalent(first, second)
    precondition(equivalent == config.equivalent(second, first), "not symmetric: \(value.debugDescription)")
    let simplified = (config.simplified(first), config.simplified(second))
    precondition(
        equivalent == (simplified.0 != nil && simplified.0 == simplified.1),
        "\(value.debugDescription): \(first.debugDescription) ~ \(second.debugDescription) is \(equivalent), "
            + "simplified \(String(describing: simplified))")
    if let key = simplified.0 {
        precondition(config.equivalent(key, first), "\(value.debugDescription): \(key) is not equivalent to \(first)")
    }
    return 0
}
