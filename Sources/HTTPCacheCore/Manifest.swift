import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// A list of URLs never cached and URLs kept for offline use, in a text format modelled on
/// the HTML5 application cache manifest.
///
/// ```
/// HTTPCACHE MANIFEST
/// # Comments start with '#'. URLs may be relative to the base URL.
/// CACHE:
/// https://example.com/app.css 3f2a9c
/// /offline.html
/// NETWORK:
/// https://example.com/api/live/*
/// ```
///
/// - The first line is `HTTPCACHE MANIFEST` (`CACHE MANIFEST` is accepted too).
/// - `CACHE:` lists URLs to fetch now, store and pin: eviction never removes them, and they
///   are served when the origin cannot be reached, whatever their freshness and directives.
///   A response the origin marked not-storable is stored as `max-age=0` (validated whenever
///   the origin is reachable). Lines before any section header belong to `CACHE:`, as in HTML5.
///   A URL may be followed by a revision (any word without white space), as in the precache
///   manifests of service-worker tool kits: applying a later manifest fetches again only the
///   URLs whose revision changed, keeps those whose revision did not without asking the
///   origin, and drops (unpins and removes) the URLs no longer listed.
/// - `NETWORK:` lists ``URLPattern``s (`*` matches any run of characters) that are never
///   cached: requests go straight to the origin (outcome `CacheOutcome.bypass`). A
///   NETWORK pattern wins over a CACHE URL. A pattern starting with `/` is resolved against
///   the base URL when there is one, and otherwise matches the path and query on any host.
/// - Blank lines and lines starting with `#` are ignored; anything else after the last
///   section header belongs to it. Other section headers (HTML5's `FALLBACK:`) are errors.
public struct CacheManifest: Hashable, Sendable {
    /// URLs to pre-fetch and pin.
    public var cache: [URL]
    /// The revisions given to CACHE URLs (absent for a URL without one).
    public var revisions: [URL: String]
    /// Patterns never cached.
    public var network: [URLPattern]

    /// Creates a manifest.
    public init(cache: [URL] = [], revisions: [URL: String] = [:], network: [URLPattern] = []) {
        self.cache = cache
        self.revisions = revisions
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
                    let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                    guard words.count <= 2 else {
                        throw ManifestError(
                            line: number,
                            message: "a CACHE line is a URL and at most one revision, not \(words.count) words")
                    }
                    let text = String(words[0])
                    guard let url = URL(string: text, relativeTo: baseURL)?.absoluteURL,
                        ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
                    else {
                        throw ManifestError(
                            line: number,
                            message:
                                "\(text) is not an http(s) URL\(baseURL == nil ? " (relative URLs need a base URL)" : "")"
                        )
                    }
                    cache.append(url)
                    if words.count == 2 { revisions[url] = String(words[1]) }
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
    /// CACHE URLs whose revision did not change since the last manifest applied: kept as
    /// stored, the origin not asked.
    public var unchanged: [String] = []
    /// CACHE URLs of the last manifest applied that this one no longer lists: unpinned and
    /// removed.
    public var dropped: [String] = []
    /// CACHE URLs that could not be stored, with why.
    public var failed: [String: String] = [:]
}

extension HTTPCache {
    /// The name of the offline pack a manifest's CACHE URLs make (``OfflinePack``): the last
    /// manifest applied, with each URL's revision.
    public static let manifestPackName = "manifest"

    /// Applies a manifest: its NETWORK patterns replace those of an earlier manifest, and
    /// every CACHE URL is fetched (through the cache), stored and pinned, as the offline pack
    /// named ``manifestPackName``. Against the last manifest applied (that pack): a URL whose
    /// revision is the same and still stored is kept without asking the origin; one whose
    /// revision changed is fetched again from the origin; one no longer listed is unpinned
    /// and removed, unless another pack holds it.
    public func apply(_ manifest: CacheManifest) async -> ManifestReport {
        let rules = manifest.network.map { CacheRule($0, .neverCache) }
        state.withLock { $0.manifestRules = rules }
        var report = ManifestReport()
        let previousPack = try? PackRecord.read(Self.manifestPackName, in: store)
        let previous = Dictionary(
            (previousPack?.resources ?? []).map { ($0.url, $0.revision ?? "") }, uniquingKeysWith: { $1 })
        var resources: [OfflinePack.Resource] = []
        for url in manifest.cache {
            let revision = manifest.revisions[url]
            if let revision, previous[url.absoluteString] == revision,
                let kept = ((try? entries(for: url)) ?? []).first(where: \.isComplete)
            {
                report.unchanged.append(url.absoluteString)
                resources.append(OfflinePack.Resource(kept, url: url, revision: revision))
                continue
            }
            do {
                // A revision that changed means the stored response is out of date, fresh or not.
                var request = FetchRequest(url: url)
                if revision != nil, previous[url.absoluteString] != nil {
                    request.cachePolicy = .reloadIgnoringLocalCacheData
                }
                let result = try await data(for: request, forceStore: true)
                guard pin(url) else {
                    let why = result.reasons.map(\.description).joined(separator: "; ")
                    report.failed[url.absoluteString] = "not stored (\(result.statusCode)): \(why)"
                    continue
                }
                report.stored[url.absoluteString] = result.outcome
                resources.append(
                    OfflinePack.Resource(
                        result.head, url: url, size: Int64(result.data.count), savedAt: configuration.clock(),
                        revision: revision))
            } catch {
                report.failed[url.absoluteString] = String(describing: error)
            }
        }
        let listed = Set(manifest.cache.map(\.absoluteString))
        let dropped = previous.keys.filter { !listed.contains($0) }.sorted()
        do {
            try PackRecord.write(
                OfflinePack(
                    name: Self.manifestPackName, page: manifest.cache.first?.absoluteString ?? "",
                    savedAt: configuration.clock(), resources: resources,
                    problems: report.failed.map { OfflinePack.Problem(url: $0.key, reason: $0.value, isFailure: true) }),
                to: store)
            // Its pin goes with it, unless another pack holds it.
            report.dropped = try removeUnused(dropped)
        } catch {
            configuration.log("could not record the manifest's pack: \(error); the next manifest fetches every URL")
        }
        return report
    }
}
