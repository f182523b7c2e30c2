import CacheExchange
import CacheLocking
import CacheSemantics
import CacheStorage
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension HTTPCache {
    /// Downloads `request`'s response body to the file `destination`, resuming where an earlier
    /// attempt stopped.
    ///
    /// The body is written to `<destination>.partial`, with what is needed to resume it in
    /// `<destination>.partial.json` (the URL, the validator, the expected length). When it is
    /// complete the partial file is flushed to disk and renamed to `destination` (replacing any
    /// file there), and the record is deleted.
    ///
    /// After a transport error or a body cut off, the download resumes within this call (up to
    /// `retries` attempts in a row that add no byte, with a short backoff); after cancellation,
    /// a failure or the process ending, a later `download` to the same destination resumes from
    /// the partial file. Resuming sends `Range: bytes=N-` and `If-Range` with the validator
    /// (RFC 9110 §13.1.5, §14.2): a strong `ETag`, else a `Last-Modified` date that is strong
    /// (at least a second before the response's `Date`, RFC 9110 §8.8.2.2). Then:
    ///
    /// - a `206` whose `Content-Range` starts at exactly `N`, with the same complete length
    ///   and the same `ETag`, is appended;
    /// - a `200` (the file changed, or the server ignores ranges) replaces the partial file;
    /// - a `416` saying the resource has `N` bytes means the file is already complete;
    /// - anything inconsistent, or a partial file without a validator, starts over from byte 0.
    ///   Bytes of two different representations are never spliced together.
    ///
    /// The requests go through the cache like any other (``bytes(for:)``): a fresh stored
    /// response can answer without contacting the origin.
    ///
    /// ```swift
    /// let download = cache.download(URLRequest(url: url), to: URL(fileURLWithPath: "big.iso"))
    /// Task { for await step in download.progress { print(step.receivedBytes, step.expectedBytes ?? -1) } }
    /// let result = try await download.result()
    /// print(result.totalBytes, result.resumptions)
    /// ```
    ///
    /// Only one download may write a destination at a time (in any process); another one fails
    /// with ``DownloadError/Kind/busy``.
    ///
    /// - Parameters:
    ///   - request: A `GET` request without `Range` or `If-Range` fields (the download sets them).
    ///   - destination: A file URL; its directory must exist.
    ///   - retries: How many attempts in a row may fail without adding a byte before the download
    ///     gives up (a negative value is taken as 0). Default 5.
    /// - Returns: The running download.
    public func download(_ request: URLRequest, to destination: URL, retries: Int = 5) -> Download {
        Download(cache: self, request: request, destination: destination, retries: max(0, retries))
    }
}

/// How far a ``Download`` has got.
public struct DownloadProgress: Hashable, Sendable {
    /// Bytes of the file so far, those kept from earlier attempts included. It goes back to 0
    /// when the download has to start over (the file changed on the origin).
    public var receivedBytes: Int64
    /// The length of the whole file, when the origin said (`Content-Length`, `Content-Range`).
    public var expectedBytes: Int64?
    /// Bytes received per second over about the last second (0 before any has arrived).
    public var bytesPerSecond: Double

    /// Creates a progress value.
    public init(receivedBytes: Int64, expectedBytes: Int64?, bytesPerSecond: Double) {
        self.receivedBytes = receivedBytes
        self.expectedBytes = expectedBytes
        self.bytesPerSecond = bytesPerSecond
    }

    /// `receivedBytes / expectedBytes` (at most 1), or `nil` when the length is not known.
    public var fractionCompleted: Double? {
        guard let expectedBytes else { return nil }
        return expectedBytes == 0 ? 1 : min(1, Double(receivedBytes) / Double(expectedBytes))
    }
}

/// A finished ``Download``.
public struct DownloadResult: Sendable {
    /// The complete file (the destination).
    public var fileURL: URL
    /// Its size in bytes.
    public var totalBytes: Int64
    /// How many responses continued a partial file (`206`, or a `416` confirming it was
    /// already complete), across calls: a partial file left by an earlier call counts too.
    public var resumptions: Int
    /// How many times bytes already downloaded were discarded and the file started over (a
    /// `200` answering a resumption, an inconsistent response, no validator to resume with).
    public var restarts: Int
    /// How many requests this call made.
    public var attempts: Int
    /// Body bytes this call received (from the origin or the store), those a restart discarded
    /// included and those kept from earlier calls not.
    public var transferredBytes: Int64
    /// The last response: a `200` with the whole body, the `206` that completed the file, or a
    /// `416` confirming a partial file was complete.
    public var response: CachedResponseHead

    /// The last response's status code.
    public var statusCode: Int { response.statusCode }
    /// The last response's fields.
    public var fields: HeaderFields { response.fields }
    /// How the last response was obtained (a fresh stored response is a ``CacheOutcome/hit``).
    public var outcome: CacheOutcome { response.outcome }
}

/// Why a ``Download`` failed. The partial file and its record are kept unless the request
/// itself was unusable, so downloading to the same destination again resumes.
public struct DownloadError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: String, Sendable, Hashable {
        /// The request cannot be downloaded (not `GET`, a `Range` of its own, no URL) or the
        /// destination is not a file URL. Nothing was sent.
        case invalidRequest
        /// Another download (in this or another process) is writing the same destination.
        case busy
        /// The partial file, its record or the destination could not be written.
        case file
        /// The response was not one a download can use (a `404`, a `500`, a `304`…): its status
        /// is ``DownloadError/statusCode``. Nothing was written for it.
        case unexpectedStatus
        /// The transfer kept failing: ``DownloadError/underlying`` is the last error.
        case interrupted
    }

    /// What kind of failure.
    public var kind: Kind
    /// What happened and what to do, in one sentence or two.
    public var message: String
    /// The status code, for ``Kind/unexpectedStatus``.
    public var statusCode: Int?
    /// The error that ended the last attempt, for ``Kind/interrupted`` (and ``Kind/file`` when
    /// Foundation reported it).
    public var underlying: (any Error)?
    /// The size of the partial file kept for a later resumption (0 when there is none).
    public var keptBytes: Int64

    /// Creates an error.
    public init(
        _ kind: Kind, _ message: String, statusCode: Int? = nil, underlying: (any Error)? = nil, keptBytes: Int64 = 0
    ) {
        self.kind = kind
        self.message = message
        self.statusCode = statusCode
        self.underlying = underlying
        self.keptBytes = keptBytes
    }

    /// The message.
    public var description: String { message }
}

/// A download running in the background (``HTTPCache/download(_:to:retries:)``).
///
/// It starts at once and runs to its end even when this object is released; ``cancel()``
/// stops it and keeps the partial file for a later resumption.
public final class Download: Sendable {
    /// The file the body ends up in.
    public let destination: URL
    /// Where the body is written until it is complete: `<destination>.partial`.
    public var partialFileURL: URL { Self.partialFileURL(for: destination) }
    /// Progress values, about one per chunk received, ending when the download ends. The
    /// newest 64 are kept for a reader that falls behind; iterate it from one task only.
    public let progress: AsyncStream<DownloadProgress>
    private let task: Task<DownloadResult, any Error>

    init(cache: HTTPCache, request: URLRequest, destination: URL, retries: Int) {
        self.destination = destination
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadProgress.self, bufferingPolicy: .bufferingNewest(64))
        progress = stream
        task = Task {
            defer { continuation.finish() }
            var worker = Downloader(
                cache: cache, request: request, destination: destination, retries: retries,
                report: { continuation.yield($0) })
            return try await worker.run()
        }
    }

    /// Waits for the download to end.
    ///
    /// - Returns: The complete file.
    /// - Throws: ``DownloadError``, or `CancellationError` after ``cancel()``.
    public func result() async throws -> DownloadResult {
        try await task.value
    }

    /// Stops the download. The partial file and its record stay, so downloading to the same
    /// destination again resumes; ``result()`` throws `CancellationError`.
    public func cancel() {
        task.cancel()
    }

    /// `<destination>.partial`: where a download to `destination` writes until it is complete.
    public static func partialFileURL(for destination: URL) -> URL {
        URL(fileURLWithPath: destination.path + ".partial")
    }

    /// `<destination>.partial.json`: the record that lets a download to `destination` resume.
    public static func recordFileURL(for destination: URL) -> URL {
        URL(fileURLWithPath: destination.path + ".partial.json")
    }
}

/// What `<destination>.partial.json` holds: what is needed to resume safely.
struct DownloadRecord: Codable, Equatable {
    var version = 1
    /// The request URL the partial file is a prefix of.
    var url: String
    /// The `ETag` of the representation being downloaded, as received.
    var etag: String?
    /// Its `Last-Modified`, as received.
    var lastModified: String?
    /// The `If-Range` value: the strong `ETag`, else a strong `Last-Modified`; `nil` when the
    /// download cannot be resumed safely.
    var validator: String?
    /// The whole length, when known.
    var expectedLength: Int64?

    /// The record for a `200` (or `203`) response to `url`.
    init(url: String, fields: HeaderFields, expectedLength: Int64?) {
        self.url = url
        etag = fields["ETag"]
        lastModified = fields["Last-Modified"]
        validator = Self.validator(of: fields)
        self.expectedLength = expectedLength
    }

    /// The value `If-Range` may carry for a response with `fields` (RFC 9110 §13.1.5): a strong
    /// entity tag; else, when there is no entity tag at all, a `Last-Modified` at least one
    /// second before `Date` (a strong date, §8.8.2.2); else `nil`.
    static func validator(of fields: HeaderFields) -> String? {
        if let value = fields["ETag"] {
            guard let tag = EntityTag(value), !tag.isWeak else { return nil }
            return tag.description
        }
        guard let text = fields["Last-Modified"], let modified = HTTPDate.parse(text),
            let dateText = fields["Date"], let date = HTTPDate.parse(dateText), date - modified >= 1
        else { return nil }
        return text
    }
}

/// The partial file, opened for appending and locked (`flock`) against other downloads.
private final class PartialFile {
    let path: String
    private let fd: Int32

    init(path: String) throws(DownloadError) {
        self.path = path
        fd = try Self.openLocked(path)
    }

    deinit { closeDescriptor(fd) }

    /// Opens (creating) `path` for appending and takes an exclusive lock on it.
    private static func openLocked(_ path: String) throws(DownloadError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw DownloadError(
                .file, "cannot create \(path): \(reason()); check that the directory exists and is writable")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = reason()
            closeDescriptor(fd)
            if busy {
                throw DownloadError(
                    .busy, "another download is writing \(path); wait for it to finish, or download to another file")
            }
            throw DownloadError(.file, "cannot lock \(path): \(reason)")
        }
        return fd
    }

    static func reason() -> String { String(cString: strerror(errno)) }

    func size() throws(DownloadError) -> Int64 {
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw DownloadError(.file, "cannot read the size of \(path): \(Self.reason())")
        }
        return Int64(status.st_size)
    }

    /// Empties the file.
    func truncate() throws(DownloadError) {
        guard ftruncate(fd, 0) == 0 else { throw DownloadError(.file, "cannot empty \(path): \(Self.reason())") }
    }

    func append(_ data: Data) throws(DownloadError) {
        let failed: Int32? = data.withUnsafeBytes { buffer -> Int32? in
            guard let base = buffer.baseAddress else { return nil }
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
        if let failed {
            throw DownloadError(
                .file, "cannot write \(path): \(String(cString: strerror(failed))); free some space and download again")
        }
    }

    func sync() throws(DownloadError) {
        guard fsync(fd) == 0 else { throw DownloadError(.file, "cannot flush \(path) to disk: \(Self.reason())") }
    }
}

/// `close(2)`, ignoring failure.
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// Bytes per second over about the last second.
private struct RateMeter {
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
private struct BodyCutShort: Error, CustomStringConvertible {
    var received: Int64
    var expected: Int64
    var description: String { "the body ended at byte \(received) of \(expected)" }
}

/// The loop behind a ``Download``: one task, so its state needs no lock.
private struct Downloader {
    let cache: HTTPCache
    let request: URLRequest
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
        cache: HTTPCache, request: URLRequest, destination: URL, retries: Int,
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
    private var urlString: String { request.url?.absoluteString ?? "" }

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
                    outbound.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
                    outbound.setValue(validator, forHTTPHeaderField: "If-Range")
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
                return try finish(head)
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
            return try finish(head)
        }
    }

    private struct Inconsistent: Error {
        var why: String
    }

    private func validate() throws(DownloadError) {
        guard destination.isFileURL else {
            throw DownloadError(.invalidRequest, "the destination \(destination) is not a file URL; pass a file URL")
        }
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else {
            throw DownloadError(
                .invalidRequest,
                "only http and https URLs can be downloaded, not \(request.url?.absoluteString ?? "none")")
        }
        let method = (request.httpMethod ?? "GET").uppercased()
        guard method == "GET" else {
            throw DownloadError(.invalidRequest, "a download is a GET request, not \(method); use bytes(for:) instead")
        }
        for name in ["Range", "If-Range"] where request.value(forHTTPHeaderField: name) != nil {
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
        if let declared = head.fields["Content-Length"].flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }),
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
            guard let value = head.fields["Content-Range"], let contentRange = ContentRange(value),
                let range = contentRange.range
            else {
                return .inconsistent(
                    "the 206 response has no single Content-Range (\(head.fields["Content-Range"] ?? "none"))")
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
            if let expected = record.etag, let etag = head.fields["ETag"],
                !(EntityTag(etag).flatMap { tag in EntityTag(expected).map { tag.strongMatches($0) } } ?? false)
            {
                return .inconsistent("the 206 response has ETag \(etag), not \(expected)")
            }
            if record.etag == nil, let expected = record.lastModified, let modified = head.fields["Last-Modified"],
                HTTPDate.parse(modified) != HTTPDate.parse(expected)
            {
                return .inconsistent("the 206 response has Last-Modified \(modified), not \(expected)")
            }
            return .append(end: range.upperBound + 1, completeLength: contentRange.completeLength)
        case 416:
            let complete = head.fields["Content-Range"].flatMap { ContentRange($0) }?.completeLength
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
        let reason = HTTPURLResponse.localizedString(forStatusCode: head.statusCode)
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
    private mutating func finish(_ head: CachedResponseHead) throws -> DownloadResult {
        guard let file else { throw DownloadError(.file, "no partial file") }
        try file.sync()
        guard rename(partialPath, destination.path) == 0 else {
            throw DownloadError(
                .file,
                "cannot move \(partialPath) to \(destination.path): \(PartialFile.reason()); the complete download "
                    + "is kept in \(partialPath)", keptBytes: offset)
        }
        unlink(recordPath)
        let directory = open(destination.deletingLastPathComponent().path, O_RDONLY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            closeDescriptor(directory)
        }
        publish()
        return DownloadResult(
            fileURL: destination, totalBytes: offset, resumptions: resumptions, restarts: restarts,
            attempts: attempts, transferredBytes: transferred, response: head)
    }
}
