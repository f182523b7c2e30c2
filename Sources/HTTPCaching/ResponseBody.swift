import CacheStorage
import Foundation

/// The body of a streamed response (``HTTPCache/bytes(for:)``): chunks of bytes, read once.
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

/// A body from the origin, written to the store (when a writer is given) while it is passed
/// on. The entry is committed after the last chunk; an error, or the body being dropped
/// before its end, aborts it. `finished` runs exactly once either way, with whether the entry
/// was committed.
final class TeeSource: BodySource, @unchecked Sendable {
    private var iterator: AsyncThrowingStream<Data, any Error>.AsyncIterator
    private var writer: (any EntryWriter)?
    private let incompleteFacts: [UInt8]?
    private let expectedLength: Int64?
    private var written: Int64 = 0
    private var received: Int64 = 0
    private var finished: (@Sendable (Bool) -> Void)?
    private let log: @Sendable (String) -> Void
    private var done = false

    /// - Parameters:
    ///   - expectedLength: The bytes the network should deliver (`Content-Length`), when
    ///     known: a body that ends short of it is cut off, never stored as complete.
    ///   - incompleteFacts: When set, a body the network cuts off is kept as an incomplete
    ///     entry with these facts (RFC 9111 §3.3) instead of being discarded.
    init(
        _ body: AsyncThrowingStream<Data, any Error>, writer: (any EntryWriter)?, expectedLength: Int64? = nil,
        incompleteFacts: [UInt8]? = nil, log: @escaping @Sendable (String) -> Void,
        finished: (@Sendable (Bool) -> Void)?
    ) {
        iterator = body.makeAsyncIterator()
        self.writer = writer
        self.expectedLength = expectedLength
        self.incompleteFacts = incompleteFacts
        self.log = log
        self.finished = finished
    }

    deinit { finish(committed: false) }

    /// Stores `chunk` ahead of the network's bytes (a stored part being completed).
    func store(_ chunk: Data) {
        guard let current = writer else { return }
        do {
            try current.append(Array(chunk))
            written += Int64(chunk.count)
        } catch {
            log("stopped storing a response: \(error)")
            current.abort()
            writer = nil
        }
    }

    func next() async throws -> Data? {
        guard !done else { return nil }
        let chunk: Data?
        do {
            chunk = try await iterator.next()
        } catch {
            if !(error is CancellationError) { keepIncomplete() }
            finish(committed: false)
            throw error
        }
        guard let chunk else {
            // A cancelled reader's stream ends without an error, and a connection closed early
            // may too: neither is a complete body.
            if Task.isCancelled {
                finish(committed: false)
                throw CancellationError()
            }
            if let expectedLength, received != expectedLength {
                keepIncomplete()
                finish(committed: false)
                throw URLError(
                    .networkConnectionLost,
                    userInfo: [
                        NSLocalizedDescriptionKey:
                            "the response ended after \(received) of its \(expectedLength) bytes; try again"
                    ])
            }
            var committed = false
            if let writer {
                do {
                    try writer.commit()
                    committed = true
                } catch {
                    log("could not store the response: \(error) (it was served, not cached)")
                }
            }
            writer = nil
            finish(committed: committed)
            return nil
        }
        received += Int64(chunk.count)
        // Too large or the disk failed: the rest is passed on without storing.
        store(chunk)
        return chunk
    }

    /// Keeps what arrived before the network cut the body off, to be resumed (RFC 9111 §3.3).
    private func keepIncomplete() {
        guard let writer, let incompleteFacts, written > 0 else { return }
        do {
            try writer.commitIncomplete(facts: incompleteFacts)
        } catch {
            log("could not keep the incomplete response: \(error)")
        }
        self.writer = nil
    }

    private func finish(committed: Bool) {
        guard !done else { return }
        done = true
        if !committed { writer?.abort() }
        writer = nil
        finished?(committed)
        finished = nil
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
