// swift-tools-version: 6.1
// libFuzzer targets for every CacheSemantics parser, the whole engine, the caching proxy's wire
// handling and OfflinePages' parsers. Built only by scripts/fuzz, with `-sanitize=fuzzer` (libFuzzer
// supplies `main`), so this is a package of its own. The lists below are the one list of fuzz
// targets: scripts/fuzz runs the executables this manifest declares.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder, which differs between checkouts.
let rootIdentity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

/// CacheSemantics' parsers and its engine.
let semantics = [
    "FuzzCacheControl", "FuzzHTTPDate", "FuzzEntityTag", "FuzzVaryAndAge", "FuzzByteRanges", "FuzzStructuredFields",
    "FuzzURI", "FuzzStoredFacts", "FuzzEngine", "FuzzTargetedFields", "FuzzCacheGroups", "FuzzNoVarySearch",
    "FuzzQueryContent",
]
/// The proxy's server-side wire parsers (HTTPWire's `@_spi(Wire)` codec, driven by
/// RequestOracle's `WireFuzzing`), checked by RequestOracle, a reading of RFC 9112 that lives
/// here, apart from the product.
let wire = ["FuzzRequestHead", "FuzzChunkedBody"]
/// The upstream client's framing (HTTPWire's `ResponseFramer`), alone and with the client over
/// sockets, plain and with TLS (HTTPClient's `@_spi(Fuzzing) FuzzingUpstreamClient`, CacheTLS
/// serving), checked by ResponseOracle.
let upstream = ["FuzzResponseStream"]
/// The proxy's HTTP/2 server (CachingProxy's `@_spi(Fuzzing) FuzzingHTTP2Server`) over a socket.
let http2 = ["FuzzHTTP2Server"]
/// The Redis store's RESP parser (CacheStorageRedis' `@_spi(Fuzzing)` RESP types).
let redis = ["FuzzRESP"]
/// The disk store's encrypted block reader (CacheStorage's `@_spi(Fuzzing) SealedBodyFuzzing`).
let storage = ["FuzzSealedBlocks"]
/// OfflinePages' parsers: HTML and CSS references, stylesheet decoding, WARC files and the HTTP
/// responses in their records.
let offline = ["FuzzPageReferences", "FuzzWARCReader"]

func fuzzer(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name, dependencies: dependencies + ["FuzzSupport"], path: "Sources/\(name)",
        // gold fails with an internal error on these links; lld ships with the toolchain.
        linkerSettings: [.unsafeFlags(["-use-ld=lld"])])
}

let package = Package(
    name: "CacheSemanticsFuzz",
    dependencies: [.package(path: "..")],
    targets: semantics.map { fuzzer($0, [.product(name: "CacheSemantics", package: rootIdentity)]) }
        + wire.map { fuzzer($0, ["RequestOracle"]) }
        + upstream.map {
            fuzzer(
                $0,
                [
                    .product(name: "HTTPClient", package: rootIdentity),
                    .product(name: "CacheTLS", package: rootIdentity),
                    .product(name: "HTTPWire", package: rootIdentity),
                    .product(name: "CacheSemantics", package: rootIdentity), "ResponseOracle",
                ])
        }
        + http2.map { fuzzer($0, [.product(name: "CachingProxy", package: rootIdentity)]) }
        + redis.map { fuzzer($0, [.product(name: "CacheStorageRedis", package: rootIdentity)]) }
        + storage.map { fuzzer($0, [.product(name: "CacheStorage", package: rootIdentity)]) }
        + offline.map { fuzzer($0, [.product(name: "OfflinePages", package: rootIdentity)]) }
        + [
            .target(name: "FuzzSupport", dependencies: [.product(name: "CacheSemantics", package: rootIdentity)]),
            .target(
                name: "RequestOracle",
                dependencies: [
                    "FuzzSupport", .product(name: "HTTPWire", package: rootIdentity),
                    .product(name: "CacheSemantics", package: rootIdentity),
                ]),
            .target(name: "ResponseOracle", path: "Sources/ResponseOracle"),
        ],
    swiftLanguageModes: [.v6]
)
