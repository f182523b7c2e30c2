import Testing

@testable import CacheSemantics

private func config(_ value: String) -> URLVariationConfig {
    URLVariationConfig(fields: ["No-Vary-Search": value])
}

@Suite("No-Vary-Search (draft-ietf-httpbis-no-vary-search)")
struct NoVarySearchTests {
    @Test(
        "§5.2 examples: valid values and their no-vary params and vary params",
        arguments: [
            ("params=(\"a\")", URLVariationConfig.Params.list(["a"]), URLVariationConfig.Params.wildcard),
            ("except=(\"x\")", .wildcard, .list(["x"])), ("params=()", .list([]), .wildcard),
            ("except=()", .wildcard, .list([])),
        ])
    func validExamples(value: String, noVary: URLVariationConfig.Params, vary: URLVariationConfig.Params) {
        let parsed = config(value)
        #expect(parsed.noVaryParams == noVary)
        #expect(parsed.varyParams == vary)
        #expect(parsed.varyOnKeyOrder)
    }

    @Test(
        "§5.2 examples: invalid values give the default URL variation config",
        arguments: [
            "key-order=\"not a boolean\"", "params=\"not an inner list\"", "params=(not-a-string)", "params=?0",
            "params=?1", "params=?1, except=(\"x\")", "params=(\"a\"), except=(\"x\")", "params=(), except=()",
            "except=\"not an inner list\"", "except=(not-a-string)", "except=?1",
        ])
    func invalidExamples(value: String) {
        #expect(config(value) == .default)
    }

    @Test(
        "§5.2 examples: unconventional values equal their conventional forms",
        arguments: [
            ("key-order=?1", "key-order"), ("except=(\"x\"), key-order", "key-order, except=(\"x\")"),
        ])
    func unconventionalExamples(value: String, conventional: String) {
        #expect(config(value) == config(conventional))
        #expect(!config(value).isDefault)
    }

    @Test("§5.2 examples: params=() and key-order=?0 are the default (as if the field were omitted)")
    func omittedForms() {
        #expect(config("params=()") == .default)
        #expect(config("key-order=?0") == .default)
        #expect(URLVariationConfig(fields: [:]) == .default)
        #expect(config("params=(\"a\"") == .default)  // not a dictionary at all
    }

    @Test("§5.1: unknown keys are ignored; key-order sets vary on key order to its negation")
    func unknownKeysIgnored() {
        let parsed = config("key-order, future=(\"z\"), params=(\"utm_source\")")
        #expect(!parsed.varyOnKeyOrder)
        #expect(parsed.noVaryParams == .list(["utm_source"]))
    }

    @Test("§5.3 example: params=(\"%C3%A9+%E6%B0%97\") is the key \"é 気\", and the URIs it names are equivalent")
    func parseKeyExample() {
        let parsed = config("params=(\"%C3%A9+%E6%B0%97\")")
        #expect(parsed.noVaryParams == .list(["é 気"]))
        let except = config("except=(\"%C3%A9+%E6%B0%97\")")
        let uris = [
            "https://example.com/?é 気=1", "https://example.com/?é+気=2", "https://example.com/?%C3%A9%20気=3",
            "https://example.com/?%C3%A9+%E6%B0%97=4",
        ]
        for uri in uris { #expect(parsed.equivalent(uri, "https://example.com/"), "\(uri)") }
        // With the key as the only one that matters, their values tell them apart.
        #expect(!except.equivalent(uris[0], uris[1]))
        #expect(except.equivalent(uris[0], "https://example.com/?%C3%A9+%E6%B0%97=1&other=x"))
    }

    @Test(
        "§6.1 examples: queries that parse alike are equivalent under any non-default config (key-order)",
        arguments: [
            ("https://example.com/", "https://example.com/?"),
            ("https://example.com/?a=x", "https://example.com/?%61=%78"),
            ("https://example.com/?a=é", "https://example.com/?a=%C3%A9"),
            ("https://example.com/?a=%f6", "https://example.com/?a=%ef%bf%bd"),
            ("https://example.com/?a=x&&&&", "https://example.com/?a=x"),
            ("https://example.com/?a=", "https://example.com/?a"),
            ("https://example.com/?a=%20", "https://example.com/?a= &"),
            ("https://example.com/?a=+", "https://example.com/?a= &"),
        ])
    func equivalenceExamples(first: String, second: String) {
        let keyOrder = config("key-order")
        #expect(keyOrder.equivalent(first, second))
        #expect(keyOrder.simplified(first) == keyOrder.simplified(second))
    }

    @Test("§6: with the default config, URLs that parse alike are still different unless their queries are equal")
    func defaultComparesQueries() {
        #expect(!URLVariationConfig.default.equivalent("https://example.com/a", "https://example.com/a?"))
        #expect(
            !URLVariationConfig.default.equivalent("https://example.com/foo?a=b&&&c", "https://example.com/foo?a=b&c="))
        #expect(URLVariationConfig.default.equivalent("https://example.com/a?x=1", "https://example.com/a?x=1"))
    }

    @Test("§2, §6: key-order, params and except as the introduction describes them")
    func introduction() {
        let keyOrder = config("key-order")
        #expect(keyOrder.equivalent("https://e.com/p?a=1&b=2", "https://e.com/p?b=2&a=1"))
        #expect(!keyOrder.equivalent("https://e.com/p?a=1&b=2", "https://e.com/p?a=1&b=3"))
        // Sorting is stable: values of one name keep their order.
        #expect(!keyOrder.equivalent("https://e.com/p?a=1&a=2", "https://e.com/p?a=2&a=1"))
        let utm = config("params=(\"utm_source\" \"utm_medium\" \"utm_campaign\")")
        #expect(utm.equivalent("https://e.com/p?id=1&utm_source=x", "https://e.com/p?utm_medium=y&id=1"))
        #expect(!utm.equivalent("https://e.com/p?id=1&utm_source=x", "https://e.com/p?utm_source=x&id=2"))
        #expect(!utm.equivalent("https://e.com/p?a=1&b=2", "https://e.com/p?b=2&a=1"))  // order still matters
        let product = config("except=(\"productId\")")
        #expect(product.equivalent("https://e.com/p?productId=7&ref=a", "https://e.com/p?session=9&productId=7"))
        #expect(!product.equivalent("https://e.com/p?productId=7", "https://e.com/p?productId=8"))
    }

    @Test("§6 step 1: scheme, user, host, port and path must match; normalization of the rest applies")
    func restMustMatch() {
        let any = config("except=()")
        #expect(any.equivalent("https://EXAMPLE.com:443/p?x=1", "https://example.com/p?y=2"))
        #expect(!any.equivalent("https://example.com/p?x=1", "http://example.com/p?x=1"))
        #expect(!any.equivalent("https://example.com/p?x=1", "https://example.com/q?x=1"))
        #expect(!any.equivalent("https://example.com/p", "https://example.com:8443/p"))
        #expect(!any.equivalent("https://a@example.com/p", "https://example.com/p"))
    }

    @Test("§7: simplified URIs are one canonical form of every equivalent URI")
    func simplifiedForms() {
        #expect(config("key-order").simplified("https://e.com/p?b=2&a=1") == "https://e.com/p?a=1&b=2")
        #expect(config("params=(\"utm\")").simplified("https://e.com/p?utm=1") == "https://e.com/p")
        #expect(config("except=(\"id\")").simplified("https://e.com/p?x=%7e&id=a+b") == "https://e.com/p?id=a+b")
        #expect(URLVariationConfig.pathKey("https://E.com/p?q") == "https://e.com/p")
    }
}
