// swift-tools-version: 6.1
// libFuzzer targets for every CacheSemantics parser. Built only by scripts/fuzz, with
// `-sanitize=fuzzer` (libFuzzer supplies `main`), so this is a package of its own.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder, which differs between checkouts.
let rootIdentity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

let parsers = [
    "FuzzCacheControl", "FuzzHTTPDate", "FuzzEntityTag", "FuzzVaryAndAge", "FuzzByteRanges", "FuzzStructuredFields",
    "FuzzURI", "FuzzStoredFacts", "FuzzEngine",
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
    } + [.target(name: "FuzzSupport", dependencies: [.product(name: "CacheSemantics", package: rootIdentity)])],
    swiftLanguageModes: [.v6]
)
