import CacheExchange
import CacheStorage
import Foundation

/// The body of a streamed response (``HTTPCache/bytes(for:)-(FetchRequest)``): chunks of bytes, read once.
///
/// A stored body is read from the store a block at a time as the sequence is iterated, each
/// block verified against its checksum; a body from the origin is written to the store while
/// it is passed on, and the entry is committed when the last chunk has been read. A body
/// that is not read to the end is not stored.
public struct ResponseBody: AsyncSequence, Sendable {
    public typealias Element = Data

    let source: any BodySource

    /// Reads the chunks in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: any BodySource

        public mutating func next() async throws -> Data? { try await source.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }

    /// Every remaining byte.
    public func collect() async throws -> Data {
        var data = Data()
        for try await chunk in self { data.append(chunk) }
        return data
    }
}

/// Produces a body's chunks; `nil` at the end.
protocol BodySource: AnyObject, Sendable {
    func next() async throws -> Data?
}

/// A body already in memory.
final class DataSource: BodySource, @unchecked Sendable {
    private var data: Data?

    init(_ data: Data) { self.data = data.isEmpty ? nil : data }

    /// The bytes not handed out yet, without taking them.
    var remaining: Data { data ?? Data() }

    func next() async throws -> Data? {
        defer { data = nil }
        return data
    }
}

/// A stored body, read in verified blocks from the version opened when the response was
/// chosen.
final class StoredSource: BodySource, @unchecked Sendable {
    private let body: any StoredBody
    private let end: Int64
    private var offset: Int64
    static let chunkSize: Int64 = 256 * 1024

    /// Reads bytes `range` of `body`.
    init(_ body: any StoredBody, range: Range<Int64>) {
        self.body = body
        offset = range.lowerBound
        end = range.upperBound
    }

    private var ahead: Data?

    /// Reads the first block now (it is then the first chunk handed out).
    func readAhead() throws {
        ahead = try readBlock()
    }

    func next() async throws -> Data? {
        if let ahead {
            self.ahead = nil
            return ahead
        }
        return try readBlock()
    }

    private func readBlock() throws -> Data? {
        guard offset < end else { return nil }
        let last = min(end, offset + Self.chunkSize) - 1
        let bytes = try body.read(offset...last)
        guard !bytes.isEmpty else {
            throw StorageError(.corrupted, "a stored body ended at \(offset), before \(end) bytes")
        }
        offset += Int64(bytes.count)
        return Data(bytes)
    }
}

/// What reading a body from the origin throws when the body does not match the
/// `Content-Digest` or `Repr-Digest` its response stated (RFC 9530): it names the URL, the field,
/// the algorithm and both digests; the body was not stored, and its last bytes are withheld.
public typealias DigestMismatch = CacheExchange.DigestMismatch

/// A body from the origin, stored (when a recorder is given) while it is passed on. The
/// recorder commits the entry when the body is complete; a body cut off by the network is an
/// error for the reader and never a complete entry; one the reader drops is not stored.
final class TeeSource: BodySource, @unchecked Sendable {
    private var iterator: AsyncThrowingStream<Data, any Error>.AsyncIterator
    private let recorder: ResponseRecorder?
    private let expectedLength: Int64?
    private var received: Int64 = 0
    private var done = false

    /// - Parameters:
    ///   - recorder: Stores the body; `nil` when it is not stored.
    ///   - expectedLength: The bytes the network should deliver (`Content-Length`), when
    ///     known: a body that ends short of it is cut off.
    init(_ body: AsyncThrowingStream<Data, any Error>, recorder: ResponseRecorder?, expectedLength: Int64?) {
        iterator = body.makeAsyncIterator()
        self.recorder = recorder
        self.expectedLength = expectedLength
    }

    deinit {
        // Not read to the end: nothing is stored.
        if !done { recorder?.abandon() }
    }

    /// Stores `chunk` ahead of the network's bytes (a stored part being completed).
    func store(_ chunk: Data) {
        chunk.withUnsafeBytes { recorder?.record($0) }
    }

    func next() async throws -> Data? {
        guard !done else { return nil }
        let chunk: Data?
        do {
            chunk = try await iterator.next()
        } catch {
            done = true
            if error is CancellationError { recorder?.abandon() } else { recorder?.cut() }
            throw error
        }
        guard let chunk else {
            done = true
            // A cancelled reader's stream ends without an error, and a connection closed early
            // may too: neither is a complete body.
            if Task.isCancelled {
                recorder?.abandon()
                throw CancellationError()
            }
            if let expectedLength, received != expectedLength {
                recorder?.cut()
                throw URLError(
                    .networkConnectionLost,
                    userInfo: [
                        NSLocalizedDescriptionKey:
                            "the response ended after \(received) of its \(expectedLength) bytes; try again"
                    ])
            }
            recorder?.finish()
            try failOnMismatch()
            return nil
        }
        received += Int64(chunk.count)
        store(chunk)
        try failOnMismatch()
        return chunk
    }

    /// A body that does not match its digest (RFC 9530) was not stored, and is never handed
    /// on as complete: its last bytes are withheld and the reader gets the mismatch.
    private func failOnMismatch() throws {
        guard let mismatch = recorder?.mismatch else { return }
        done = true
        throw mismatch
    }
}

/// A stored part followed by the rest from the origin (RFC 9111 §3.4); the part's bytes are
/// stored again ahead of the rest, so the combined entry is complete.
final class CombinedSource: BodySource, @unchecked Sendable {
    private let prefix: StoredSource
    private let rest: TeeSource
    private var prefixDone = false

    init(prefix: StoredSource, rest: TeeSource) {
        self.prefix = prefix
        self.rest = rest
    }

    func next() async throws -> Data? {
        if !prefixDone {
            if let chunk = try await prefix.next() {
                rest.store(chunk)
                return chunk
            }
            prefixDone = true
        }
        return try await rest.next()
    }
}
