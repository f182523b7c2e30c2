// swift-tools-version: 6.1
// The HTTP cache: RFC 9111 semantics, a durable store, the cache users hold,
// a caching proxy and the `httpcache` command-line tool. See README.md.
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

// OpenSSL's pkg-config: on Linux its C flags alone (its libraries are opened at run time, see
// COpenSSLLoaderHTTPCache), elsewhere its libraries too.
#if os(Linux)
let openSSLPackageConfig = Context.packageDirectory + "/Sources/COpenSSLHTTPCache/headers.pc"
#else
let openSSLPackageConfig = "openssl"
#endif

let package = Package(
    name: "swift-http-cache",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
    products: [
        .library(name: "CacheSemantics", targets: ["CacheSemantics"]),
        .library(name: "CacheStorage", targets: ["CacheStorage"]),
        .library(name: "CacheStorageRedis", targets: ["CacheStorageRedis"]),
        .library(name: "CacheExchange", targets: ["CacheExchange"]),
        .library(name: "HTTPCacheCore", targets: ["HTTPCacheCore"]),
        .library(name: "HTTPCaching", targets: ["HTTPCaching"]),
        .library(name: "OfflinePages", targets: ["OfflinePages"]),
        // Linux only: the server is built on epoll. Elsewhere the module is empty (its sources are
        // under `#if os(Linux)`), and `httpcache serve` says it needs Linux.
        .library(name: "CachingProxy", targets: ["CachingProxy"]),
        .library(name: "HTTPWire", targets: ["HTTPWire"]),
        // The upstream client, a product only so the fuzzers reach its `@_spi(Fuzzing)` entry point.
        .library(name: "HTTPClient", targets: ["HTTPClient"]),
        // TLS on OpenSSL 3, a product only so the fuzzers can serve TLS to that client.
        .library(name: "CacheTLS", targets: ["CacheTLS"]),
        .executable(name: "httpcache", targets: ["httpcache"]),
    ],
    targets: [
        // Pure RFC 9111 rules: values in, decisions out. No I/O, no clock, no Foundation.
        .target(
            name: "CacheSemantics", swiftSettings: strictSettings,
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]),
        // The floor under every other module: the one lock (a pthread mutex with a condition TSan
        // sees), the LRU, and the operating-system plumbing, written once for Glibc and Darwin.
        .target(name: "CacheSystem", swiftSettings: strictSettings),
        // SQLite from Debian's libsqlite3-dev, for CacheStorage's index. Never in public API.
        .systemLibrary(
            name: "CSQLiteHTTPCache", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // OpenSSL 3's headers (Debian's libssl-dev, Homebrew's openssl@3) for CacheTLS and CacheCrypto.
        // Never in public API. On Linux its libraries are not linked (headers.pc asks pkg-config for
        // openssl's C flags alone): COpenSSLLoaderHTTPCache opens them when they are first called.
        .systemLibrary(
            name: "COpenSSLHTTPCache", pkgConfig: openSSLPackageConfig,
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        // The OpenSSL functions the package calls, under their own names, each opening libssl.so.3
        // or libcrypto.so.3 on its first call (Linux), so that a program starts without them and
        // loads them only for TLS, a digest or an encrypted store. Apple platforms link OpenSSL.
        .target(name: "COpenSSLLoaderHTTPCache", dependencies: ["COpenSSLHTTPCache"]),
        // libnghttp2 (Debian's libnghttp2-dev, the library curl and Apache httpd use) for the proxy's
        // HTTP/2 server and the tests' HTTP/2 client. Never in public API.
        .systemLibrary(
            name: "CNGHTTP2HTTPCache", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["libnghttp2"])]),
        // TLS on OpenSSL 3 over a connected non-blocking socket, client and server side: chain and
        // host verification, SNI, ALPN, session resumption, close_notify told from a cut. Non-blocking
        // calls with a poll(2) layer on top, for our HTTP client and the tests' HTTPS origin.
        .target(
            name: "CacheTLS", dependencies: ["CacheSystem", "COpenSSLHTTPCache", "COpenSSLLoaderHTTPCache"],
            swiftSettings: strictSettings),
        // Hashes, HMAC and AES-256-GCM behind one small interface: OpenSSL's libcrypto on Linux (opened
        // by the first of them, as for TLS), CryptoKit on Apple platforms. Digest fields (RFC 9530)
        // and encryption at rest.
        .target(
            name: "CacheCrypto",
            dependencies: [
                .target(name: "COpenSSLHTTPCache", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSLLoaderHTTPCache", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // Where responses live: memory tier, SQLite index + body files.
        .target(
            name: "CacheStorage", dependencies: ["CacheSemantics", "CacheSystem", "CacheCrypto", "CSQLiteHTTPCache"],
            swiftSettings: strictSettings),
        // The same store on Redis or a Redis Cluster (its own RESP client): the shared tier of
        // several caches. A target of its own so that only those who want it link it.
        .target(
            name: "CacheStorageRedis",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheStorage", "CacheCrypto",
                .target(name: "CEpollHTTPCache", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // One request's way through a cache, for both hosts: a state machine (events in, actions
        // out), the store work it asks for, coalescing, background revalidation, served responses.
        .target(
            name: "CacheExchange", dependencies: ["CacheSemantics", "CacheSystem", "CacheStorage", "CacheCrypto"],
            swiftSettings: strictSettings),
        // The cache users hold, on Foundation alone (no FoundationNetworking, so a program on it
        // starts without libcurl): the exchange over a transport of its own request and response
        // values, policies, redirects, hooks, downloads, packs, statistics.
        .target(
            name: "HTTPCacheCore",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheStorage", "CacheExchange", "HTTPWire",
                .target(name: "HTTPClient", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // The same cache in URLRequest / HTTPURLResponse / URLSession terms (it re-exports
        // HTTPCacheCore): URLSessionTransport, CachingURLProtocol.
        .target(
            name: "HTTPCaching",
            dependencies: ["CacheSemantics", "CacheSystem", "CacheStorage", "CacheExchange", "HTTPCacheCore"],
            swiftSettings: strictSettings),
        // libxml2's tolerant HTML parser (Debian's libxml2-dev; in Apple's SDKs), for OfflinePages.
        // Its headers only: headers.pc asks for libxml-2.0's C flags and not its library, which
        // OfflinePages opens when it first parses a page (Linux) or links (Apple platforms).
        .systemLibrary(
            name: "CLibXML2HTTPCache", pkgConfig: Context.packageDirectory + "/Sources/CLibXML2HTTPCache/headers.pc",
            providers: [.apt(["libxml2-dev"]), .brew(["libxml2"])]),
        // zlib (Debian's zlib1g-dev; in Apple's SDKs): the gzip members of WARC files, the gzip and
        // deflate content codings.
        .systemLibrary(name: "CZlibHTTPCache", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        // zlib's inflate, once, for OfflinePages (WARC's gzip members) and HTTPClient (content codings).
        .target(name: "CacheZlib", dependencies: ["CZlibHTTPCache"], swiftSettings: strictSettings),
        // Brotli (Debian's libbrotli-dev): the decoder for the `br` content coding HTTPClient decodes
        // for apps (linked with it); the encoder's header for the dictionaries benchmark's `br` column,
        // which links libbrotlienc itself.
        .systemLibrary(
            name: "CBrotliHTTPCache", pkgConfig: "libbrotlidec",
            providers: [.apt(["libbrotli-dev"]), .brew(["brotli"])]),
        // Zstandard (Debian's libzstd-dev): the `dcz` content coding of Compression Dictionary
        // Transport (RFC 9842 §5), which the proxy makes and HTTPClient decodes. Never in public API.
        .systemLibrary(
            name: "CZstdHTTPCache", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        // libzstd with a raw dictionary as prefix, in and out of RFC 9842's `dcz` framing.
        .target(name: "CacheZstd", dependencies: ["CZstdHTTPCache"], swiftSettings: strictSettings),
        // Whole pages for offline reading: what a page needs (HTML through libxml2, CSS through a
        // CSS Syntax tokenizer), saved as named packs in the store, exported and imported as WARC.
        // A library of its own so that only apps that save pages link zlib and, on Apple platforms,
        // libxml2 (on Linux it is loaded when the first page is parsed).
        .target(
            name: "OfflinePages",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheStorage", "HTTPCacheCore", "CLibXML2HTTPCache", "CZlibHTTPCache",
                "CacheZlib",
            ],
            swiftSettings: strictSettings,
            linkerSettings: [
                .linkedLibrary("xml2", .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS, .macCatalyst]))
            ]),
        // A scriptable HTTP/1.1 origin on 127.0.0.1 that records every request: used by the
        // integration tests, the benchmarks and `httpcache demo`.
        // With a server context from CacheTLS it serves HTTPS.
        .target(
            name: "LoopbackOrigin",
            dependencies: [
                "CacheSystem", "CacheTLS", "HTTPWire",
                .target(name: "CEpollHTTPCache", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings
        ),
        // epoll and accept4 from glibc, which Swift's Glibc module does not cover. Headers only.
        .systemLibrary(name: "CEpollHTTPCache"),
        // The one HTTP/1.1 codec (RFC 9112), portable: request and response head parsers and
        // writers, chunked coding, reason phrases. A product only so the fuzzers (a package of
        // their own) reach it, through its `@_spi(Wire)` surface; nothing in it is public API.
        .target(name: "HTTPWire", dependencies: ["CacheSemantics"], swiftSettings: strictSettings),
        // The package's own HTTP/1.1 client: requests framed by HTTPWire over CacheSystem's sockets,
        // kept-alive connections pooled, every byte of the framing under its control (RFC 9112 §6.3),
        // TLS from CacheTLS for https. The proxy's upstream, and HTTPCache's transport on Linux, for
        // which it also decodes content codings (zlib, libbrotli) and reads proxies from the environment.
        .target(
            name: "HTTPClient",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheTLS", "HTTPWire", "CacheCrypto",
                .target(name: "CacheZlib", condition: .when(platforms: [.linux])),
                .target(name: "CBrotliHTTPCache", condition: .when(platforms: [.linux])),
                .target(name: "CacheZstd", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // The shared-cache HTTP proxy (`httpcache serve`): an HTTP/1.1 and HTTP/2 server on epoll, an
        // HTTP/1.1 upstream client of its own over POSIX sockets, and the engine and store in
        // shared mode.
        .target(
            name: "CachingProxy",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheStorage", "CacheExchange", "HTTPWire", "HTTPClient", "CacheTLS",
                .target(name: "CacheZstd", condition: .when(platforms: [.linux])),
                .target(name: "CEpollHTTPCache", condition: .when(platforms: [.linux])),
                .target(name: "CNGHTTP2HTTPCache", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // The CLI links HTTPCacheCore, not HTTPCaching: on Linux it fetches with the package's own
        // client and never loads FoundationNetworking (libcurl and all it pulls in cost a
        // short-lived process more than the work it does); on macOS through URLSession.
        .executableTarget(
            name: "httpcache",
            dependencies: [
                "CacheSystem", "CacheSemantics", "CacheStorage", "CacheExchange", "HTTPCacheCore", "HTTPWire",
                "CacheStorageRedis", "LoopbackOrigin", "OfflinePages",
                .target(name: "HTTPClient", condition: .when(platforms: [.linux])),
                .target(name: "CacheTLS", condition: .when(platforms: [.linux])),
                .target(name: "CachingProxy", condition: .when(platforms: [.linux])),
                .target(name: "HTTPCaching", condition: .when(platforms: [.macOS])),
            ],
            swiftSettings: strictSettings,
            // The toolchain links every executable with `-export-dynamic` (the static stdlib's
            // link arguments): its own 8,000 symbols in the dynamic symbol table, which the Swift
            // runtime's `dladdr` at start walks one by one (0.25M of a hit's 11.9M instructions).
            // Nothing looks symbols up in the executable (the libraries it opens at run time,
            // libssl, libcrypto and libxml2, need none of its), and a crash's backtrace reads the
            // file's own symbol table.
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux]))]),
        // Helpers shared by tests and benchmarks (fixtures, a manual clock).
        .target(
            name: "CacheTestSupport",
            dependencies: [
                "CacheSemantics", "CacheStorage", "CacheSystem", "CacheTLS", "COpenSSLHTTPCache", "CNGHTTP2HTTPCache",
                "LoopbackOrigin", "OfflinePages", .target(name: "CEpollHTTPCache", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // Tools/: executables of this repository, never products (a package that depends on this one
        // never builds them): the tests' child process, the benchmarks, bench-count, the soak and the
        // linkage probe. They stay targets of this package rather than a package of their own because
        // they share CacheTestSupport with the tests, which a second package could reach only if it
        // were a product.
        // A child process for the store's crash and multi-process tests.
        .executableTarget(
            name: "StorageStress", dependencies: ["CacheStorage", "CacheTestSupport"], path: "Tools/StorageStress",
            swiftSettings: strictSettings),
        // Release-mode benchmarks: `swift run -c release benchmarks` (not a product: dependents never see it).
        .executableTarget(
            name: "benchmarks",
            dependencies: [
                "CacheSystem", "CacheSemantics", "CacheStorage", "CacheStorageRedis", "CacheTestSupport", "HTTPCaching",
                "LoopbackOrigin", "OfflinePages", "CacheCrypto", "CacheZstd", "CBrotliHTTPCache", "CZlibHTTPCache",
                "HTTPWire", .target(name: "HTTPClient", condition: .when(platforms: [.linux])),
                .target(name: "CachingProxy", condition: .when(platforms: [.linux])),
            ],
            path: "Tools/Benchmarks", swiftSettings: strictSettings,
            // Brotli's encoder, for the dictionaries benchmark's `br` column; nothing else links it.
            linkerSettings: [.linkedLibrary("brotlienc")]),
        // Callgrind's client requests (valgrind/callgrind.h, from Debian's valgrind package) for
        // bench-count. Headers only; every call is a no-op when the headers are missing.
        .systemLibrary(name: "CCallgrindHTTPCache", path: "Tools/CCallgrindHTTPCache"),
        // Instruction counts of hot paths under callgrind, for scripts/bench-check (not a product).
        // Its main is synchronous: see Tools/BenchCount/main.swift for why.
        .executableTarget(
            name: "bench-count",
            dependencies: [
                "CacheSystem", "CacheSemantics", "CacheStorage", "CacheTestSupport", "HTTPCaching", "LoopbackOrigin",
                "CCallgrindHTTPCache", .target(name: "CachingProxy", condition: .when(platforms: [.linux])),
            ],
            path: "Tools/BenchCount", swiftSettings: strictSettings),
        // The soak (scripts/soak): httpcache serve under mixed traffic for minutes, every body checked;
        // with --redis-cluster, several on a Redis Cluster (CacheTestSupport starts it) under chaos.
        .executableTarget(
            name: "soak", dependencies: ["CacheSystem", "CacheTestSupport", "LoopbackOrigin"], path: "Tools/Soak",
            swiftSettings: strictSettings),
        // Links CacheSemantics alone so `scripts/check-linkage` can prove what it pulls in.
        .executableTarget(
            name: "LinkageProbe", dependencies: ["CacheSemantics"], path: "Tools/LinkageProbe",
            swiftSettings: strictSettings),
        // The floor's own tests: the lock, the LRU, the clock, sockets, errno texts, threads.
        .testTarget(name: "CacheSystemTests", dependencies: ["CacheSystem"], swiftSettings: strictSettings),
        // Known answers from the standards' own vectors, and every way a sealed block can be refused.
        .testTarget(name: "CacheCryptoTests", dependencies: ["CacheCrypto"], swiftSettings: strictSettings),
        .testTarget(
            name: "CacheSemanticsTests", dependencies: ["CacheSemantics", "CacheTestSupport"],
            swiftSettings: strictSettings),
        // The CacheStore contract is checked on every store, the Redis ones included (StoreKind).
        .testTarget(
            name: "CacheStorageTests", dependencies: ["CacheStorage", "CacheStorageRedis", "CacheTestSupport"],
            swiftSettings: strictSettings),
        // The Redis tier alone: its RESP client, addresses, claims among caches (real redis-server).
        .testTarget(
            name: "CacheStorageRedisTests",
            dependencies: ["CacheStorageRedis", "CacheStorage", "CacheSemantics", "CacheSystem", "CacheTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "CacheExchangeTests", dependencies: ["CacheExchange", "CacheSystem", "CacheTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "HTTPCachingTests",
            dependencies: ["HTTPCaching", "OfflinePages", "CacheStorageRedis", "LoopbackOrigin", "CacheTestSupport"],
            swiftSettings: strictSettings),
        // `httpcache` as users run it: the built binary against a loopback origin.
        .testTarget(
            name: "CLITests",
            dependencies: ["HTTPCaching", "LoopbackOrigin", "CacheTestSupport", "CacheSemantics", "CacheStorage"],
            // The HTTP/2 checker the tests run with PyPI's h2 (Checkers/h2_attacks.py).
            exclude: ["Checkers"],
            swiftSettings: strictSettings),
        // The CLI's own parts, reached with `@testable import httpcache`: the configuration file of
        // `serve` (its parser over any bytes, its mapping onto the options).
        .testTarget(name: "httpcacheTests", dependencies: ["httpcache"], swiftSettings: strictSettings),
        .testTarget(
            name: "OfflinePagesTests",
            dependencies: ["OfflinePages", "HTTPCaching", "LoopbackOrigin", "CacheTestSupport", "CacheStorage"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "LoopbackOriginTests", dependencies: ["LoopbackOrigin", "CacheTestSupport"],
            swiftSettings: strictSettings),
        // One table of cases through both hosts (HTTPCache in shared mode, the proxy): alike.
        .testTarget(
            name: "HostDifferentialTests",
            dependencies: [
                "HTTPCaching", "LoopbackOrigin", "CacheTestSupport",
                .target(name: "CachingProxy", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        // TLS on OpenSSL over real sockets: verification failures in words, SNI, ALPN, resumption,
        // close_notify, against the test CA's certificates, the TLS loopback origin and `openssl s_server`.
        .testTarget(
            name: "CacheTLSTests",
            dependencies: ["CacheTLS", "CacheSystem", "COpenSSLHTTPCache", "CacheTestSupport", "LoopbackOrigin"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "HTTPWireTests", dependencies: ["HTTPWire", "CacheSemantics"], swiftSettings: strictSettings),
        // The upstream client alone: what goes out, how responses are framed, the pool, tunnels
        // through proxies, TLS to origins (against the loopback origins), content decoding, proxies
        // from the environment.
        .testTarget(
            name: "HTTPClientTests",
            dependencies: [
                "CacheSemantics", "CacheSystem", "CacheTLS", "CacheTestSupport", "HTTPWire", "LoopbackOrigin",
                .target(name: "HTTPClient", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "CachingProxyTests",
            dependencies: [
                "LoopbackOrigin", "CacheTestSupport", "HTTPWire", "CacheCrypto", "CacheZstd",
                .target(name: "HTTPClient", condition: .when(platforms: [.linux])),
                .target(name: "CachingProxy", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
