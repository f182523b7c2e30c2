import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// One download as it runs: requests, resumptions and retries, and what it measures on the way.

/// Bytes per second over about the last second.
struct RateMeter {
    private let clock = ContinuousClock()
    private var samples: [(time: ContinuousClock.Instant, bytes: Int64)] = []
    private var total: Int64 = 0

    /// Counts `count` more bytes; returns the current rate.
    mutating func add(_ count: Int) -> Double {
        total += Int64(count)
        let now = clock.now
        if samples.isEmpty {
            samples.append((now, 0))
        }
        if let last = samples.last, now - last.time >= .milliseconds(50) {
            samples.append((now, total))
        }
        // Keep one sample at least a second old as the base.
        while samples.count > 2, now - samples[1].time >= .seconds(1) { samples.removeFirst() }
        let base = samples[0]
        let elapsed = now - base.time
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0.01 ? Double(total - base.bytes) / seconds : 0
    }
}

/// The body ended before the length its response declared.
struct BodyCutShort: Error, CustomStringConvertible {
    var received: Int64
    var expected: Int64
    var description: String { "the body ended at byte \(received) of \(expected)" }
}

/// The loop behind a ``Download``: one task, so its state needs no lock.
struct Downloader {
    let cache: HTTPCache
    let request: FetchRequest
    let destination: URL
    let retries: Int
    let report: @Sendable (DownloadProgress) -> Void

    private var file: PartialFile?
    private var record: DownloadRecord?
    private var offset: Int64 = 0
    private var meter = RateMeter()
    private var attempts = 0
    private var resumptions = 0
    private var restarts = 0
    private var failuresInARow = 0
    private var highWater: Int64 = 0
    private var lastRate: Double = 0
    private var transferred: Int64 = 0
    /// A stored response proved unusable (shorter than it says, unreadable): the next attempts
    /// reload from the origin, which replaces it.
    private var avoidStoredResponse = false

    init(
        cache: HTTPCache, request: FetchRequest, destination: URL, retries: Int,
        report: @escaping @Sendable (DownloadProgress) -> Void
    ) {
        self.cache = cache
        self.request = request
        self.destination = destination
        self.retries = retries
        self.report = report
    }

    private var partialPath: String { Download.partialFileURL(for: destination).path }
    private var recordPath: String { Download.recordFileURL(for: destination).path }
    private var urlString: String { request.url.absoluteString }

    /// What to do with a response.
    private enum Verdict {
        /// Append its body; it ends at `end` (exclusive) when known.
        case append(end: Int64?, completeLength: Int64?)
        /// Its body is the whole file from byte 0.
        case startOver(DownloadRecord)
        /// The partial file is already the whole file.
        case complete
        /// It cannot be trusted to continue the partial file: start over from byte 0.
        case inconsistent(String)
        /// It cannot be used at all.
        case failed(DownloadError)
    }

    /// Downloads; on failure an empty partial file (and its record) is not left behind.
    mutating func run() async throws -> DownloadResult {
        do {
            return try await download()
        } catch {
            if file != nil, offset == 0 {
                unlink(recordPath)
                unlink(partialPath)
            }
            throw error
        }
    }

    private mutating func download() async throws -> DownloadResult {
        try validate()
        let file = try PartialFile(path: partialPath)
        self.file = file
        offset = try file.size()
        record = loadRecord()
        if record?.url != urlString {
            if offset > 0 {
                cache.configuration.log(
                    "\(partialPath) has no record of what it holds (or holds another URL); downloading from the start")
                try file.truncate()
                offset = 0
            }
            record = nil
        }
        highWater = offset
        publish()
        while true {
            try Task.checkCancellation()
            var outbound = request
            if avoidStoredResponse, outbound.cachePolicy != .returnCacheDataDontLoad {
                outbound.cachePolicy = .reloadIgnoringLocalCacheData
            }
            var resumingFrom: Int64?
            if offset > 0 {
                if let validator = record?.validator {
                    outbound.fields[.range] = "bytes=\(offset)-"
                    outbound.fields[.ifRange] = validator
                    // The whole file is checked at the end: ask for its digest (RFC 9530 §4).
                    outbound.fields[.wantReprDigest] = Self.wantedReprDigest
                    resumingFrom = offset
                } else {
                    try startOver("the first response had no strong validator (ETag or Last-Modified) to resume with")
                }
            }
            attempts += 1
            let head: CachedResponseHead
            let body: ResponseBody
            do {
                (head, body) = try await cache.bytes(for: outbound)
            } catch {
                try await failed(error)
                continue
            }
            let fromStore = [.hit, .stale, .revalidated].contains(head.outcome)
            let end: Int64?
            switch verdict(head, resumingFrom: resumingFrom) {
            case .complete:
                resumptions += 1
                return try await finish(head)
            case .failed(let error):
                throw error
            case .inconsistent(let why):
                try startOver(why)
                record = nil
                if fromStore { avoidStoredResponse = true }
                try await failed(DownloadError(.interrupted, why))
                continue
            case .startOver(let fresh):
                if offset > 0 { try startOver("the origin sent the whole file (it changed, or ignores ranges)") }
                record = fresh
                try saveRecord(fresh)
                end = fresh.expectedLength
            case .append(let rangeEnd, let completeLength):
                resumptions += 1
                if record?.expectedLength == nil, let completeLength {
                    record?.expectedLength = completeLength
                    if let record { try saveRecord(record) }
                }
                end = rangeEnd
            }
            publish()
            do {
                for try await chunk in body {
                    var piece = chunk
                    var overflow = false
                    if let end, offset + Int64(piece.count) > end {
                        piece = piece.prefix(Int(end - offset))
                        overflow = true
                    }
                    try file.append(piece)
                    offset += Int64(piece.count)
                    transferred += Int64(piece.count)
                    lastRate = meter.add(piece.count)
                    publish()
                    if overflow {
                        throw Inconsistent(why: "the response held more bytes than it declared")
                    }
                }
                // A cancelled task ends the body stream early without an error.
                try Task.checkCancellation()
                if let end, offset < end { throw BodyCutShort(received: offset, expected: end) }
            } catch let mismatch as DigestMismatch {
                // The body failed its digest: none of it can be trusted, nor resumed.
                throw try discarded(mismatch)
            } catch let inconsistent as Inconsistent {
                try startOver(inconsistent.why)
                record = nil
                if fromStore { avoidStoredResponse = true }
                try await failed(DownloadError(.interrupted, inconsistent.why))
                continue
            } catch {
                if fromStore, !Task.isCancelled, !(error is CancellationError) {
                    avoidStoredResponse = true
                    if !(error is DownloadError) {
                        try await failed(
                            DownloadError(
                                .interrupted, "the stored response could not be read: \(error)", underlying: error))
                        continue
                    }
                }
                try await failed(error)
                continue
            }
            if let total = record?.expectedLength, offset < total {
                continue  // the origin sent part of the rest: ask for the remainder
            }
            return try await finish(head)
        }
    }

    private struct Inconsistent: Error {
        var why: String
    }

    /// `Want-Repr-Digest` on a resumption (RFC 9530 §4): SHA-256 preferred, SHA-512 accepted.
    static let wantedReprDigest = "sha-256=10, sha-512=3"

    /// Empties the partial file after `mismatch` (``run()`` removes it and its record): the
    /// error to throw, which says so.
    private mutating func discarded(_ mismatch: DigestMismatch) throws(DownloadError) -> DownloadError {
        let size = offset
        try file?.truncate()
        offset = 0
        record = nil
        return DownloadError(
            .digestMismatch,
            "\(mismatch.url): the download does not match its \(mismatch.field) (\(mismatch.algorithm): expected "
                + "\(mismatch.expected.prefix(12))…, got \(mismatch.received.prefix(12))…); the \(size) bytes of "
                + "\(partialPath) were discarded; download again", underlying: mismatch)
    }

    private func validate() throws(DownloadError) {
        guard destination.isFileURL else {
            throw DownloadError(.invalidRequest, "the destination \(destination) is not a file URL; pass a file URL")
        }
        guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw DownloadError(
                .invalidRequest, "only http and https URLs can be downloaded, not \(request.url.absoluteString)")
        }
        let method = request.method.uppercased()
        guard method == "GET" else {
            throw DownloadError(.invalidRequest, "a download is a GET request, not \(method); use bytes(for:) instead")
        }
        for name in ["Range", "If-Range"] where request.fields[name] != nil {
            throw DownloadError(
                .invalidRequest,
                "the request has its own \(name) field; a download sets Range and If-Range itself, remove it")
        }
    }

    /// Discards the partial file's bytes; the next request starts from byte 0.
    private mutating func startOver(_ why: String) throws(DownloadError) {
        if offset > 0 {
            restarts += 1
            cache.configuration.log("discarded \(offset) bytes of \(partialPath): \(why); downloading from the start")
        }
        try file?.truncate()
        offset = 0
        publish()
    }

    /// Counts a failed attempt and waits before the next one; throws when there have been
    /// too many in a row without a new byte, or when the download was cancelled.
    private mutating func failed(_ error: any Error) async throws {
        if Task.isCancelled || error is CancellationError || (error as? URLError)?.code == .cancelled {
            throw CancellationError()
        }
        if let error = error as? DownloadError, error.kind != .interrupted { throw error }
        guard Self.isRetryable(error) else {
            throw DownloadError(
                .interrupted, "the download of \(urlString) failed: \(error); \(keptText)", underlying: error,
                keptBytes: offset)
        }
        if offset > highWater {
            highWater = offset
            failuresInARow = 0
        }
        failuresInARow += 1
        if failuresInARow > retries {
            let attemptsText = failuresInARow == 1 ? "1 attempt" : "\(failuresInARow) attempts in a row"
            throw DownloadError(
                .interrupted,
                "the download of \(urlString) stopped: \(attemptsText) added no byte (the last: \(Self.describe(error))); "
                    + keptText, underlying: (error as? DownloadError)?.underlying ?? error, keptBytes: offset)
        }
        let delay = min(2.0, 0.05 * Double(1 << min(failuresInARow - 1, 10)))
        try await Task.sleep(for: .seconds(delay))
    }

    private var keptText: String {
        offset > 0
            ? "\(partialPath) (\(offset) bytes) is kept: download to the same destination again to resume"
            : "download again to retry"
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? URLError { return error.localizedDescription }
        return String(describing: error)
    }

    /// Whether another attempt may get further: network failures and cut bodies.
    private static func isRetryable(_ error: any Error) -> Bool {
        if error is BodyCutShort { return true }
        if let error = error as? DownloadError { return error.kind == .interrupted }
        if let error = error as? URLError {
            switch error.code {
            case .cancelled, .unsupportedURL, .badURL, .userCancelledAuthentication, .userAuthenticationRequired,
                .fileDoesNotExist, .noPermissionsToReadFile, .dataLengthExceedsMaximum:
                return false
            default:
                return true
            }
        }
        let domain = (error as NSError).domain
        return domain == NSPOSIXErrorDomain || domain == NSURLErrorDomain
    }

    private func verdict(_ head: CachedResponseHead, resumingFrom: Int64?) -> Verdict {
        let status = head.statusCode
        if let declared = head.fields[.contentLength].flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }),
            let length = head.expectedLength, declared != length
        {
            return .inconsistent("the response says Content-Length: \(declared) but holds \(length) bytes")
        }
        if status == 200 || status == 203 {
            return .startOver(DownloadRecord(url: urlString, fields: head.fields, expectedLength: head.expectedLength))
        }
        guard let start = resumingFrom, let record else { return .failed(unexpected(head)) }
        switch status {
        case 206:
            guard let value = head.fields[.contentRange], let contentRange = ContentRange(value),
                let range = contentRange.range
            else {
                return .inconsistent(
                    "the 206 response has no single Content-Range (\(head.fields[.contentRange] ?? "none"))")
            }
            guard range.lowerBound == start else {
                return .inconsistent("the 206 response starts at byte \(range.lowerBound), not at \(start) as asked")
            }
            if let known = record.expectedLength, let complete = contentRange.completeLength, known != complete {
                return .inconsistent("the file is now \(complete) bytes long, not \(known)")
            }
            if let length = head.expectedLength, length != Int64(range.count) {
                return .inconsistent("the 206 response's length \(length) does not match its Content-Range \(value)")
            }
            if let expected = record.etag, let etag = head.fields[.eTag],
                !(EntityTag(etag).flatMap { tag in EntityTag(expected).map { tag.strongMatches($0) } } ?? false)
            {
                return .inconsistent("the 206 response has ETag \(etag), not \(expected)")
            }
            if record.etag == nil, let expected = record.lastModified, let modified = head.fields[.lastModified],
                HTTPDate.parse(modified) != HTTPDate.parse(expected)
            {
                return .inconsistent("the 206 response has Last-Modified \(modified), not \(expected)")
            }
            return .append(end: range.upperBound + 1, completeLength: contentRange.completeLength)
        case 416:
            let complete = head.fields[.contentRange].flatMap { ContentRange($0) }?.completeLength
            guard let complete, complete == start, record.expectedLength.map({ $0 == complete }) ?? true else {
                return .inconsistent(
                    "the origin answered 416 to bytes=\(start)- (the file has \(complete.map(String.init) ?? "an unknown number of") bytes)"
                )
            }
            return .complete
        default:
            return .failed(unexpected(head))
        }
    }

    private func unexpected(_ head: CachedResponseHead) -> DownloadError {
        let reason = HTTPCache.reasonPhrase(for: head.statusCode)
        return DownloadError(
            .unexpectedStatus,
            "\(urlString) answered \(head.statusCode) (\(reason)) instead of the file; nothing was written for it"
                + (offset > 0 ? ", and \(partialPath) (\(offset) bytes) is kept for a later resumption" : ""),
            statusCode: head.statusCode, keptBytes: offset)
    }

    private func publish() {
        report(DownloadProgress(receivedBytes: offset, expectedBytes: record?.expectedLength, bytesPerSecond: lastRate))
    }

    private func loadRecord() -> DownloadRecord? {
        guard let data = FileManager.default.contents(atPath: recordPath) else { return nil }
        guard let record = try? JSONDecoder().decode(DownloadRecord.self, from: data), record.version == 1 else {
            cache.configuration.log("\(recordPath) cannot be read; the download starts from the beginning")
            return nil
        }
        return record
    }

    private func saveRecord(_ record: DownloadRecord) throws(DownloadError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try encoder.encode(record).write(to: URL(fileURLWithPath: recordPath), options: .atomic)
        } catch {
            throw DownloadError(
                .file, "cannot write \(recordPath): \(error.localizedDescription); check the directory is writable",
                underlying: error)
        }
    }

    /// Flushes the partial file, puts it in place and removes the record.
    private mutating func finish(_ head: CachedResponseHead) async throws -> DownloadResult {
        guard let file else { throw DownloadError(.file, "no partial file") }
        // The whole file against the representation's digest (RFC 9530 §3): that of the response
        // that ends it, else that of the first response.
        var stated = HeaderFields()
        if let digest = head.fields[.reprDigest] ?? record?.reprDigest { stated[.reprDigest] = digest }
        let digests = IntegrityDigests(stated, including: [.reprDigest])
        if !digests.expected.isEmpty, let mismatch = try await file.mismatch(digests, url: urlString) {
            throw try discarded(mismatch)
        }
        try await file.sync()
        guard rename(partialPath, destination.path) == 0 else {
            throw DownloadError(
                .file,
                "cannot move \(partialPath) to \(destination.path): \(PartialFile.reason()); the complete download "
                    + "is kept in \(partialPath)", keptBytes: offset)
        }
        unlink(recordPath)
        let directoryPath = destination.deletingLastPathComponent().path
        await onThreadOfItsOwn {
            let directory = open(directoryPath, O_RDONLY | O_CLOEXEC)
            if directory >= 0 {
                _ = fsync(directory)
                closeDescriptor(directory)
            }
        }
        publish()
        return DownloadResult(
            fileURL: destination, totalBytes: offset, resumptions: resumptions, restarts: restarts,
            attempts: attempts, transferredBytes: transferred, response: head)
    }
}
