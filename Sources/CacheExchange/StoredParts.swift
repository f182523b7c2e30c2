import CacheSemantics
import CacheStorage

/// Parts of a representation kept from `206` responses (RFC 9111 §3.3, §3.4).
///
/// A part is an incomplete entry: its stored fields are the `200`'s with the complete
/// `Content-Length`, and a part that does not start at byte 0 keeps its `Content-Range` (which
/// says where its bytes go) and has a variant key of its own (its variant's, `U+0002`, its
/// offset), so that several parts of one variant are kept side by side. A first part has its
/// variant's key: it is the incomplete response a cut-off `200` leaves, resumed as one.
///
/// Once a part is stored, the parts of its variant with the same strong validator that
/// overlap or adjoin it are combined into one entry (``combine(after:store:candidates:engine:log:)``);
/// when they cover the representation it is a complete `200` and the parts are gone.
enum StoredParts {
    /// The bytes of the representation `candidate` holds; `nil` for a complete response.
    static func held(_ candidate: StoredCandidate) -> ClosedRange<Int64>? {
        guard candidate.facts.flags.has(.incomplete), candidate.entry.bodySize > 0 else { return nil }
        let offset = offset(candidate.entry.head.fields)
        return offset...(offset + candidate.entry.bodySize - 1)
    }

    /// Where a part's bytes start: its `Content-Range`, or 0.
    static func offset(_ fields: HeaderFields) -> Int64 {
        fields[.contentRange].flatMap { ContentRange($0) }?.range?.lowerBound ?? 0
    }

    /// The variant key of the variant a stored entry's key belongs to.
    static func variant(of key: String) -> Substring {
        key.split(separator: "\u{2}", maxSplits: 1, omittingEmptySubsequences: false)[0]
    }

    /// The key of `variant`'s part starting at `offset`.
    static func key(_ variant: some StringProtocol, offset: Int64) -> String {
        offset == 0 ? String(variant) : variant + "\u{2}" + String(offset)
    }

    /// `head` of a part placed under its own variant key.
    static func placed(_ head: EntryHead) -> EntryHead {
        guard !head.isComplete else { return head }
        var head = head
        head.variantKey = key(variant(of: head.variantKey), offset: offset(head.fields))
        return head
    }

    /// The parts among `candidates` that a complete response of `variant` makes useless.
    static func superseded(by variant: String, in candidates: [StoredCandidate]) -> [EntryID] {
        candidates.filter { $0.facts.flags.has(.incomplete) && Self.variant(of: $0.entry.head.variantKey) == variant }
            .map(\.entry.id)
    }

    /// Combines the part `committed` with the parts of its variant among `candidates` (read
    /// after it was stored) that have the same strong validator and overlap or adjoin it.
    static func combine(
        after committed: StoredEntry, store: any CacheStore, candidates: [StoredCandidate], engine: CacheEngine,
        log: @Sendable (String) -> Void
    ) {
        let variant = variant(of: committed.head.variantKey)
        guard let mine = candidates.first(where: { $0.entry.id == committed.id }), let length = mine.facts.contentLength
        else { return }
        var parts = candidates.compactMap { candidate -> (candidate: StoredCandidate, held: ClosedRange<Int64>)? in
            guard Self.variant(of: candidate.entry.head.variantKey) == variant, let held = held(candidate),
                candidate.entry.id == mine.entry.id || engine.partsCombine(mine.facts, candidate.facts)
            else { return nil }
            return (candidate, held)
        }
        parts.sort { $0.held.lowerBound < $1.held.lowerBound }
        // The run of overlapping or adjoining parts that holds `committed`.
        var runs: [[(candidate: StoredCandidate, held: ClosedRange<Int64>)]] = []
        for part in parts {
            if let last = runs.last?.last, part.held.lowerBound <= last.held.upperBound + 1 {
                runs[runs.count - 1].append(part)
            } else {
                runs.append([part])
            }
        }
        guard let run = runs.first(where: { $0.contains { $0.candidate.entry.id == committed.id } }), run.count > 1
        else { return }
        let union = run[0].held.lowerBound...run.map(\.held.upperBound).max()!
        let complete = union == 0...(length - 1)
        var head = mine.entry.head
        var facts = mine.facts
        // The combined bytes are no one message's content (RFC 9530 §2).
        head.fields.removeAll(named: .contentDigest)
        var check: IntegrityCheck?
        if complete || union.lowerBound == 0 {
            head.fields.removeAll(named: .contentRange)
        } else {
            head.fields[.contentRange] = ContentRange(range: union, completeLength: length).fieldValue
        }
        if complete {
            // The whole representation at last: its Repr-Digest can be checked (RFC 9530 §3).
            let digests = IntegrityDigests(head.fields, including: [.reprDigest])
            check = IntegrityCheck(digests, url: committed.head.url, checksRepresentation: true)
            facts.integrity = digests.storedNote(checksRepresentation: true, decodedCodings: [])
            facts.flags.remove(.incomplete)
            head.facts = facts.serialized()
            head.isComplete = true
            head.variantKey = String(variant)
        } else {
            head.variantKey = key(variant, offset: union.lowerBound)
        }
        do {
            let writer = HashingWriter(try store.makeWriter(for: head), check)
            var next = union.lowerBound
            for part in run where part.held.upperBound >= next {
                let offset = part.held.lowerBound
                try store.openBody(of: part.candidate.entry.id)
                    .copy((next - offset)...(part.held.upperBound - offset), to: writer)
                next = part.held.upperBound + 1
            }
            if check?.verify() != nil {
                // Parts that do not make the representation they claim: none can be trusted. Not
                // logged: the client reading the whole (a download) is told, once, by its own check.
                writer.abort()
                for part in run { try? store.remove(part.candidate.entry.id) }
                return
            }
            let combined = try writer.commit()
            let replaced = complete ? superseded(by: String(variant), in: candidates) : run.map(\.candidate.entry.id)
            for id in replaced where id != combined.id { try? store.remove(id) }
        } catch {
            log("could not combine the stored parts of \(committed.head.url): \(error); they are kept apart")
        }
    }
}

/// Passes what is written to an entry through an ``IntegrityCheck`` on its way.
private final class HashingWriter: EntryWriter {
    private let base: any EntryWriter
    private let check: IntegrityCheck?

    init(_ base: any EntryWriter, _ check: IntegrityCheck?) {
        self.base = base
        self.check = check
    }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        chunk.withUnsafeBytes { check?.update($0) }
        try base.append(chunk)
    }

    func commit() throws(StorageError) -> StoredEntry { try base.commit() }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        try base.commitIncomplete(facts: facts)
    }

    func abort() { base.abort() }
}
