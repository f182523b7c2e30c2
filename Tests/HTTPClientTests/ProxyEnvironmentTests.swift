#if os(Linux)
import HTTPClient
import Testing

/// Proxies from the environment, read as curl reads them (curl 7.86 and later for no_proxy).
@Suite("Proxies from the environment")
struct ProxyEnvironmentTests {
    struct Case: Sendable, CustomStringConvertible {
        var environment: [String: String]
        var url: (scheme: String, host: String)
        var expected: ProxyEnvironment.Route
        var description: String { "\(url.scheme)://\(url.host) with \(environment.sorted { $0.key < $1.key })" }
    }

    static func proxy(_ url: String, user: String? = nil, password: String? = nil) -> ProxyEnvironment.Route {
        .proxy(ProxyEnvironment.Server(url: url, user: user, password: password))
    }

    static let p = "http://proxy.test:3128"

    // MARK: Which variable

    static let variables: [Case] = [
        // http: http_proxy in lower case only (httpoxy: HTTP_PROXY is what a CGI client can set).
        Case(environment: ["http_proxy": p], url: ("http", "a.test"), expected: proxy(p)),
        Case(environment: ["HTTP_PROXY": p], url: ("http", "a.test"), expected: .direct),
        Case(
            environment: ["HTTP_PROXY": p, "ALL_PROXY": "http://all.test:1"], url: ("http", "a.test"),
            expected: proxy("http://all.test:1")),
        // https: lower case first, then upper case.
        Case(environment: ["https_proxy": p], url: ("https", "a.test"), expected: proxy(p)),
        Case(environment: ["HTTPS_PROXY": p], url: ("https", "a.test"), expected: proxy(p)),
        Case(
            environment: ["https_proxy": p, "HTTPS_PROXY": "http://upper.test:1"], url: ("https", "a.test"),
            expected: proxy(p)),
        // Each scheme its own variable.
        Case(environment: ["http_proxy": p], url: ("https", "a.test"), expected: .direct),
        Case(environment: ["https_proxy": p], url: ("http", "a.test"), expected: .direct),
        // all_proxy, then ALL_PROXY, when the scheme's own is not set.
        Case(environment: ["all_proxy": p], url: ("http", "a.test"), expected: proxy(p)),
        Case(environment: ["ALL_PROXY": p], url: ("https", "a.test"), expected: proxy(p)),
        Case(
            environment: ["all_proxy": p, "ALL_PROXY": "http://upper.test:1"], url: ("http", "a.test"),
            expected: proxy(p)),
        Case(
            environment: ["http_proxy": p, "all_proxy": "http://all.test:1"], url: ("http", "a.test"),
            expected: proxy(p)),
        // Set but empty: no proxy, and the search stops there.
        Case(environment: ["http_proxy": "", "all_proxy": p], url: ("http", "a.test"), expected: .direct),
        Case(environment: [:], url: ("http", "a.test"), expected: .direct),
    ]

    @Test("The variable curl reads for each scheme", arguments: variables)
    func variable(_ test: Case) {
        #expect(ProxyEnvironment(test.environment).route(scheme: test.url.scheme, host: test.url.host) == test.expected)
    }

    // MARK: no_proxy

    static let bypassing: [(noProxy: String, host: String, bypasses: Bool)] = [
        ("*", "anything.test", true),
        ("*", "127.0.0.1", true),
        ("example.com", "example.com", true),
        ("example.com", "www.example.com", true),
        ("example.com", "a.b.example.com", true),
        ("example.com", "notexample.com", false),
        ("example.com", "example.com.org", false),
        (".example.com", "example.com", true),
        (".example.com", "www.example.com", true),
        ("example.com.", "www.example.com", true),
        ("example.com", "www.example.com.", true),
        ("EXAMPLE.com", "Www.Example.COM", true),
        ("a.test, example.com", "example.com", true),
        ("a.test,,example.com", "example.com", true),
        ("a.test example.com", "example.com", true),
        ("a.test", "example.com", false),
        // Ports play no part.
        ("example.com:8080", "example.com", true),
        // IP addresses compare as addresses, networks in CIDR notation.
        ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", "127.0.0.2", false),
        ("127.0.0.0/8", "127.1.2.3", true),
        ("10.0.0.0/8", "11.0.0.1", false),
        ("192.168.0.0/16", "192.168.4.5", true),
        ("192.168.0.0/24", "192.168.4.5", false),
        ("10.1.2.3:80", "10.1.2.3", true),
        ("::1", "[::1]", true),
        ("::1", "::1", true),
        ("[::1]", "[::1]", true),
        ("fd00::/8", "[fd12:3456::1]", true),
        ("fd00::/8", "[fe80::1]", false),
        ("::1", "127.0.0.1", false),
        // A name does not match an address, nor a part of one.
        ("0.0.1", "127.0.0.1", false),
        ("localhost", "127.0.0.1", false),
        ("", "example.com", false),
    ]

    @Test("no_proxy as curl 7.86+ matches it", arguments: bypassing)
    func noProxy(noProxy: String, host: String, bypasses: Bool) {
        let environment = ProxyEnvironment(["no_proxy": noProxy, "http_proxy": Self.p])
        #expect(environment.bypasses(host: host) == bypasses)
        #expect(environment.route(scheme: "http", host: host) == (bypasses ? .direct : Self.proxy(Self.p)))
    }

    @Test("no_proxy in lower case first, else NO_PROXY")
    func noProxyNames() {
        #expect(ProxyEnvironment(["NO_PROXY": "a.test"]).bypasses(host: "a.test"))
        #expect(!ProxyEnvironment(["no_proxy": "b.test", "NO_PROXY": "a.test"]).bypasses(host: "a.test"))
        // Set but empty in lower case: used, and bypasses nothing.
        #expect(!ProxyEnvironment(["no_proxy": "", "NO_PROXY": "a.test"]).bypasses(host: "a.test"))
    }

    // MARK: The proxy's URL

    static let servers: [(value: String, expected: ProxyEnvironment.Route)] = [
        ("proxy.test:3128", proxy("http://proxy.test:3128")),
        ("http://proxy.test:3128/", proxy("http://proxy.test:3128")),
        ("HTTP://proxy.test:3128", proxy("http://proxy.test:3128")),
        ("http://proxy.test", proxy("http://proxy.test:1080")),
        ("http://[::1]:3128", proxy("http://[::1]:3128")),
        ("http://user:secret@proxy.test:8080", proxy("http://proxy.test:8080", user: "user", password: "secret")),
        ("http://us%40er:p%3Ass@proxy.test:8080", proxy("http://proxy.test:8080", user: "us@er", password: "p:ss")),
        ("http://user@proxy.test:8080", proxy("http://proxy.test:8080", user: "user")),
    ]

    @Test("A proxy is [http://][user[:password]@]host[:port], port 1080 by default as in curl", arguments: servers)
    func server(value: String, expected: ProxyEnvironment.Route) {
        #expect(ProxyEnvironment(["http_proxy": value]).route(scheme: "http", host: "a.test") == expected)
    }

    @Test(
        "A proxy that cannot be used is reported, never silently skipped",
        arguments: [
            "socks5://proxy.test:1080", "https://proxy.test:443", "http://", "http://a b:1", "http://u:%zz@p.test",
        ])
    func unusable(value: String) throws {
        let route = ProxyEnvironment(["https_proxy": value]).route(scheme: "https", host: "a.test")
        guard case .unusable(let variable, let reason) = route else {
            Issue.record("\(value) gave \(route)")
            return
        }
        #expect(variable == "https_proxy")
        #expect(!reason.isEmpty)
    }
}
#endif
