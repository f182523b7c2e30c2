import CacheSemantics
import CacheStorage

/// Stores the body of a response from the origin while the host relays it: fed the bytes in
/// order, it commits the entry as soon as they are complete (before the last of them reach the
/// client, so a request right after is a plain hit), and never commits a body that was cut off.
///
/// A response with `Content-Digest` or `Repr-Digest` (RFC 9530) is hashed as it is stored,
/// and checked before it is committed: a body that does not match is not stored (an entry it
/// would have replaced stays: it was checked when it was stored, and one damaged transfer
/// should not turn into misses for every later request), and ``mismatch`` says why; the host
/// then fails the client's response instead of completing it.
///
/// Used by one thread at a time (the host's reader of the origin's body).
public final class ResponseRecorder: @unchecked Sendable {
    private var writer: (any EntryWriter)?
    private let integrity: IntegrityCheck?
    private let expectedLength: Int64?
    private let incompleteFacts: [UInt8]?
    private let url: String
    private let log: @Sendable (String) -> Void
    private var onSettled: (@Sendable (_ outcome: Settlement) -> Void)?
    private var written: Int64 = 0

    init(
        writer: any EntryWriter, expectedLength: Int64?, incompleteFacts: [UInt8]?, integrity: IntegrityCheck?,
        url: String, log: @escaping @Sendable (String) -> Void,
        onSettled: @escaping @Sendable (_ outcome: Settlement) -> Void
    ) {
        self.writer = writer
        self.integrity = integrity
        self.expectedLength = expectedLength
        self.incompleteFacts = incompleteFacts
        self.url = url
        self.log = log
        self.onSettled = onSettled
        if expectedLength == 0 { commit() }
    }

    deinit {
        // Dropped before the body ended: nothing is stored.
        writer?.abort()
        settle(.notStored)
    }

    /// What came of a recording: the response stored whole, not stored (cut off, given up,
    /// not matching its digest), or refused by the store (its write failed, or it was too
    /// busy to take it without waiting).
    enum Settlement {
        case stored
        case notStored
        case refused
    }

    /// Whether the body is still being stored (not committed, dropped or refused yet).
    public var isStoring: Bool { writer != nil }

    /// Set when the body's end was reached and it does not match its response's digest
    /// (RFC 9530): it was not stored, and the client must not get the body as complete.
    public private(set) var mismatch: DigestMismatch?

    /// What to do when the store fails to write, for log lines.
    static let storeAdvice = "check the store's free space and permissions, or that it is reachable"

    /// What to do about `error`, for the line that reports it: ``storeAdvice``, unless the store
    /// was only busy (its message says what happened, and nothing needs doing).
    static func advice(_ error: StorageError) -> String {
        error.kind == .busy ? "" : "; " + storeAdvice
    }

    /// Stores the next bytes, ahead of the origin's (a stored part being completed, RFC 9111
    /// §3.4) or from it. Past the expected length nothing more is stored; reaching it commits.
    public func record(_ bytes: UnsafeRawBufferPointer) {
        guard writer != nil else { return }
        record(Array(bytes))
    }

    /// Stores the next bytes as the raw-buffer `record(_:)` does, keeping the array itself (no
    /// copy): a host that sends the same bytes on shares it with the store.
    public func record(_ bytes: [UInt8]) {
        guard let current = writer else { return }
        if let expectedLength, written + Int64(bytes.count) > expectedLength {
            log("not storing \(url): the origin sent more than its Content-Length")
            return drop(.notStored)
        }
        do {
            try current.append(bytes)
        } catch {
            log("stopped storing \(url): \(error) (it is served, not stored)\(Self.advice(error))")
            return drop(.refused)
        }
        if let integrity { bytes.withUnsafeBytes { integrity.update($0) } }
        written += Int64(bytes.count)
        if written == expectedLength { commit() }
    }

    /// The body ended as its framing says: commits it when no length was expected (it ended
    /// with the connection or the last chunk); one shorter than expected is cut.
    public func finish() {
        guard writer != nil else { return }
        if let expectedLength, written != expectedLength { return cut() }
        commit()
    }

    /// The body was cut off: what arrived is kept as an incomplete response when that was
    /// asked for (RFC 9111 §3.3, to be completed later), and dropped otherwise.
    public func cut() {
        guard let current = writer else { return }
        writer = nil
        if let incompleteFacts, written > 0 {
            do {
                try current.commitIncomplete(facts: incompleteFacts)
            } catch {
                log("could not keep the incomplete response for \(url): \(error)\(Self.advice(error))")
                return settle(.refused)
            }
        } else {
            current.abort()
        }
        settle(.notStored)
    }

    private func commit() {
        guard let current = writer else { return }
        writer = nil
        if let mismatch = integrity?.verify() {
            // A damaged body is never stored (RFC 9530 §2, §3): what is stored stays as it was.
            // The host reports it, with what it did about its client.
            self.mismatch = mismatch
            current.abort()
            return settle(.notStored)
        }
        do {
            try current.commit()
            settle(.stored)
        } catch {
            log("could not store the response for \(url): \(error) (it was served, not stored)\(Self.advice(error))")
            settle(.refused)
        }
    }

    /// The relay was given up (its reader went away): nothing is stored.
    public func abandon() { drop(.notStored) }

    private func drop(_ outcome: Settlement) {
        writer?.abort()
        writer = nil
        settle(outcome)
    }

    private func settle(_ outcome: Settlement) {
        let action = onSettled
        onSettled = nil
        action?(outcome)
    }
}
