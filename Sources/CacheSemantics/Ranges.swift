/// How a cache answers a request's `Range` from a complete stored response
/// (RFC 9110 §14.2, §13.1.5, §15.3.7).
public enum RangeAnswer: Hashable, Sendable {
    /// Send the whole representation: the request has no valid `Range`, is not a `GET`, the
    /// stored status is not 200, or its `If-Range` does not hold.
    case whole
    /// `206 (Partial Content)` with these ranges: one is a single part with
    /// `Content-Range`; several are `multipart/byteranges` (overlapping or adjacent ranges
    /// coalesced, §15.3.7.2).
    case partial([ClosedRange<Int64>])
    /// `416 (Range Not Satisfiable)` with `Content-Range: bytes */length` (§15.5.17).
    case unsatisfiable(length: Int64)
}

extension CacheEngine {
    /// How to answer `method` with request `fields` from a complete stored response of
    /// `length` body bytes (RFC 9110 §14.2): a `Range` of another unit or with bad syntax is
    /// ignored, `If-Range` is evaluated per §13.1.5 (an entity tag by strong comparison, a
    /// date only when it equals a strong `Last-Modified`).
    public func rangeAnswer(
        method: String, request fields: HeaderFields, stored: StoredResponseFacts, length: Int64
    ) -> RangeAnswer {
        guard method == "GET", stored.status == 200, let text = fields[.range], let request = ByteRangeRequest(text)
        else { return .whole }
        if let condition = fields[.ifRange], !ifRangeHolds(condition, stored) { return .whole }
        let satisfiable = request.satisfiableRanges(length: length)
        guard !satisfiable.isEmpty else { return .unsatisfiable(length: length) }
        return .partial(satisfiable.count == 1 ? satisfiable : Self.coalesced(satisfiable))
    }

    /// Evaluates `If-Range` against a stored response (RFC 9110 §13.1.5).
    func ifRangeHolds(_ condition: String, _ stored: StoredResponseFacts) -> Bool {
        let text = ASCII.trimmed(Substring(condition))
        // "A valid entity-tag can be distinguished from a valid HTTP-date by examining the
        // first three characters for a DQUOTE."
        if text.utf8.prefix(3).contains(UInt8(ascii: "\"")) {
            guard let tag = EntityTag(text), let storedTag = stored.entityTag else { return false }
            return tag.strongMatches(storedTag)
        }
        guard let date = HTTPDate.parse(text), let lastModified = strongLastModified(stored) else { return false }
        return date == lastModified
    }

    /// The stored `Last-Modified` when it is a strong validator: at least one second before
    /// the response's `Date` (RFC 9110 §8.8.2.2).
    func strongLastModified(_ stored: StoredResponseFacts) -> Timestamp? {
        strongLastModified(stored.lastModified, date: stored.date)
    }

    /// `lastModified` when it is a strong validator for a response dated `date`: at least one
    /// second before it (RFC 9110 §8.8.2.2).
    func strongLastModified(_ lastModified: Timestamp?, date: Timestamp) -> Timestamp? {
        guard let lastModified, date - lastModified >= 1 else { return nil }
        return lastModified
    }

    /// The fields that ask the origin for the rest of a stored incomplete response of
    /// `storedLength` bytes (RFC 9111 §3.3, RFC 9110 §13.1.5, §14.2): `Range: bytes=N-` and
    /// `If-Range` with its strong entity tag, else its strong `Last-Modified`. `nil` when it
    /// has no strong validator: the parts could not be proven to belong together.
    public func resumptionFields(stored: StoredResponseFacts, storedLength: Int64) -> HeaderFields? {
        let validator: String
        if let tag = stored.entityTag, !tag.isWeak {
            validator = tag.description
        } else if stored.entityTag == nil, let lastModified = strongLastModified(stored) {
            validator = HTTPDate.format(lastModified)
        } else {
            return nil
        }
        return [
            HeaderField(name: .range, value: "bytes=\(storedLength)-"), HeaderField(name: .ifRange, value: validator),
        ]
    }

    /// Whether `response` continues a stored incomplete response of `storedLength` bytes so
    /// that the two can be combined (RFC 9111 §3.4, RFC 9110 §15.3.7.3): a `206` whose
    /// `Content-Range` starts at `storedLength` and runs to the end of a complete length that
    /// agrees with the stored `Content-Length`, carrying the same strong validator.
    public func continues(stored: StoredResponseFacts, storedLength: Int64, response: ResponseHead) -> Bool {
        guard response.status == 206, let text = response.fields[.contentRange],
            let contentRange = ContentRange(text), let range = contentRange.range,
            let complete = contentRange.completeLength,
            range.lowerBound == storedLength, range.upperBound == complete - 1
        else { return false }
        if let known = stored.contentLength, known != complete { return false }
        if let tag = stored.entityTag {
            guard !tag.isWeak, let new = response.fields[.eTag].flatMap({ EntityTag($0) }) else { return false }
            return new.strongMatches(tag)
        }
        guard let lastModified = strongLastModified(stored),
            let new = response.fields[.lastModified].flatMap({ HTTPDate.parse($0) })
        else { return false }
        return new == lastModified
    }

    /// The stored incomplete response a request could resume (RFC 9111 §3.3): the most
    /// recent one whose `Vary` matches `fields` and that has a strong validator. `nil` members
    /// of `candidates` are not considered (parts that do not start at byte 0).
    public func resumableVariant(_ fields: HeaderFields, candidates: [StoredResponseFacts?]) -> Int? {
        candidates.indices
            .filter { index in
                guard let facts = candidates[index] else { return false }
                return facts.flags.has(.incomplete) && facts.varyMatches(fields)
                    && resumptionFields(stored: facts, storedLength: 0) != nil
            }
            .max { candidates[$0]!.responseTime < candidates[$1]!.responseTime }
    }

    /// Whether a stored incomplete response can answer `request` (RFC 9111 §3.4: "the request
    /// is partial and specifies a range wholly within the incomplete response"), and how: the
    /// decision of a lookup of it as if it were complete (fresh, or allowed stale), with its
    /// index. `held[i]` is the bytes of the representation candidate `i` holds (`nil` for a
    /// complete one); its complete length is its `Content-Length`. `nil` when none can: a
    /// request without a valid `Range`, with `If-Range` or its own validators, for a range not
    /// wholly held, or one whose stored response would need validation first.
    public func partialUse(
        _ request: CacheRequest, candidates: [StoredResponseFacts], held: [ClosedRange<Int64>?], now: Timestamp
    ) -> CachedUse? {
        let fields = request.head.fields
        guard request.head.method == "GET", !request.isConditional, !fields.contains(.ifRange),
            let text = fields[.range], let ranges = ByteRangeRequest(text)
        else { return nil }
        for index in candidates.indices where index < held.count {
            var facts = candidates[index]
            guard let part = held[index], facts.flags.has(.incomplete), facts.status == 200,
                facts.varyMatches(fields), let length = facts.contentLength
            else { continue }
            let wanted = ranges.satisfiableRanges(length: length)
            guard !wanted.isEmpty, wanted.allSatisfy({ part.contains($0.lowerBound) && part.contains($0.upperBound) })
            else { continue }
            facts.flags.remove(.incomplete)
            // The lookup's decision for it alone (not through `lookup`, whose hit path stays as
            // it was: a call of it here made the optimizer split it behind a thunk).
            let single = [facts]
            let decision = single.withUnsafeBufferPointer { decide(request, 0, $0.baseAddress!, single, now: now) }
            guard case .serve(var use) = decision else { continue }
            use.candidate = index
            return use
        }
        return nil
    }

    /// Whether two stored parts of a representation may be combined (RFC 9111 §3.4): the same
    /// strong validator (an entity tag by strong comparison, else the same strong
    /// `Last-Modified`), and the same complete length. Never with weak or differing validators.
    public func partsCombine(_ first: StoredResponseFacts, _ second: StoredResponseFacts) -> Bool {
        guard let length = first.contentLength, second.contentLength == length else { return false }
        if let tag = first.entityTag {
            guard let other = second.entityTag else { return false }
            return tag.strongMatches(other)
        }
        guard second.entityTag == nil, let lastModified = strongLastModified(first) else { return false }
        return strongLastModified(second) == lastModified
    }

    /// `ranges` with overlapping or adjacent ones merged (RFC 9110 §15.3.7.2 allows it), in the
    /// order the request gave them (§15.3.7.2: parts SHOULD follow it): a merged range where
    /// the first of its members was.
    static func coalesced(_ ranges: [ClosedRange<Int64>]) -> [ClosedRange<Int64>] {
        var merged: [(range: ClosedRange<Int64>, first: Int)] = []
        for (index, range) in ranges.enumerated().sorted(by: { $0.element.lowerBound < $1.element.lowerBound }) {
            if let last = merged.last, range.lowerBound <= last.range.upperBound + 1 {
                merged[merged.count - 1] = (
                    last.range.lowerBound...max(last.range.upperBound, range.upperBound), min(last.first, index)
                )
            } else {
                merged.append((range, index))
            }
        }
        return merged.sorted { $0.first < $1.first }.map(\.range)
    }
}
