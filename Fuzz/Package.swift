// swift-tools-version: 6.1
// libFuzzer targets for every CacheSemantics parser and the caching proxy's wire parsers.
// Built only by scripts/fuzz, with `-sanitize=fuzzer` (libFuzzer supplies `main`), so this is
// a package of its own.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder, which differs between checkouts.
let rootIdentity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

let parsers = [
    "FuzzCacheControl", "FuzzHTTPDate", "FuzzEntityTag", "FuzzVaryAndAge", "FuzzByteRanges", "FuzzStructuredFields",
    "FuzzURI", "FuzzStoredFacts", "FuzzEngine",
]
// The proxy's request head parser and chunked decoder, reached through CachingProxy's
// `@_spi(Fuzzing)` entry points (the parsers are internal).
let proxyParsers = ["FuzzRequestHead", "FuzzChunkedBody"]
let proxyTargets: [Target] = proxyParsers.map { name in
    .executableTarget(
        name: name,
        dependencies: [.product(name: "CachingProxy", package: rootIdentity), "FuzzSupport"],
        path: "Sources/\(name)",
        linkerSettings: [.unsafeFlags(["-use-ld=lld"])])
}

// The upstream client's response framing, alone and with the client over sockets, through
// CachingProxy's `UpstreamFuzzing`; what the answers should be is read by ResponseOracle, a
// reading of RFC 9112 that lives here, apart from the product.
let responseStream: [Target] = [
    .executableTarget(
        name: "FuzzResponseStream",
        dependencies: [
            .product(name: "CachingProxy", package: rootIdentity),
            .product(name: "CacheSemantics", package: rootIdentity), "FuzzSupport", "ResponseOracle",
        ],
        path: "Sources/FuzzResponseStream",
        linkerSettings: [.unsafeFlags(["-use-ld=lld"])]),
    .target(name: "ResponseOracle", path: "Sources/ResponseOracle"),
]

let package = Package(
    name: "CacheSemanticsFuzz",
    dependencies: [.package(path: "..")],
    targets: parsers.map { name in
        .executableTarget(
            name: name,
            dependencies: [.product(name: "CacheSemantics", package: rootIdentity), "FuzzSupport"],
            path: "Sources/\(name)",
            // gold fails with an internal error on these links; lld ships with the toolchain.
            linkerSettings: [.unsafeFlags(["-use-ld=lld"])])
    } + proxyTargets + responseStream
        + [.target(name: "FuzzSupport", dependencies: [.product(name: "CacheSemantics", package: rootIdentity)])],
    swiftLanguageModes: [.v6]
)
