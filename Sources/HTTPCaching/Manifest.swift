import CacheExchange
import CacheLocking
import CacheSemantics
import CacheStorage
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A list of URLs never cached and URLs kept for offline use, in a text format modelled on
/// the HTML5 application cache manifest.
///
/// ```
/// HTTPCACHE MANIFEST
/// # Comments start with '#'. URLs may be relative to the base URL.
/// CACHE:
/// https://example.com/app.css
/// /offline.html
/// NETWORK:
/// https://example.com/api/live/*
/// ```
///
/// - The first line is `HTTPCACHE MANIFEST` (`CACHE MANIFEST` is accepted too).
/// - `CACHE:` lists URLs to fetch now, store and pin: eviction never removes them, and they
///   are served when the origin cannot be reached. A response the origin marked
///   not-storable is stored as `max-age=0` (validated whenever the origin is reachable).
///   Lines before any section header belong to `CACHE:`, as in HTML5.
/// - `NETWORK:` lists ``URLPattern``s (`*` matches any run of characters) that are never
///   cached: requests go straight to the origin (outcome `CacheOutcome.bypass`). A
///   NETWORK pattern wins over a CACHE URL. A pattern starting with `/` is resolved against
///   the base URL when there is one, and otherwise matches the path and query on any host.
/// - Blank lines and lines starting with `#` are ignored; anything else after the last
///   section header belongs to it. Other section headers (HTML5's `FALLBACK:`) are errors.
public struct CacheManifest: Hashable, Sendable {
    /// URLs to pre-fetch and pin.
    public var cache: [URL]
    /// Patterns never cached.
    public var network: [URLPattern]

    /// Creates a manifest.
    public init(cache: [URL] = [], network: [URLPattern] = []) {
        self.cache = cache
        self.network = network
    }

    /// Parses manifest text; relative URLs resolve against `baseURL`.
    public init(parsing text: String, baseURL: URL? = nil) throws(ManifestError) {
        self.init()
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if lines.first?.hasPrefix("\u{FEFF}") == true { lines[0].removeFirst() }
        guard let first = lines.first, first == "HTTPCACHE MANIFEST" || first == "CACHE MANIFEST" else {
            throw ManifestError(line: 1, message: "a manifest starts with the line HTTPCACHE MANIFEST")
        }
        enum Section { case cache, network }
        var section = Section.cache
        for (offset, line) in lines.enumerated().dropFirst() where !line.isEmpty && !line.hasPrefix("#") {
            let number = offset + 1
            switch line {
            case "CACHE:": section = .cache
            case "NETWORK:": section = .network
            case _ where line.hasSuffix(":") && !line.contains("/"):
                throw ManifestError(
                    line: number, message: "unknown section \(line); only CACHE: and NETWORK: are supported")
            default:
                switch section {
                case .cache:
                    guard let url = URL(string: line, relativeTo: baseURL)?.absoluteURL,
                        ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
                    else {
                        throw ManifestError(
                            line: number,
                            message:
                                "\(line) is not an http(s) URL\(baseURL == nil ? " (relative URLs need a base URL)" : "")"
                        )
                    }
                    cache.append(url)
                case .network:
                    if line.hasPrefix("/"), let baseURL, let resolved = URL(string: line, relativeTo: baseURL) {
                        network.append(URLPattern(resolved.absoluteString))
                    } else {
                        network.append(URLPattern(line))
                    }
                }
            }
        }
    }

    /// Reads and parses a manifest file.
    public init(contentsOfFile path: String, baseURL: URL? = nil) throws(ManifestError) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else {
            throw ManifestError(line: 0, message: "cannot read \(path) as UTF-8 text")
        }
        try self.init(parsing: text, baseURL: baseURL)
    }
}

/// A manifest that cannot be used: where and why.
public struct ManifestError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The 1-based line, 0 when the file could not be read.
    public var line: Int
    /// What is wrong.
    public var message: String

    public var description: String { line > 0 ? "manifest line \(line): \(message)" : "manifest: \(message)" }
}

/// What applying a manifest did.
public struct ManifestReport: Hashable, Sendable {
    /// CACHE URLs now stored and pinned, with how each was obtained.
    public var stored: [String: CacheOutcome] = [:]
    /// CACHE URLs that could not be stored, with why.
    public var failed: [String: String] = [:]
}

extension HTTPCache {
    /// Applies a manifest: its NETWORK patterns replace those of an earlier manifest, and
    /// every CACHE URL is fetched (through the cache), stored and pinned.
    public func apply(_ manifest: CacheManifest) async -> ManifestReport {
        let rules = manifest.network.map { CacheRule($0, .neverCache) }
        state.withLock { $0.manifestRules = rules }
        var report = ManifestReport()
        for url in manifest.cache {
            do {
                let result = try await data(for: URLRequest(url: url), forceStore: true)
                guard let prepared = try? prepare(URLRequest(url: url)), let key = prepared.primaryKey,
                    try store.setPinned(true, primaryKey: key) > 0 || !store.variants(of: key).isEmpty
                else {
                    let why = result.reasons.map(\.description).joined(separator: "; ")
                    report.failed[url.absoluteString] = "not stored (\(result.statusCode)): \(why)"
                    continue
                }
                report.stored[url.absoluteString] = result.outcome
            } catch {
                report.failed[url.absoluteString] = String(describing: error)
            }
        }
        return report
    }
}
