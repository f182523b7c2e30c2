import CacheSemantics
import CacheStorage
import Foundation
import HTTPCacheCore

/// How far a save has come.
public struct SaveProgress: Sendable, Hashable {
    /// Resources finished (stored, failed or skipped).
    public var done: Int
    /// Resources found so far (the count grows as documents and stylesheets are read).
    public var total: Int
    /// Body bytes received.
    public var bytes: Int64
}

/// A page being saved: its progress as it happens, and the pack at the end.
public struct PageSave: Sendable {
    /// Progress after each resource; finishes when the save does. A reader that falls behind
    /// gets the latest step (those it missed are dropped), so an unread stream holds one.
    public let progress: AsyncStream<SaveProgress>
    let task: Task<OfflinePack, any Error>

    /// The pack saved. Throws when the page itself cannot be saved (``SavePageError``;
    /// ``HTMLParserUnavailable`` when libxml2 cannot be loaded), or the save was cancelled.
    public var pack: OfflinePack {
        get async throws { try await task.value }
    }

    /// Stops the save: nothing more is fetched and no pack is recorded.
    public func cancel() { task.cancel() }
}

/// Why a page cannot be saved at all.
public struct SavePageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The page's URL.
    public var url: String
    /// What went wrong.
    public var reason: String

    public var description: String { "cannot save \(url): \(reason)" }
}

extension HTTPCache {
    /// Saves a page for offline reading: the document and every subresource a browser loads
    /// to render it, fetched through this cache, stored and pinned, and recorded as the
    /// ``OfflinePack`` named ``SaveOptions/name``.
    ///
    /// What a page needs: `img` `src` and `srcset`; `picture`/`source` `srcset`; `link` rel
    /// stylesheet, icon, apple-touch-icon, preload, modulepreload, manifest; `script src`;
    /// `iframe`/`frame src` and their documents' subresources; `video`/`audio`/`source`/`track
    /// src` and `poster`; `object data`; `embed src`; `input type=image`; inline `style`
    /// attributes and `<style>` blocks; and in stylesheets `url()` and `@import`,
    /// recursively. `<base href>` is honoured. HTML is parsed with libxml2's tolerant parser,
    /// in the encoding `Content-Type` or `<meta charset>` gives; CSS with a CSS Syntax Level 3
    /// tokenizer.
    ///
    /// Responses are stored even when RFC 9111 would not store them (`no-store`, no
    /// freshness), as `max-age=0`: with the origin reachable they are validated as usual; when
    /// it cannot be reached they are served. A resource that fails (an HTTP error, the
    /// network) or is skipped (another origin, too large) is listed in
    /// ``OfflinePack/problems`` and the rest is saved. Saving again under the same name
    /// replaces the pack; resources only the old one held are removed.
    ///
    /// ```swift
    /// let save = cache.savePage(URL(string: "https://example.com/article")!)
    /// for await step in save.progress { print("\(step.done)/\(step.total)") }
    /// let pack = try await save.pack
    /// ```
    public func savePage(_ url: URL, options: SaveOptions = SaveOptions()) -> PageSave {
        let (progress, continuation) = AsyncStream.makeStream(
            of: SaveProgress.self, bufferingPolicy: .bufferingNewest(1))
        let limit = options.maximumResourceSize
        let task = Task {
            defer { continuation.finish() }
            let limits = PageSaver.Limits()
            var saver = try PageSaver(page: url, options: options, limits: limits) { job, scope in
                await PageSaver.fetch(job, scope: scope, through: self, limit: limit, readSize: limits.readSize)
            }
            // Hundreds of entries, committed to the index in batches rather than one by one.
            store.beginBatchedWrites()
            let pack: OfflinePack
            do {
                pack = try await saver.run { continuation.yield($0) }
            } catch {
                try? store.endBatchedWrites()
                throw error
            }
            try store.endBatchedWrites()
            try Task.checkCancellation()
            let previous = try PackRecord.read(pack.name, in: store)
            try PackRecord.write(pack, to: store)
            if let previous {
                let current = Set(pack.resources.map(\.url))
                _ = try removeUnused(previous.resources.map(\.url).filter { !current.contains($0) })
            }
            return pack
        }
        return PageSave(progress: progress, task: task)
    }
}

/// One save: a queue of resources fetched `jobs` at a time, documents and stylesheets read as
/// they arrive for more.
struct PageSaver {
    enum Role: Sendable, Hashable {
        /// A page: its subresources are needed, and its links followed while depth remains.
        case page(depth: Int)
        /// A frame's document: 1 in a page, 2 in a frame of that page, and so on.
        case frame(nesting: Int)
        /// A stylesheet: 1 when a page or frame links it, 2 when such a one `@import`s it, and
        /// so on.
        case stylesheet(referrerCharset: String?, nesting: Int)
        case other
    }

    /// What bounds one save, whatever the origin sends: memory, and how long it runs.
    struct Limits: Sendable, Hashable {
        /// The most bytes of one document or stylesheet kept to read for what it refers to:
        /// 16 MiB. Real pages and stylesheets are far smaller; an endless or decompression-bomb
        /// one would otherwise be held whole in memory. A larger one is still stored (up to the
        /// store's own limit) but not read at all, never as a truncated prefix that would look
        /// whole, and the pack lists it as a problem.
        var readSize = 16 << 20
        /// How deep frames may nest in frames, and stylesheets `@import` stylesheets: 8. An
        /// origin making a new frame or stylesheet for each one asked would otherwise be saved
        /// forever (Chromium stops nesting frames too, and real pages stop far sooner).
        var nesting = 8
        /// The most resources one save fetches: 100,000, far more than a page needs (with
        /// `depth`, its linked pages too); the rest are listed as one problem.
        var resources = 100_000
    }

    struct Job: Sendable {
        var url: URL
        var role: Role
    }

    /// A document or stylesheet received: its bytes, final URL (after redirects) and charset.
    struct Document: Sendable {
        var bytes: [UInt8]
        var url: URL
        var charset: String?
        var isHTML: Bool

        init(_ bytes: [UInt8], url: URL, contentType: String?) {
            self.bytes = bytes
            self.url = url
            charset = contentType.flatMap(OfflinePages.charset)
            isHTML = PageSaver.isHTML(contentType)
        }
    }

    /// What fetching one job gave.
    struct Fetched: Sendable {
        var job: Job
        /// The resources stored: each redirect followed, then the final response.
        var stored: [OfflinePack.Resource] = []
        var problem: OfflinePack.Problem?
        /// The body of a document or stylesheet, to read for more.
        var document: Document?
        var bytes: Int64 = 0
        /// Responses a refresh downloaded, to switch to once all are in.
        var staged: [StagedResponse] = []
        /// Resources a refresh found unchanged (304).
        var unchanged: [String] = []
    }

    /// The page, as it is requested.
    let page: URL
    /// What may be requested: the page's origin, others with `includesThirdParty`.
    let scope: SaveScope
    let options: SaveOptions
    /// Bounds on memory and on how much is fetched.
    let limits: Limits
    /// Fetches one resource: through the cache for a save, conditionally for a refresh.
    let fetch: @Sendable (Job, SaveScope) async -> Fetched
    private var seen = Set<URL>()
    /// References that cannot be fetched, as reported.
    private var seenUnfetchable = Set<String>()
    /// Jobs found; those before `nextJob` have been started.
    private var queue: [Job] = []
    private var nextJob = 0
    /// References found after ``Limits/resources`` were queued: the first, and how many.
    private var leftOut: (first: String, count: Int)?
    private var resources: [OfflinePack.Resource] = []
    private var storedURLs = Set<String>()
    private var problems: [OfflinePack.Problem] = []
    private var progress = SaveProgress(done: 0, total: 0, bytes: 0)
    /// What a refresh downloaded and found unchanged.
    private(set) var staged: [StagedResponse] = []
    private(set) var unchanged: [String] = []

    /// - Throws: ``SavePageError`` when `page` is not an `http` or `https` URL;
    ///   ``HTMLParserUnavailable`` when libxml2 cannot be loaded, before anything is fetched.
    init(
        page: URL, options: SaveOptions, limits: Limits = Limits(),
        fetch: @escaping @Sendable (Job, SaveScope) async -> Fetched
    ) throws {
        guard case .url(let parsed, let url) = ReferenceTarget(page.absoluteString, base: nil) else {
            throw SavePageError(url: page.absoluteString, reason: "only http and https pages can be saved")
        }
        _ = try LibXML2.functions()
        self.page = url
        scope = SaveScope(page: parsed, includesThirdParty: options.includesThirdParty)
        self.options = options
        self.limits = limits
        self.fetch = fetch
    }

    mutating func run(_ report: (SaveProgress) -> Void) async throws -> OfflinePack {
        let started = Date().timeIntervalSince1970
        let first = page
        enqueue(first, .page(depth: max(0, options.depth)))
        let jobs = max(1, options.jobs)
        let fetch = self.fetch
        let scope = self.scope
        try await withThrowingTaskGroup(of: Fetched.self) { group in
            var running = 0
            while true {
                while running < jobs, nextJob < queue.count {
                    let job = queue[nextJob]
                    nextJob += 1
                    group.addTask { await fetch(job, scope) }
                    running += 1
                }
                guard running > 0, let fetched = try await group.next() else { break }
                running -= 1
                try Task.checkCancellation()
                if fetched.job.url == first, fetched.problem != nil, fetched.stored.isEmpty {
                    group.cancelAll()
                    throw SavePageError(url: first.absoluteString, reason: fetched.problem?.reason ?? "not stored")
                }
                try record(fetched)
                report(progress)
            }
        }
        if let leftOut {
            let more = leftOut.count == 1 ? "" : " and \(leftOut.count - 1) more"
            problems.append(
                OfflinePack.Problem(
                    url: leftOut.first,
                    reason: "not fetched: the save stopped at its limit of \(limits.resources) resources; "
                        + "this\(more) were left out (save the pages they belong to separately)",
                    isFailure: false))
        }
        var pack = OfflinePack(
            name: options.name ?? page.absoluteString, page: first.absoluteString, savedAt: started,
            resources: resources, problems: problems)
        pack.options = options
        return pack
    }

    private mutating func enqueue(_ url: URL, _ role: Role) {
        guard seen.insert(url).inserted else { return }
        guard let parsed = BrowserURL(url) else { return skip(url.absoluteString, "not an http or https URL") }
        if case .page(let depth) = role, depth < options.depth, parsed.origin != scope.page.origin,
            !options.includesThirdParty
        {
            // A link to another origin is not followed; it is not something the page needs.
            return
        }
        if let refusal = scope.refusal(parsed) { return skip(url.absoluteString, refusal) }
        switch role {
        case .frame(let nesting) where nesting > limits.nesting:
            return skip(
                url.absoluteString, "a frame nested more than \(limits.nesting) deep in frames is not saved")
        case .stylesheet(_, let nesting) where nesting > limits.nesting:
            return skip(
                url.absoluteString, "a stylesheet nested more than \(limits.nesting) deep in @import is not saved")
        default: break
        }
        guard queue.count < limits.resources else {
            leftOut = (leftOut?.first ?? url.absoluteString, (leftOut?.count ?? 0) + 1)
            return
        }
        progress.total += 1
        queue.append(Job(url: url, role: role))
    }

    /// Reports a resource the page needs that is not fetched.
    private mutating func skip(_ url: String, _ reason: String) {
        progress.total += 1
        progress.done += 1
        problems.append(OfflinePack.Problem(url: url, reason: reason, isFailure: false))
    }

    /// Reports a reference that cannot be fetched, once.
    private mutating func skipUnfetchable(_ reference: String, _ reason: String) {
        guard seenUnfetchable.insert(reference).inserted else { return }
        skip(reference, reason)
    }

    private mutating func record(_ fetched: Fetched) throws(HTMLParserUnavailable) {
        progress.done += 1
        progress.bytes += fetched.bytes
        for resource in fetched.stored where storedURLs.insert(resource.url).inserted {
            resources.append(resource)
        }
        if let problem = fetched.problem { problems.append(problem) }
        staged += fetched.staged
        unchanged += fetched.unchanged
        guard let document = fetched.document else { return }
        switch fetched.job.role {
        case .page(let depth): try readPage(document, depth: depth, nesting: 0)
        case .frame(let nesting): try readPage(document, depth: 0, nesting: nesting)
        case .stylesheet(let referrerCharset, let nesting):
            let text = CSSReferences.decodeStylesheet(
                document.bytes, contentTypeCharset: document.charset, referrerCharset: referrerCharset)
            let base = BrowserURL(document.url)
            for reference in CSSReferences.inStylesheet(text) {
                switch ReferenceTarget(reference.url, base: base, baseScheme: document.url.scheme) {
                case .url(_, let url):
                    enqueue(
                        url,
                        reference.kind == .import
                            ? .stylesheet(referrerCharset: referrerCharset, nesting: nesting + 1) : .other)
                case .unfetchable(let reason): skipUnfetchable(ReferenceTarget.shown(reference.url), reason)
                case .nothing: break
                }
            }
        case .other: break
        }
    }

    /// Queues what a page or frame needs, and its links while `depth` remains; `nesting` is
    /// how deep in frames the document is (0 for a page).
    private mutating func readPage(_ document: Document, depth: Int, nesting: Int) throws(HTMLParserUnavailable) {
        guard document.isHTML else { return }
        let references = try HTMLReferences(parsing: document.bytes, url: document.url, charset: document.charset)
        for reference in references.subresources {
            switch reference.kind {
            case .stylesheet: enqueue(reference.url, .stylesheet(referrerCharset: references.encoding, nesting: 1))
            case .frame: enqueue(reference.url, .frame(nesting: nesting + 1))
            case .other: enqueue(reference.url, .other)
            }
        }
        for reference in references.unfetchable { skipUnfetchable(reference.reference, reference.reason) }
        if depth > 0 {
            for link in references.links { enqueue(link, .page(depth: depth - 1)) }
        }
    }

    /// Fetches one resource through the cache, storing it whatever RFC 9111 says, and keeps
    /// the body only when it is read for more, and only up to `readSize` bytes: a larger
    /// document or stylesheet is stored but not read (listed as a problem). Once it is over
    /// the largest body the store keeps (and, when it is read for more, `readSize`), nothing
    /// wants more of it and the transfer stops; when its `Content-Length` says so already, it
    /// is not read at all. A redirect is followed only where `scope` allows, decided before its
    /// target is requested.
    static func fetch(
        _ job: Job, scope: SaveScope, through cache: HTTPCache, limit: Int64?, readSize: Int
    ) async -> Fetched {
        var fetched = Fetched(job: job)
        let url = job.url.absoluteString
        func problem(_ reason: String, failure: Bool = true) -> Fetched {
            fetched.problem = OfflinePack.Problem(url: url, reason: reason, isFailure: failure)
            return fetched
        }
        do {
            var hops: [CachedResponseHead] = []
            var refused: String?
            let (head, body) = try await cache.bytes(
                for: FetchRequest(url: job.url), forceStore: true,
                follow: { from, location in
                    switch scope.redirect(from: from, to: location) {
                    case .success(let next): return next
                    case .failure(let refusal):
                        refused = refusal.reason
                        return nil
                    }
                },
                redirected: { hops.append($0) })
            // The redirect not followed is left unread: nothing of it is stored.
            if let refused { return problem(refused, failure: false) }
            guard (200..<300).contains(head.statusCode) else { return problem(httpFailure(head.statusCode)) }
            if let limit, let expected = head.expectedLength, expected > limit {
                return problem("\(expected) bytes, " + overLimit(limit), failure: false)
            }
            let stored = storedBodyLimit(cache)
            if let stored, let expected = head.expectedLength, expected > stored {
                // Refused from its head: the store would not keep it, so its body is not read
                // (the cache stores nothing of a body not read to its end).
                return problem(overStoreLimit(declared: expected, stored: stored), failure: false)
            }
            let contentType = head.fields[.contentType]
            let reads = reads(job.role, contentType: contentType)
            var keeps = reads
            var bytes: [UInt8] = []
            var size: Int64 = 0
            for try await chunk in body {
                size += Int64(chunk.count)
                if let limit, size > limit {
                    // Not read to the end: the cache stores nothing of it.
                    fetched.bytes = size
                    return problem(overLimit(limit), failure: false)
                }
                if keeps, bytes.count + chunk.count > readSize {
                    keeps = false
                    bytes = []
                }
                if keeps { bytes += chunk }
                if !keeps, let stored, size > stored {
                    // Past what the store keeps (no length was declared), and not read for more, or
                    // too large to read: nothing wants the rest, so the transfer stops.
                    fetched.bytes = size
                    guard reads else { return problem(overStoreLimit(received: size, stored: stored), failure: false) }
                    return problem(
                        "over \(stored) bytes, the largest body the store keeps (maximumEntrySize), "
                            + "and over the \(readSize)-byte limit for reading a document or stylesheet: "
                            + "not stored, and what it refers to is not saved",
                        failure: false)
                }
            }
            fetched.bytes = size
            guard cache.pin(head.url) else {
                return problem("received but not stored (\(head.reasons.map(\.description).joined(separator: "; ")))")
            }
            for hop in hops { _ = cache.pin(hop.url) }
            let now = Date().timeIntervalSince1970
            fetched.stored = hops.map { OfflinePack.Resource($0, size: 0, savedAt: now) }
            fetched.stored.append(OfflinePack.Resource(head, size: size, savedAt: now))
            if keeps {
                fetched.document = Document(bytes, url: head.url, contentType: contentType)
            } else if reads {
                fetched.problem = tooLargeToRead(url, size: size, readSize: readSize)
            }
        } catch is CancellationError {
            return problem("cancelled")
        } catch let error as URLError where error.code == .httpTooManyRedirects {
            return problem("too many redirects (more than \(cache.configuration.maximumRedirects))")
        } catch let error as URLError {
            // The transport's sentence, not the NSError around it.
            return problem(error.localizedDescription)
        } catch {
            return problem(String(describing: error))
        }
        return fetched
    }

    /// Whether a resource in `role` is read for what it refers to: an HTML document (or one
    /// without a type) as a page or frame, any stylesheet.
    static func reads(_ role: Role, contentType: String?) -> Bool {
        switch role {
        case .page, .frame: isHTML(contentType)
        case .stylesheet: true
        case .other: false
        }
    }

    static func isHTML(_ contentType: String?) -> Bool {
        let media = contentType.map(mediaType) ?? ""
        return media.isEmpty || media == "text/html" || media == "application/xhtml+xml"
    }

    /// Why a response with `status` is not saved: `HTTP 404 Not Found`.
    static func httpFailure(_ status: Int) -> String {
        "HTTP \(status) \(HTTPCache.reasonPhrase(for: status))"
    }

    /// A document or stylesheet stored but not read: what it refers to is not in the pack.
    static func tooLargeToRead(_ url: String, size: Int64, readSize: Int) -> OfflinePack.Problem {
        OfflinePack.Problem(
            url: url,
            reason: "stored, but its \(size) bytes are over the \(readSize)-byte limit for reading a document "
                + "or stylesheet: what it refers to is not saved",
            isFailure: false)
    }

    /// The largest body the cache's store keeps, when it says; a larger response is passed on
    /// and not stored.
    static func storedBodyLimit(_ cache: HTTPCache) -> Int64? {
        switch cache.store {
        case let tiered as TieredStore: tiered.disk.configuration.maximumEntrySize
        case let disk as DiskStore: disk.configuration.maximumEntrySize
        case let memory as MemoryStore: memory.maximumEntrySize
        default: cache.configuration.maximumEntrySize
        }
    }

    /// Why a resource whose `Content-Length` says `declared` bytes is not downloaded: the
    /// store keeps bodies of at most `stored` bytes.
    static func overStoreLimit(declared: Int64, stored: Int64) -> String {
        "its Content-Length of \(declared) bytes is over \(stored) bytes, the largest body the store keeps "
            + "(maximumEntrySize, an eighth of the disk cache's capacity unless set): not downloaded, not saved; "
            + "to save it, use a cache whose maximumEntrySize is at least \(declared) bytes"
    }

    /// Why a resource of undeclared length is not downloaded further once `received` bytes
    /// are past the `stored` bytes the store keeps.
    static func overStoreLimit(received: Int64, stored: Int64) -> String {
        "over \(stored) bytes (its transfer stopped at \(received)), the largest body the store keeps "
            + "(maximumEntrySize, an eighth of the disk cache's capacity unless set): not saved; "
            + "to save it, use a cache whose maximumEntrySize is larger"
    }

    static func overLimit(_ limit: Int64) -> String {
        "over the limit of \(limit) bytes (maximumResourceSize, --max-bytes)"
    }
}

/// The media type of a `Content-Type` value, lower-cased, without parameters.
func mediaType(_ contentType: String) -> String {
    String(contentType.prefix { $0 != ";" }).trimmingCharacters(in: .whitespaces).lowercased()
}

/// The `charset` parameter of a `Content-Type` value.
func charset(_ contentType: String) -> String? {
    for parameter in contentType.split(separator: ";").dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1)
        guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { continue }
        let value = pair[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(
            in: CharacterSet(charactersIn: "\""))
        return value.isEmpty ? nil : value
    }
    return nil
}
