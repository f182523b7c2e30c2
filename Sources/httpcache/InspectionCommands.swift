import CacheSemantics
import CacheStorage
import Foundation
import HTTPCacheCore

#if os(Linux)
import CachingProxy
#endif

/// A stored response's freshness in a few words: `fresh, 57 s left` or `stale by 3 s`.
func freshnessSummary(_ entry: CacheEntryInfo) -> String {
    guard let facts = entry.facts else { return "unreadable" }
    let remaining = facts.freshnessLifetime - entry.age
    return remaining > 0 ? "fresh, \(Format.seconds(remaining)) left" : "stale by \(Format.seconds(-remaining))"
}

/// Reads the stored entries, turning a storage error into a ``Failure``.
func storedEntries(_ read: () throws(StorageError) -> [CacheEntryInfo], in directory: String) throws(Failure)
    -> [CacheEntryInfo]
{
    do {
        return try read()
    } catch {
        throw Failure(.failure, "could not read the cache index in \(directory): \(error)")
    }
}

/// `httpcache ls [--json] [--partition NAME] [PREFIX]`.
struct ListCommand {
    static let name = "ls"
    static let summary = "list stored responses, most recently used first"
    static let specs = CacheOptions.specs + [.flag("--json"), .value("--partition")]
    static let help = """
        Usage: httpcache ls [PREFIX] [--partition NAME] [--json] [--cache-dir DIR]

        Lists the stored responses whose URL starts with PREFIX (all when omitted), most
        recently used first: status, body size, freshness now, hits, pinned, URL. When any
        of them is in a cache partition, a PARTITION column names it (- for none).

        Options:
          --partition NAME  list only the responses stored in the partition NAME
          --json            print one JSON array of objects: url, partition (null for none),
                            status, bodyBytes, fresh, age, freshnessLifetime, storedAt,
                            lastAccess, hits, pinned, memoryOnly
          --cache-dir DIR   the cache directory (default $HTTPCACHE_DIR, else
                            ~/.cache/httpcache)
          -h, --help        show this help
        """

    let prefix: String?
    let partition: String?
    let json: Bool
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        prefix = try arguments.positionals("PREFIX", minimum: 0, maximum: 1).first
        partition = try RequestOptions.partition(arguments)
        json = arguments.has("--json")
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        let entries = try storedEntries(
            { () throws(StorageError) in try cache.entries(urlPrefix: prefix) }, in: cacheOptions.directory
        )
        .filter { partition == nil || $0.partition == partition }
        if json {
            Console.out(JSONValue.array(entries.map(Self.json)).text + "\n")
            return
        }
        guard !entries.isEmpty else {
            let scope = (prefix.map { " under \($0)" } ?? "") + (partition.map { " in partition \($0)" } ?? "")
            Console.out("nothing stored\(scope) (cache directory \(cacheOptions.directory))\n")
            return
        }
        let partitioned = entries.contains { $0.partition != nil }
        var rows = [["STATUS", "SIZE", "FRESHNESS", "HITS", "PINNED"] + (partitioned ? ["PARTITION"] : []) + ["URL"]]
        for entry in entries {
            rows.append(
                [
                    // A body cut off and kept to be completed (RFC 9111 §3.3) is said to be one.
                    String(entry.status), Format.bytes(entry.bodySize) + (entry.isComplete ? "" : " (incomplete)"),
                    freshnessSummary(entry), String(entry.hits),
                    entry.isPinned ? "pinned" : "-",
                ] + (partitioned ? [entry.partition ?? "-"] : []) + [entry.url])
        }
        let bytes = entries.reduce(Int64(0)) { $0 + $1.bodySize }
        Console.out(Format.table(rows) + "\(Format.count(entries.count, "entry", "entries")), \(Format.bytes(bytes))\n")
    }

    static func json(_ entry: CacheEntryInfo) -> JSONValue {
        .object([
            ("url", .string(entry.url)),
            ("partition", .optional(entry.partition.map { .string($0) })),
            ("status", .int(entry.status)),
            ("bodyBytes", .int(entry.bodySize)),
            ("complete", .bool(entry.isComplete)),
            ("fresh", .bool(entry.isFresh)),
            ("age", .number(entry.age.rounded())),
            ("freshnessLifetime", .optional(entry.facts.map { .number($0.freshnessLifetime) })),
            ("storedAt", .string(Format.timestamp(entry.storedAt))),
            ("lastAccess", .string(Format.timestamp(entry.lastAccess))),
            ("hits", .int(entry.hits)),
            ("pinned", .bool(entry.isPinned)),
            ("memoryOnly", .bool(entry.isMemoryOnly)),
        ])
    }
}

/// `httpcache show URL`.
struct ShowCommand {
    static let name = "show"
    static let summary = "everything stored for a URL: fields, facts, freshness now, reasons"
    static let specs = CacheOptions.specs
    static let help = """
        Usage: httpcache show URL [--cache-dir DIR]

        Shows every stored response (each Vary variant) for GET URL: status, size, when stored
        and last used, hits, pinned, the stored fields, the facts the cache decides by
        (freshness lifetime and where it came from, Date, validators, Vary), whether it is fresh
        now, and why.

        Exit status 3 when nothing is stored for URL.
        """

    let url: URL
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        url = try RequestOptions.url(try arguments.positionals("URL", minimum: 1, maximum: 1)[0], command: Self.name)
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        let entries = try storedEntries(
            { () throws(StorageError) in try cache.entries(for: url) }, in: cacheOptions.directory)
        guard !entries.isEmpty else {
            throw Failure(
                .notStored,
                "nothing stored for \(url.absoluteString); fetch it with `httpcache get \(url.absoluteString)`")
        }
        var text = ""
        for (index, entry) in entries.enumerated() {
            if entries.count > 1 { text += "── variant \(index + 1) of \(entries.count)\n" }
            text += Self.describe(entry, now: Date().timeIntervalSince1970)
            if index < entries.count - 1 { text += "\n" }
        }
        Console.out(text)
    }

    static func describe(_ entry: CacheEntryInfo, now: Double) -> String {
        var rows: [[String]] = [
            ["URL:", entry.url],
            ["Status:", Report.statusLine(entry.status).dropFirst(9).description],
            ["Body:", "\(Format.bytes(entry.bodySize)) (\(entry.bodySize) bytes)"],
            ["Freshness:", freshnessSummary(entry)],
            ["Stored:", "\(Format.timestamp(entry.storedAt)) (\(Format.seconds(now - entry.storedAt)) ago)"],
            ["Last used:", "\(Format.timestamp(entry.lastAccess)) (\(Format.seconds(now - entry.lastAccess)) ago)"],
            ["Hits:", String(entry.hits)],
            ["Pinned:", entry.isPinned ? "yes (eviction skips it)" : "no"],
            ["Where:", entry.isMemoryOnly ? "memory only" : "disk"],
        ]
        if let facts = entry.facts {
            rows += [
                ["Lifetime:", Explanation.lifetime(facts)],
                ["Age now:", Format.seconds(entry.age)],
                ["Date:", HTTPDate.format(facts.date)],
                ["ETag:", facts.entityTag?.description ?? "none"],
                ["Last-Modified:", facts.lastModified.map(HTTPDate.format) ?? "none"],
                ["Vary:", Explanation.vary(facts)],
                ["Digest:", Explanation.digest(facts, fields: entry.fields)],
            ]
            let directives = Explanation.notableDirectives(facts)
            if !directives.isEmpty { rows.append(["Directives:", directives.joined(separator: ", ")]) }
        }
        var text = Format.table(rows)
        text += "Fields:\n"
        for field in entry.fields { text += "  \(field.name): \(field.value)\n" }
        text += "Why:\n"
        for reason in entry.reasons { text += "  - \(reason)\n" }
        return text
    }
}

/// `httpcache purge URL | --prefix P | --group NAME | --partition NAME [URL] | --all`.
struct PurgeCommand {
    static let name = "purge"
    static let summary = "remove stored responses"
    static let specs =
        CacheOptions.specs + [
            .value("--prefix"), .flag("--all"), .value("--proxy"), .value("--admin-token"), .value("--group"),
            .value("--origin"), .value("--partition"),
        ]
    static let help = """
        Usage: httpcache purge URL | --prefix PREFIX | --group NAME [--origin URL]
                               | --partition NAME [URL] | --all [--cache-dir DIR]
               httpcache purge --proxy http://HOST:PORT URL [--admin-token TOKEN]
               httpcache purge --proxy http://HOST:PORT --group NAME [URL] [--admin-token TOKEN]

        Removes the stored responses for GET URL (every Vary variant), or those whose URL
        starts with PREFIX, or everything, and says how many were removed (0 is not an error).
        --group removes the responses whose Cache-Groups field lists NAME (RFC 9875), of
        every origin, or only of the origin (scheme, host, port) of --origin URL.
        --partition removes every response stored in the cache partition NAME, with its
        body files; with URL, only URL's responses in that partition. (URL, --prefix and
        --group alone act outside partitions, and --all on every partition.)
        With --proxy, asks a running `httpcache serve` to remove URL's responses (a PURGE
        request; allowed from loopback, else with the proxy's admin token, also read from
        $HTTPCACHE_ADMIN_TOKEN); with --group, those of URL's origin in the group (URL
        defaults to the proxy's own origin, right for a reverse proxy).
        """

    enum Target {
        case url(URL)
        case prefix(String)
        case group(String, origin: URL?)
        /// A partition's stored responses: all, or those for one URL.
        case partition(String, url: URL?)
        case all
        /// A running proxy's stored responses for a URL, or for cache groups of its origin.
        case proxy(proxy: String, url: String, token: String?, groups: [String])
    }

    let target: Target
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        let urls = try arguments.positionals("URL", minimum: 0, maximum: 1)
        let group = arguments.value("--group")
        if let group {
            // A group is a Structured Field String (RFC 9651 §3.3.3): printable ASCII.
            guard !group.isEmpty, group.utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else {
                throw .usage(Self.name, "--group needs a group name of printable ASCII, as Cache-Groups lists it")
            }
        }
        if let proxy = arguments.value("--proxy") {
            guard let url = urls.first ?? group.map({ _ in proxy + "/" }), arguments.value("--prefix") == nil,
                !arguments.has("--all"), arguments.value("--origin") == nil, arguments.value("--partition") == nil
            else {
                throw .usage(
                    Self.name,
                    "--proxy purges one URL or a group: httpcache purge --proxy http://HOST:PORT URL | --group NAME [URL]"
                )
            }
            target = .proxy(
                proxy: proxy, url: url,
                token: arguments.value("--admin-token") ?? ProcessInfo.processInfo.environment["HTTPCACHE_ADMIN_TOKEN"],
                groups: group.map { [$0] } ?? [])
            cacheOptions = try CacheOptions(arguments)
            return
        }
        let prefix = arguments.value("--prefix")
        if let partition = try RequestOptions.partition(arguments) {
            guard prefix == nil, group == nil, !arguments.has("--all"), arguments.value("--origin") == nil else {
                throw .usage(
                    Self.name, "--partition NAME goes alone or with a URL: httpcache purge --partition NAME [URL]")
            }
            target = .partition(
                partition,
                url: try urls.first.map { url throws(Failure) in try RequestOptions.url(url, command: Self.name) })
            cacheOptions = try CacheOptions(arguments)
            return
        }
        let chosen = [!urls.isEmpty, prefix != nil, group != nil, arguments.has("--all")].filter { $0 }.count
        guard chosen == 1 else {
            throw .usage(
                Self.name,
                chosen == 0
                    ? "say what to remove: URL, --prefix PREFIX, --group NAME, --partition NAME or --all"
                    : "give only one of URL, --prefix, --group, --all")
        }
        if arguments.value("--origin") != nil && group == nil {
            throw .usage(Self.name, "--origin goes with --group NAME")
        }
        if let group {
            target = .group(
                group,
                origin: try arguments.value("--origin").map { origin throws(Failure) in
                    try RequestOptions.url(origin, command: Self.name)
                })
        } else if let url = urls.first {
            target = .url(try RequestOptions.url(url, command: Self.name))
        } else if let prefix {
            guard !prefix.isEmpty else {
                throw .usage(Self.name, "--prefix needs a non-empty prefix (use --all for everything)")
            }
            target = .prefix(prefix)
        } else {
            target = .all
        }
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        if case .proxy(let proxy, let url, let token, let groups) = target {
            #if os(Linux)
            let answer: CachingProxy.PurgeAnswer
            do {
                answer = try CachingProxy.purge(url, proxy: proxy, token: token, groups: groups)
            } catch {
                throw Failure(.failure, "\(error)")
            }
            guard answer.status == 200 || answer.status == 404 else {
                throw Failure(.failure, "the proxy at \(proxy) refused: \(answer.status) \(answer.message)")
            }
            Console.out(answer.message + "\n")
            return
            #else
            _ = (proxy, url, token, groups)
            throw Failure(.failure, "purge --proxy needs Linux, as httpcache serve does; purge on the proxy's host")
            #endif
        }
        let cache = try cacheOptions.open(network: false)
        do {
            switch target {
            case .proxy: break
            case .url(let url):
                let removed = try cache.remove(url: url)
                Console.out("removed \(Format.count(removed, "stored response")) for \(url.absoluteString)\n")
            case .prefix(let prefix):
                let removed = try cache.remove(urlPrefix: prefix)
                Console.out("removed \(Format.count(removed, "stored response")) under \(prefix)\n")
            case .group(let group, let origin):
                let removed = try cache.remove(group: group, origin: origin)
                let place = origin.flatMap { CacheGroups.origin(of: $0.absoluteString) } ?? "every origin"
                Console.out(
                    "removed \(Format.count(removed, "stored response")) in cache group \"\(group)\" of \(place)\n")
            case .partition(let partition, let url):
                if let url {
                    let removed = try cache.remove(url: url, partition: partition)
                    Console.out(
                        "removed \(Format.count(removed, "stored response")) for \(url.absoluteString) "
                            + "in partition \(partition)\n")
                } else {
                    let removed = try cache.remove(partition: partition)
                    Console.out("removed \(Format.count(removed, "stored response")) in partition \(partition)\n")
                }
            case .all:
                let count = cache.totals.all.entries
                try cache.removeAll()
                Console.out("removed \(Format.count(count, "stored response")): the cache is empty\n")
            }
        } catch {
            throw Failure(.failure, "could not remove from the cache in \(cacheOptions.directory): \(error)")
        }
    }
}

/// `httpcache pin URL` and `httpcache unpin URL`.
struct PinCommand {
    static let specs = CacheOptions.specs

    static func summary(pinning: Bool) -> String {
        pinning
            ? "keep a URL's stored responses for offline use: never evicted, served when the origin is down"
            : "let eviction remove a URL's stored responses again"
    }

    static func help(pinning: Bool) -> String {
        let name = pinning ? "pin" : "unpin"
        let effect =
            pinning
            ? "Pins the stored responses for GET URL: saved for offline use. Eviction never removes\n"
                + "them, and when the origin cannot be reached they are served whatever their freshness\n"
                + "and directives (no-cache, must-revalidate). While it can be, they are revalidated as\n"
                + "any stored response; purge still removes them."
            : "Unpins the stored responses for GET URL: eviction may remove them again."
        return """
            Usage: httpcache \(name) URL [--cache-dir DIR]

            \(effect)

            Exit status 3 when nothing is stored for URL (fetch it first with httpcache get URL).
            """
    }

    let url: URL
    let pinning: Bool
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments, pinning: Bool) throws(Failure) {
        self.pinning = pinning
        url = try RequestOptions.url(
            try arguments.positionals("URL", minimum: 1, maximum: 1)[0], command: arguments.command)
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        let stored: Int
        do {
            // The write first: it waits for what another process queued (`serve` writes its
            // index commits behind, up to 50 ms), so an entry it just stored is found.
            _ = try cache.setPinned(pinning, url: url)
            stored = try cache.entries(for: url).count
        } catch {
            throw Failure(.failure, "could not change the cache in \(cacheOptions.directory): \(error)")
        }
        guard stored > 0 else {
            throw Failure(
                .notStored,
                "nothing stored for \(url.absoluteString); fetch it first with `httpcache get \(url.absoluteString)`")
        }
        Console.out(
            "\(pinning ? "pinned" : "unpinned") \(Format.count(stored, "stored response")) for \(url.absoluteString)\n")
    }
}

/// `httpcache stats [--json] [--reset]`.
struct StatsCommand {
    static let name = "stats"
    static let summary = "entries and bytes stored, outcome counts, hit ratio"
    static let specs = CacheOptions.specs + [.flag("--json"), .flag("--reset")]
    static let help = """
        Usage: httpcache stats [--json] [--reset] [--cache-dir DIR]

        Shows what the cache holds (entries, body bytes, pinned bytes; the disk tier, since the
        memory tier lives only as long as one process) and what `get` and `explain` have done
        with this cache directory: hit, miss, revalidated, stale and bypass counts, errors, the
        hit ratio (responses whose body came from the cache: hit, revalidated and stale, over
        all responses) and bytes served from the cache. The counts are kept in
        <cache directory>/cli-stats.json.

        Options:
          --json           print one JSON object instead
          --reset          set the counts to zero (stored responses are kept)
          --cache-dir DIR  the cache directory (default $HTTPCACHE_DIR, else ~/.cache/httpcache)
        """

    let json: Bool
    let reset: Bool
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        _ = try arguments.positionals("nothing", minimum: 0, maximum: 0)
        json = arguments.has("--json")
        reset = arguments.has("--reset")
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        let directory = cacheOptions.directory
        if reset {
            try PersistentStatistics.update(in: directory) {
                $0 = PersistentStatistics(since: Date().timeIntervalSince1970)
            }
            if !json { Console.out("outcome counts reset\n") }
        }
        let counts = try PersistentStatistics.read(in: directory)
        let totals = cache.totals
        let disk = totals.disk ?? totals.all
        let statistics = counts.statistics
        let responses =
            statistics.hits + statistics.misses + statistics.revalidated + statistics.stale + statistics.bypassed
        if json {
            func tier(_ totals: StoreTotals?) -> JSONValue {
                guard let totals else { return .null }
                return .object([
                    ("entries", .int(totals.entries)), ("bodyBytes", .int(totals.bodyBytes)),
                    ("pinnedBytes", .int(totals.pinnedBytes)),
                ])
            }
            let value: JSONValue = .object([
                ("directory", .string(directory)),
                ("entries", .int(totals.all.entries)),
                ("bodyBytes", .int(totals.all.bodyBytes)),
                ("pinnedBytes", .int(totals.all.pinnedBytes)),
                ("tiers", .object([("disk", tier(totals.disk)), ("memory", tier(totals.memory))])),
                ("since", .string(Format.timestamp(counts.since))),
                ("responses", .int(responses)),
                (
                    "outcomes",
                    .object([
                        ("hit", .int(statistics.hits)), ("miss", .int(statistics.misses)),
                        ("revalidated", .int(statistics.revalidated)), ("stale", .int(statistics.stale)),
                        ("bypass", .int(statistics.bypassed)),
                    ])
                ),
                ("errors", .int(statistics.errors)),
                ("collapsed", .int(statistics.collapsed)),
                ("hitRatio", .number(statistics.hitRatio)),
                ("bytesServedFromCache", .int(statistics.bytesServedFromCache)),
                ("bytesSavedByRevalidation", .int(statistics.bytesSavedByRevalidation)),
                ("bytesFromOrigin", .int(counts.bytesFromOrigin)),
            ])
            Console.out(value.text + "\n")
            return
        }
        let rows: [[String]] = [
            ["Cache directory:", directory],
            [
                "Stored (disk):",
                "\(Format.count(disk.entries, "entry", "entries")), \(Format.bytes(disk.bodyBytes)) of bodies, "
                    + "\(Format.bytes(disk.pinnedBytes)) pinned",
            ],
            ["Memory tier:", "per process; empty between runs of this tool"],
            ["Counted since:", Format.timestamp(counts.since)],
            ["Responses:", String(responses)],
            [
                "Outcomes:",
                "hit \(statistics.hits), miss \(statistics.misses), revalidated \(statistics.revalidated), "
                    + "stale \(statistics.stale), bypass \(statistics.bypassed); errors \(statistics.errors)",
            ],
            ["Hit ratio:", "\(Format.percent(statistics.hitRatio)) (bodies from the cache: hit, revalidated, stale)"],
            ["From the cache:", Format.bytes(statistics.bytesServedFromCache)],
            ["Saved by 304s:", Format.bytes(statistics.bytesSavedByRevalidation)],
            ["From origins:", Format.bytes(counts.bytesFromOrigin)],
        ]
        Console.out(Format.table(rows))
    }
}
