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
    /// The requests go through the cache like any other (``bytes(for:)-(FetchRequest)``): a fresh stored
    /// response can answer without contacting the origin.
    ///
    /// ```swift
    /// let download = cache.download(FetchRequest(url: url), to: URL(fileURLWithPath: "big.iso"))
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
    public func download(_ request: FetchRequest, to destination: URL, retries: Int = 5) -> Download {
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
    /// How the last response was obtained (a fresh stored response is a `CacheOutcome.hit`).
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
        /// The file received does not match the `Repr-Digest` (or a response's
        /// `Content-Digest`) the origin stated (RFC 9530): the partial file was discarded, and
        /// ``DownloadError/underlying`` is the ``DigestMismatch``.
        case digestMismatch
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

/// A download running in the background (``HTTPCache/download(_:to:retries:)-(FetchRequest,_,_)``).
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

    init(cache: HTTPCache, request: FetchRequest, destination: URL, retries: Int) {
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

    /// A download that fails with `error` at once, writing nothing.
    package init(failing error: DownloadError, destination: URL) {
        self.destination = destination
        progress = AsyncStream { $0.finish() }
        task = Task { throw error }
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
