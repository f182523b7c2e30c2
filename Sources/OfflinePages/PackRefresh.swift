import CacheSemantics
import CacheStorage
import Foundation
import HTTPCacheCore

/// What `HTTPCache.refreshPack(named:)` did.
public struct PackRefresh: Sendable, Hashable {
    /// The pack as it is now.
    public var pack: OfflinePack
    /// Resources the origin said had not changed (304): nothing downloaded.
    public var unchanged: [String]
    /// Resources that changed, downloaded again.
    public var changed: [String]
    /// Resources the page needs now that it did not before.
    public var added: [String]
    /// Resources the page no longer needs: unpinned and removed unless another pack holds them.
    public var removed: [String]
}

/// A response a refresh downloaded, held until every resource has been asked for.
struct StagedResponse: Sendable, Hashable, Codable {
    var url: String
    var status: Int
    var fields: [String: String]
    var body: Data
}

/// A refresh's downloads, kept in the store (one commit) before the pack switches to them: a
/// refresh cut off while switching is finished by the next one.
struct PendingSwitch: Codable {
    var pack: OfflinePack
    var staged: [StagedResponse]
    /// Resources of the old version the new one does not hold.
    var obsolete: [String]

    static func key(_ name: String) -> String { "PACK pending:" + name }
}

extension HTTPCache {
    /// Refreshes the pack named `name`: every resource is revalidated with a conditional
    /// request (RFC 9110 §13.1: `If-None-Match`, `If-Modified-Since`), only those that changed
    /// are downloaded, documents and stylesheets that changed are read again for what they
    /// need now, and then the pack switches to the new version.
    ///
    /// Nothing stored changes until every resource has been asked for: a refresh cut off
    /// while downloading (the network lost, the process killed) leaves the old version whole
    /// and served. The downloads are then kept in the store in one commit before they replace
    /// the old responses; if the process dies while replacing, the next refresh finishes the
    /// switch first. Resources the origin did not change keep their stored responses as they
    /// are (revalidated as usual while the origin is reachable).
    ///
    /// - Throws: `StorageError` when the store fails; ``SavePageError`` when the page itself
    ///   cannot be fetched or there is no pack `name`; ``HTMLParserUnavailable`` when libxml2
    ///   cannot be loaded.
    public func refreshPack(named name: String) async throws -> PackRefresh {
        try await finishPendingSwitch(name)
        guard let old = try PackRecord.read(name, in: store), let page = URL(string: old.page) else {
            throw SavePageError(url: name, reason: "there is no offline pack with that name")
        }
        var options = old.options ?? SaveOptions()
        options.name = name
        let limit = options.maximumResourceSize
        let limits = PageSaver.Limits()
        var saver = try PageSaver(page: page, options: options, limits: limits) { job, scope in
            await PageSaver.revalidate(job, scope: scope, through: self, limit: limit, readSize: limits.readSize)
        }
        let fresh = try await saver.run { _ in }
        let current = Set(fresh.resources.map(\.url))
        let previous = Set(old.resources.map(\.url))
        let pending = PendingSwitch(
            pack: fresh, staged: saver.staged, obsolete: old.resources.map(\.url).filter { !current.contains($0) })
        try PackRecord.writeJSON(
            pending, key: PendingSwitch.key(name), url: "httpcache:pending/\(name)", to: store)
        try await finishPendingSwitch(name)
        return PackRefresh(
            pack: fresh, unchanged: saver.unchanged,
            changed: saver.staged.map(\.url).filter(previous.contains),
            added: fresh.resources.map(\.url).filter { !previous.contains($0) }, removed: pending.obsolete)
    }

    /// Replaces the stored responses with a refresh's downloads, records the new version of
    /// the pack, and removes what it no longer holds.
    private func finishPendingSwitch(_ name: String) async throws {
        let key = PendingSwitch.key(name)
        guard let entry = try store.variants(of: key).first else { return }
        guard let pending = try? JSONDecoder().decode(PendingSwitch.self, from: Data(try store.body(of: entry.id)))
        else {
            configuration.log("the unfinished refresh of pack \(name) could not be read; it is dropped")
            _ = try store.remove(primaryKey: key)
            return
        }
        let replayer = Replayer(self)
        for response in pending.staged {
            try await replayer.store(response)
            if let url = URL(string: response.url) { _ = pin(url) }
        }
        try PackRecord.write(pending.pack, to: store)
        _ = try removeUnused(pending.obsolete)
        _ = try store.remove(primaryKey: key)
    }
}

extension PageSaver {
    /// Asks the origin whether one resource changed, with the validators of what is stored,
    /// following redirects where `scope` allows (decided before the target is asked). A changed
    /// response is staged (nothing stored changes); an unchanged one's stored body is read when
    /// the resource is read for more. A download is held only up to the largest body the store
    /// keeps (beyond it, it could not be stored), and read for more only up to `readSize` bytes.
    static func revalidate(
        _ job: Job, scope: SaveScope, through cache: HTTPCache, limit: Int64?, readSize: Int
    ) async -> Fetched {
        var fetched = Fetched(job: job)
        var url = job.url
        /// The resource is not in the new version: nothing of its redirects either.
        func problem(_ reason: String, failure: Bool) -> Fetched {
            var failed = Fetched(job: job)
            failed.bytes = fetched.bytes
            failed.problem = OfflinePack.Problem(url: job.url.absoluteString, reason: reason, isFailure: failure)
            return failed
        }
        let stored = storedBodyLimit(cache)
        do {
            for _ in 0...cache.configuration.maximumRedirects {
                let live = try cache.entries(for: url).first { $0.isComplete }
                var request = FetchRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData)
                if let etag = live?.fields[.eTag] { request.fields[.ifNoneMatch] = etag }
                if let modified = live?.fields[.lastModified] { request.fields[.ifModifiedSince] = modified }
                let response = try await cache.transport.send(request)
                let status = response.status
                // Looked up by name in any case (Foundation on Linux writes `Etag`).
                let head = response.fields
                let fields = Dictionary(head.map { ($0.name, $0.value) }, uniquingKeysWith: { "\($0), \($1)" })
                var body = Data()
                if status == 304, let live {
                    for try await _ in response.body {}
                    fetched.unchanged.append(url.absoluteString)
                    fetched.stored.append(OfflinePack.Resource(live, url: url))
                    if (300..<400).contains(live.status), let location = live.fields[.location] {
                        switch scope.redirect(from: url, to: location) {
                        case .success(let next): url = next
                        case .failure(let refusal): return problem(refusal.reason, failure: false)
                        }
                        continue
                    }
                    if reads(job.role, contentType: live.fields[.contentType]) {
                        body = Data(try cache.store.body(of: live.id))
                    }
                    return document(fetched, body, url: url, contentType: live.fields[.contentType], readSize: readSize)
                }
                for try await chunk in response.body {
                    body += chunk
                    if let limit, body.count > limit { return problem(Self.overLimit(limit), failure: false) }
                    if let stored, body.count > stored {
                        // Not read to the end: it could not be stored, and is never held whole.
                        fetched.bytes += Int64(body.count)
                        return problem(
                            Self.overStoreLimit(received: Int64(body.count), stored: stored), failure: false)
                    }
                }
                fetched.bytes += Int64(body.count)
                if (300..<400).contains(status), let location = head[.location] {
                    let next: URL
                    switch scope.redirect(from: url, to: location) {
                    case .success(let target): next = target
                    case .failure(let refusal): return problem(refusal.reason, failure: false)
                    }
                    // A redirect has no validator as a rule: unchanged when it leads to the same place.
                    if let live, live.status == status, live.fields[.location] == location {
                        fetched.unchanged.append(url.absoluteString)
                        fetched.stored.append(OfflinePack.Resource(live, url: url))
                        url = next
                        continue
                    }
                    fetched.staged.append(
                        StagedResponse(url: url.absoluteString, status: status, fields: fields, body: body))
                    fetched.stored.append(
                        OfflinePack.Resource(
                            url: url.absoluteString, status: status, size: 0, savedAt: Date().timeIntervalSince1970))
                    url = next
                    continue
                }
                guard (200..<300).contains(status) else { return problem(httpFailure(status), failure: true) }
                fetched.staged.append(
                    StagedResponse(url: url.absoluteString, status: status, fields: fields, body: body))
                fetched.stored.append(
                    OfflinePack.Resource(
                        url: url.absoluteString, status: status, size: Int64(body.count),
                        contentType: head[.contentType], etag: head[.eTag],
                        lastModified: head[.lastModified], savedAt: Date().timeIntervalSince1970))
                return document(fetched, body, url: url, contentType: head[.contentType], readSize: readSize)
            }
            return problem("too many redirects (more than \(cache.configuration.maximumRedirects))", failure: true)
        } catch {
            return problem(String(describing: error), failure: true)
        }
    }

    /// `fetched` with `body` to read for more when its role and type are read, and it is no
    /// larger than `readSize` (else the problem that it was not read).
    private static func document(
        _ fetched: Fetched, _ body: Data, url: URL, contentType: String?, readSize: Int
    ) -> Fetched {
        var fetched = fetched
        guard reads(fetched.job.role, contentType: contentType) else { return fetched }
        guard body.count <= readSize else {
            fetched.problem = tooLargeToRead(url.absoluteString, size: Int64(body.count), readSize: readSize)
            return fetched
        }
        fetched.document = Document(Array(body), url: url, contentType: contentType)
        return fetched
    }
}
