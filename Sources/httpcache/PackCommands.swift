import Foundation
import HTTPCacheCore
import OfflinePages

/// `httpcache save URL [--name NAME] [--depth N] [--third-party] [--max-bytes N] [--jobs N]`.
struct SaveCommand {
    static let name = "save"
    static let summary = "save a page with everything it needs for offline reading (an offline pack)"
    static let specs =
        CacheOptions.specs + Network.specs + [
            .value("--name"), .value("--depth"), .flag("--third-party"), .value("--max-bytes"), .value("--jobs"),
        ]
    static let help = """
        Usage: httpcache save URL [--name NAME] [--depth N] [--third-party] [--max-bytes N]
                              [--jobs N] [--cacert FILE] [--cache-dir DIR]

        Saves the page at URL and every subresource a browser loads to render it (images and
        srcset candidates, stylesheets and what they import, fonts, scripts, icons, media,
        frames and their documents), stores and pins them, and records them as an offline
        pack: `httpcache packs` lists packs. With the origin unreachable, every resource of a
        pack is served from the cache whatever its freshness (httpcache get, HTTPCache,
        CachingURLProtocol, httpcache serve --forward).

        Options:
          --name NAME      the pack's name (default: URL); saving again under a name replaces it
          --depth N        also save the pages the page links to, N levels deep (default 0)
          --third-party    also save resources and linked pages from other origins, and
                           follow redirects to them (default: only URL's origin; the others
                           are reported as skipped). Link-local and unspecified addresses
                           (169.254.0.0/16, 0.0.0.0, fe80::/10, ::) are never fetched.
          --max-bytes N    skip any resource larger than N bytes (default: no limit)
          --jobs N         resources fetched at once (default 6)

        On a terminal a progress line shows resources done/found and bytes. At the end: the
        resources and bytes saved, then each resource that failed or was skipped, with why.
        Exit status 1, and no pack made, when the page itself cannot be saved (an HTTP error,
        the network, more than 10 redirects, a redirect to another origin without
        --third-party).
        """

    let url: URL
    let options: SaveOptions
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        url = try RequestOptions.url(
            try arguments.positionals("URL", minimum: 1, maximum: 1)[0], command: arguments.command)
        var options = SaveOptions()
        options.name = arguments.value("--name")
        if options.name?.isEmpty == true { throw .usage(arguments.command, "--name needs a name") }
        func number(_ option: String, minimum: Int64) throws(Failure) -> Int64? {
            guard let text = arguments.value(option) else { return nil }
            guard let value = Int64(text), value >= minimum else {
                throw .usage(arguments.command, "\(option) needs a whole number of at least \(minimum), not \(text)")
            }
            return value
        }
        options.depth = Int(try number("--depth", minimum: 0) ?? 0)
        options.jobs = Int(try number("--jobs", minimum: 1) ?? 6)
        options.maximumResourceSize = try number("--max-bytes", minimum: 1)
        options.includesThirdParty = arguments.has("--third-party")
        self.options = options
        cacheOptions = try CacheOptions(arguments)
    }

    func run() async throws(Failure) {
        let cache = try cacheOptions.open()
        defer { cache.flushToDisk() }
        let save = cache.savePage(url, options: options)
        if Console.errorIsTerminal {
            var lastDrawn = ContinuousClock.now - .seconds(1)
            for await step in save.progress {
                guard ContinuousClock.now - lastDrawn > .milliseconds(100) || step.done == step.total else { continue }
                lastDrawn = .now
                Console.error("\rsaving: \(step.done)/\(step.total) resources, \(Format.bytes(step.bytes))\u{1B}[K")
            }
            Console.error("\r\u{1B}[K")
        }
        let pack: OfflinePack
        do {
            pack = try await save.pack
        } catch let error as SavePageError {
            throw Failure(.failure, "\(error); check the URL, or that the origin is reachable")
        } catch {
            throw Failure(.failure, "could not save \(url.absoluteString): \(error)")
        }
        Console.out(PacksCommand.summary(pack))
    }
}

/// `httpcache packs [show NAME | refresh NAME | rm NAME] [--json]`.
struct PacksCommand {
    static let name = "packs"
    static let summary = "list offline packs; show, refresh or remove one"
    static let specs = CacheOptions.specs + Network.specs + [.flag("--json")]
    static let help = """
        Usage: httpcache packs [--json] [--cache-dir DIR]
               httpcache packs show NAME [--json]
               httpcache packs refresh NAME [--cacert FILE]
               httpcache packs rm NAME

        packs            lists the offline packs (httpcache save): name, page, resources,
                         bytes, when saved, and whether everything the page needs is in it.
        packs show NAME  lists a pack's resources (status, size, validators) and what is
                         missing from it, with why.
        packs refresh NAME
                         revalidates every resource with a conditional request, downloads
                         only what changed, and then switches the pack to the new version at
                         once: a refresh cut off half way leaves the old version whole.
        packs rm NAME    removes the pack, and unpins and removes the resources no other pack
                         holds.

        Exit status 3 when there is no pack NAME.
        """

    let action: String?
    let name: String?
    let json: Bool
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        let words = try arguments.positionals("ACTION NAME", minimum: 0, maximum: 2)
        action = words.first
        name = words.count > 1 ? words[1] : nil
        if let action {
            guard ["show", "refresh", "rm"].contains(action) else {
                throw .usage(arguments.command, "unknown action \(action); use show, refresh or rm")
            }
            guard name != nil else { throw .usage(arguments.command, "packs \(action) needs the pack's NAME") }
        }
        json = arguments.has("--json")
        cacheOptions = try CacheOptions(arguments)
    }

    func run() async throws(Failure) {
        let cache = try cacheOptions.open(network: action == "refresh")
        defer { cache.flushToDisk() }
        do {
            switch (action, name) {
            case ("show", let name?):
                let pack = try existing(name, in: cache)
                Console.out(json ? Self.json(pack, resources: true).text + "\n" : Self.details(pack))
            case ("rm", let name?):
                let removed = try cache.removePack(named: name)
                guard let removed else { throw missing(name) }
                Console.out("removed pack \(name) and \(Format.count(removed.count, "resource")) no other pack holds\n")
            case ("refresh", let name?):
                _ = try existing(name, in: cache)
                let report = try await cache.refreshPack(named: name)
                Console.out(Self.refreshSummary(report))
            default:
                let packs = try cache.packs()
                if json {
                    Console.out(JSONValue.array(packs.map { Self.json($0, resources: false) }).text + "\n")
                } else if packs.isEmpty {
                    Console.out("no offline packs; save a page with `httpcache save URL`\n")
                } else {
                    let rows = packs.map { pack in
                        [
                            pack.name, pack.page, String(pack.resources.count), Format.bytes(pack.bytes),
                            Format.timestamp(pack.savedAt),
                            pack.isComplete ? "complete" : "\(pack.problems.count) missing",
                        ]
                    }
                    Console.out(Format.table([["NAME", "PAGE", "RESOURCES", "BYTES", "SAVED", "STATE"]] + rows))
                }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(.failure, "could not use the packs in \(cacheOptions.directory): \(error)")
        }
    }

    private func existing(_ name: String, in cache: HTTPCache) throws -> OfflinePack {
        guard let pack = try cache.pack(named: name) else { throw missing(name) }
        return pack
    }

    private func missing(_ name: String) -> Failure {
        Failure(.notStored, "no offline pack named \(name); `httpcache packs` lists them")
    }

    /// What `save` prints: totals, then each problem.
    static func summary(_ pack: OfflinePack) -> String {
        var text =
            "saved \(pack.page) as pack \(pack.name): \(Format.count(pack.resources.count, "resource")), "
            + "\(Format.bytes(pack.bytes))\n"
        text += problems(pack)
        return text
    }

    static func problems(_ pack: OfflinePack) -> String {
        let failed = pack.problems.filter(\.isFailure)
        let skipped = pack.problems.filter { !$0.isFailure }
        var text = ""
        if !failed.isEmpty {
            text += "failed (\(failed.count)):\n" + failed.map { "  \($0.url)  \($0.reason)\n" }.joined()
        }
        if !skipped.isEmpty {
            text += "skipped (\(skipped.count)):\n" + skipped.map { "  \($0.url)  \($0.reason)\n" }.joined()
        }
        return text
    }

    static func details(_ pack: OfflinePack) -> String {
        var text = """
            pack:      \(pack.name)
            page:      \(pack.page)
            saved:     \(Format.timestamp(pack.savedAt))
            resources: \(pack.resources.count), \(Format.bytes(pack.bytes))\(pack.isComplete ? ", complete" : "")

            """
        let rows = pack.resources.map { resource in
            [
                String(resource.status), Format.bytes(resource.size), resource.etag ?? resource.lastModified ?? "-",
                resource.url,
            ]
        }
        text += Format.table([["STATUS", "SIZE", "VALIDATOR", "URL"]] + rows)
        return text + problems(pack)
    }

    static func refreshSummary(_ report: PackRefresh) -> String {
        var text =
            "refreshed pack \(report.pack.name): \(Format.count(report.unchanged.count, "resource")) unchanged (304), "
            + "\(report.changed.count) changed and downloaded, \(report.added.count) new, "
            + "\(report.removed.count) no longer needed\n"
        text += report.changed.map { "  changed  \($0)\n" }.joined()
        text += problems(report.pack)
        return text
    }

    static func json(_ pack: OfflinePack, resources: Bool) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("name", .string(pack.name)), ("page", .string(pack.page)),
            ("resources", .number(Double(pack.resources.count))),
            ("bytes", .number(Double(pack.bytes))), ("savedAt", .number(pack.savedAt)),
            ("complete", .bool(pack.isComplete)),
        ]
        if resources {
            fields.append(
                (
                    "items",
                    .array(
                        pack.resources.map { resource in
                            .object([
                                ("url", .string(resource.url)), ("status", .number(Double(resource.status))),
                                ("size", .number(Double(resource.size))),
                                ("etag", resource.etag.map(JSONValue.string) ?? .null),
                                ("lastModified", resource.lastModified.map(JSONValue.string) ?? .null),
                            ])
                        })
                ))
        }
        fields.append(
            (
                "problems",
                .array(
                    pack.problems.map {
                        .object([
                            ("url", .string($0.url)), ("reason", .string($0.reason)), ("failed", .bool($0.isFailure)),
                        ])
                    })
            ))
        return .object(fields)
    }
}

/// `httpcache export --warc FILE [--pack NAME | URL-PREFIX] [--requests]`.
struct ExportCommand {
    static let name = "export"
    static let summary = "write stored responses (a pack, a URL prefix, or all) to a WARC file"
    static let specs = CacheOptions.specs + [.value("--warc"), .value("--pack"), .flag("--requests")]
    static let help = """
        Usage: httpcache export --warc FILE [--pack NAME | URL-PREFIX] [--requests] [--cache-dir DIR]

        Writes stored responses to FILE in WARC 1.1 (ISO 28500), the web archives' format: a
        warcinfo record, then a response record per stored response (its HTTP head and body,
        WARC-Target-URI, WARC-Date, WARC-Payload-Digest, WARC-Block-Digest). A FILE ending in
        .gz is gzipped record by record, as archiving tools (warcio, pywb) expect. FILE is
        written beside (FILE.partial) and renamed into place whole: a failed export leaves the
        file that was there. A response whose stored body is found damaged is left out and
        listed (the cache removes it; exit 1), the rest written.

        Options:
          --warc FILE      the file to write (replaced)
          --pack NAME      only that offline pack's resources
          URL-PREFIX       only responses whose URL starts with it (default: everything)
          --requests       also a request record before each response
        """

    let path: String
    let pack: String?
    let prefix: String?
    let requests: Bool
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        guard let path = arguments.value("--warc"), !path.isEmpty else {
            throw .usage(arguments.command, "--warc FILE is needed")
        }
        self.path = path
        pack = arguments.value("--pack")
        prefix = try arguments.positionals("URL-PREFIX", minimum: 0, maximum: 1).first
        if pack != nil, prefix != nil { throw .usage(arguments.command, "give --pack NAME or URL-PREFIX, not both") }
        requests = arguments.has("--requests")
        cacheOptions = try CacheOptions(arguments)
    }

    func run() throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        do {
            if let pack, try cache.pack(named: pack) == nil {
                throw Failure(.notStored, "no offline pack named \(pack); `httpcache packs` lists them")
            }
            let export = try cache.exportWARC(to: path, pack: pack, urlPrefix: prefix, includesRequests: requests)
            var text =
                "wrote \(path): \(Format.count(export.responses, "response record")), "
                + "\(Format.bytes(export.payloadBytes)) of bodies, \(Format.bytes(export.fileBytes)) in all\n"
            for skipped in export.skipped { text += "  left out \(skipped.url): \(skipped.reason)\n" }
            Console.out(text)
            if !export.skipped.isEmpty {
                throw Failure(
                    .failure,
                    "\(Format.count(export.skipped.count, "stored response")) left out of \(path) (listed above): "
                        + "their bodies were damaged or gone, and the cache removed them; the rest were written")
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(.failure, "could not export to \(path): \(error)")
        }
    }
}

/// `httpcache import FILE [--name NAME]`.
struct ImportCommand {
    static let name = "import"
    static let summary = "store every response of a WARC file, as an offline pack"
    static let specs = CacheOptions.specs + [.value("--name")]
    static let help = """
        Usage: httpcache import FILE.warc[.gz] [--name NAME] [--cache-dir DIR]

        Stores every HTTP response record of a WARC file (WARC 1.0 or 1.1, gzipped or not,
        written by httpcache export or any other tool), pinned, and makes them an offline pack
        named NAME (default: the file's name). Chunked payloads are stored de-chunked; revisit
        records are stored with the payload they refer to. Payloads stream into the store:
        memory stays bounded whatever the file holds.

        A record that cannot be stored (no http(s) target URI, a malformed HTTP response, a
        digest mismatch, larger than the store takes) is skipped and the import goes on; the
        summary counts them by why and lists them with their offsets, the pack lists only
        what was stored, and the exit status is 1.

        A truncated or corrupt file stops the import with the offset of the bad record: the
        records before it are stored (unpinned, no pack), nothing from it onward. Exit status 1.
        """

    let path: String
    let name: String?
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        path = try arguments.positionals("FILE", minimum: 1, maximum: 1)[0]
        name = arguments.value("--name")
        cacheOptions = try CacheOptions(arguments)
    }

    func run() async throws(Failure) {
        let cache = try cacheOptions.open(network: false)
        defer { cache.flushToDisk() }
        let imported: WARCImport
        do {
            imported = try await cache.importWARC(from: path, name: name)
        } catch {
            throw Failure(.failure, "could not import \(path): \(error)")
        }
        Console.out(Self.summary(imported, path: path))
        if imported.refused > 0 {
            throw Failure(
                .failure,
                "\(Format.count(imported.refused, "record")) of \(path) not stored (listed above); pack"
                    + " \(imported.pack.name) holds the \(Format.count(imported.stored, "response")) that were")
        }
    }

    /// What `import` prints: what was stored, then what was refused, by why and record by record.
    static func summary(_ imported: WARCImport, path: String) -> String {
        var text =
            "imported \(path) as pack \(imported.pack.name): \(Format.count(imported.stored, "response")), "
            + "\(Format.bytes(imported.bytes))"
            + (imported.revisits > 0 ? ", \(Format.count(imported.revisits, "revisit")) resolved" : "") + "\n"
        guard imported.refused > 0 else { return text }
        let kinds = WARCImport.Skipped.Kind.allCases.compactMap { kind in
            imported.refusedByKind[kind].map { "\($0) \(kind.rawValue)" }
        }
        text += "refused \(Format.count(imported.refused, "record")) (not stored, not in the pack): "
        text += kinds.joined(separator: ", ") + "\n"
        for skipped in imported.skipped {
            text += "  record at offset \(skipped.offset): \(skipped.reason)\n"
        }
        if imported.refused > imported.skipped.count {
            text += "  … and \(imported.refused - imported.skipped.count) more, not listed\n"
        }
        return text
    }
}
