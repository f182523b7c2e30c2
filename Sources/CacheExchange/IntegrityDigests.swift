import CacheCrypto
import CacheSemantics
import CacheStorage

/// The integrity digests a response sends (RFC 9530), read from its `Content-Digest` (§2) and
/// `Repr-Digest` (§3) fields, and the incremental check of its body against them while the
/// body is stored.
///
/// What is hashed against what, per host (the decision, and why):
/// - `Content-Digest` covers the content as sent, after the transfer coding is removed and
///   before any content coding is (§2). The proxy never decodes, so the bytes it stores are
///   exactly that content; so are the app's when its transport decodes nothing. When a stored
///   part is completed by a `206` (RFC 9111 §3.4), the `206`'s own `Content-Digest` (of its
///   part) is not taken into the combined fields; a cut `200`'s, which covers the whole, is
///   checked over the whole.
/// - `Repr-Digest` covers the whole selected representation (§3; RFC 9110 §3.2: content codings
///   included). A `200` without `Content-Range` carries all of it as its content, so its bytes
///   are checked; a stored part completed by a `206` is the whole representation too, and is
///   checked whole (the resumed download's check). A `206` stored as a part carries only a
///   part: its `Repr-Digest` cannot be checked then, and is not rejected.
/// - When the app's transport undid a content coding (`HTTPClientTransport` decodes gzip,
///   deflate and br on Linux, URLSession does on Apple platforms), the bytes stored are not the
///   ones either field describes: neither is checked, and the stored entry says so.
///
/// Algorithms other than `sha-256` and `sha-512` are ignored, as §2 and §3 allow (a recipient
/// ignores algorithms it does not support); a field that is not a Dictionary (RFC 9651 §3.2), a
/// value that is not a Byte Sequence, bad base64 or a digest of the wrong length for its
/// algorithm is ignored too, with the reason kept for `explain`: never an error, never a
/// crash.
package struct IntegrityDigests: Sendable, Equatable {
    /// One digest a field states.
    package struct Expected: Sendable, Equatable {
        /// `Content-Digest` or `Repr-Digest`.
        package var field: HeaderField.Name
        package var algorithm: DigestAlgorithm
        package var digest: [UInt8]
    }

    /// The digests that can be checked, in the order the fields list them.
    package var expected: [Expected] = []
    /// Why parts of the fields are ignored ("content-digest ignored: bad base64").
    package var ignored: [String] = []

    /// The digests `fields` state; `including` names the fields to read.
    package init(
        _ fields: HeaderFields, including names: [HeaderField.Name] = [.contentDigest, .reprDigest]
    ) {
        for name in names {
            guard let text = fields[name] else { continue }
            let label = name.lowercasedName
            guard let dictionary = StructuredFields.parseDictionary(text) else {
                ignored.append("\(label) ignored: not a structured dictionary (RFC 9651 §3.2)")
                continue
            }
            for (key, member) in dictionary {
                guard let algorithm = DigestAlgorithm(token: key) else { continue }  // unknown: ignored (§2)
                guard case .item(.byteSequence(let base64), _) = member else {
                    ignored.append("\(label) \(key) ignored: its value is not a byte sequence")
                    continue
                }
                guard let digest = Base64.decode(Substring(base64)) else {
                    ignored.append("\(label) \(key) ignored: bad base64")
                    continue
                }
                guard digest.count == algorithm.byteCount else {
                    ignored.append(
                        "\(label) \(key) ignored: \(digest.count) bytes, not the \(algorithm.byteCount) of \(key)")
                    continue
                }
                expected.append(Expected(field: name, algorithm: algorithm, digest: digest))
            }
        }
    }

    /// What a stored entry keeps of the check (``StoredResponseFacts/integrity``), for a body
    /// stored whole only if it matched: `nil` when no digest field was sent.
    /// - Parameters:
    ///   - checksRepresentation: Whether the bytes stored are the whole representation, so
    ///     that `Repr-Digest` is checked.
    ///   - decodedCodings: The content codings the host undid before storing: then nothing is
    ///     checked.
    package func storedNote(checksRepresentation: Bool, decodedCodings: [String]) -> String? {
        guard !expected.isEmpty || !ignored.isEmpty else { return nil }
        if !decodedCodings.isEmpty, !expected.isEmpty {
            return "not checked: the body was stored decoded (\(decodedCodings.joined(separator: ", "))), "
                + "and the digests describe the coded bytes"
        }
        var parts: [String] = []
        let checked = expected.filter { Self.covers($0, checksRepresentation: checksRepresentation) }
        if !checked.isEmpty {
            let algorithms = uniqued(checked.map(\.algorithm.token))
            let fields = uniqued(checked.map(\.field.rawName))
            parts.append(
                "\(algorithms.joined(separator: " and ")) verified when stored (\(fields.joined(separator: ", ")))")
        }
        if checked.count < expected.count {
            parts.append("repr-digest not checked: the response is a part of the representation")
        }
        return (parts + ignored).joined(separator: "; ")
    }

    /// Whether the check of a body covers `expected`: `Content-Digest` always, `Repr-Digest`
    /// when the body is the whole representation.
    fileprivate static func covers(_ expected: Expected, checksRepresentation: Bool) -> Bool {
        expected.field == .contentDigest || (expected.field == .reprDigest && checksRepresentation)
    }

    private func uniqued(_ names: [String]) -> [String] {
        names.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    /// Whether a `304`'s `Repr-Digest` (`notModified`) names another representation than the
    /// stored response's (`stored`): both state a digest for one algorithm and the two differ.
    /// Such a `304` does not select the stored response for update (RFC 9111 §4.3.4): its body
    /// was checked against the old digest and is not the representation the `304` describes.
    package static func reprDigestConflicts(stored: HeaderFields, notModified: HeaderFields) -> Bool {
        let new = IntegrityDigests(notModified, including: [.reprDigest]).expected
        guard !new.isEmpty else { return false }
        let old = IntegrityDigests(stored, including: [.reprDigest]).expected
        return new.contains { digest in
            old.contains { $0.algorithm == digest.algorithm && $0.digest != digest.digest }
        }
    }
}

extension DigestAlgorithm {
    /// The algorithm of a key of the Hash Algorithms for HTTP Digest Fields registry (RFC 9530
    /// §5): `sha-256` or `sha-512`; `nil` for any other (insecure or unknown: ignored).
    package init?(token: String) {
        switch token {
        case "sha-256": self = .sha256
        case "sha-512": self = .sha512
        default: return nil
        }
    }

    /// The algorithm's key in the registry (RFC 9530 §5).
    package var token: String {
        switch self {
        case .sha256: return "sha-256"
        case .sha512: return "sha-512"
        }
    }
}

/// A body whose digest is not the one its response stated: it was not stored, and the client
/// gets this error (the proxy closes its connection before the body is complete).
public struct DigestMismatch: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL whose response failed the check.
    public var url: String
    /// The field whose digest failed: `Content-Digest` or `Repr-Digest`.
    public var field: String
    /// The algorithm: `sha-256` or `sha-512`.
    public var algorithm: String
    /// The digest the field stated, in base64.
    public var expected: String
    /// The digest of the bytes received, in base64.
    public var received: String

    public var description: String {
        "the body of \(url) does not match its \(field) (\(algorithm): expected \(expected.prefix(12))…, "
            + "got \(received.prefix(12))…): it was not stored; the response was damaged on its way or the "
            + "origin's digest is wrong, try again"
    }
}

/// Hashes a body as it streams and compares the result with the digests its response stated,
/// at the end: the hashing of one ``ResponseRecorder``, and of a resumed download's whole file.
package final class IntegrityCheck {
    /// One hash of the body.
    private final class Stream {
        let algorithm: DigestAlgorithm
        var hasher: DigestHasher?
        var digest: [UInt8]?

        init(_ algorithm: DigestAlgorithm) {
            self.algorithm = algorithm
            hasher = DigestHasher(algorithm)
        }

        func finalize() -> [UInt8] {
            if let digest { return digest }
            let digest = hasher.take()?.finalize() ?? []
            self.digest = digest
            return digest
        }
    }

    private let url: String
    private let streams: [Stream]
    private let checks: [(expected: IntegrityDigests.Expected, stream: Stream)]

    /// A check of `digests`: `Content-Digest` always, `Repr-Digest` when
    /// `checksRepresentation` (the bytes are the whole representation); `nil` when nothing is
    /// left to check.
    package init?(_ digests: IntegrityDigests, url: String, checksRepresentation: Bool) {
        var streams: [Stream] = []
        var checks: [(IntegrityDigests.Expected, Stream)] = []
        for expected in digests.expected
        where IntegrityDigests.covers(expected, checksRepresentation: checksRepresentation) {
            // One hash per algorithm, however many fields state it.
            if let stream = streams.first(where: { $0.algorithm == expected.algorithm }) {
                checks.append((expected, stream))
            } else {
                let stream = Stream(expected.algorithm)
                streams.append(stream)
                checks.append((expected, stream))
            }
        }
        guard !checks.isEmpty else { return nil }
        self.url = url
        self.streams = streams
        self.checks = checks
    }

    /// Hashes the next bytes of the body.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        for stream in streams { stream.hasher?.update(bytes) }
    }

    /// The body ended: the first digest that does not match, or `nil` when all do.
    package func verify() -> DigestMismatch? {
        for (expected, stream) in checks {
            let received = stream.finalize()
            guard received != expected.digest else { continue }
            return DigestMismatch(
                url: url, field: expected.field.rawName, algorithm: expected.algorithm.token,
                expected: Base64.encode(expected.digest), received: Base64.encode(received))
        }
        return nil
    }
}

/// How one stored body is checked against its response's digests, and what its entry keeps
/// of that.
struct IntegrityPlan {
    var digests: IntegrityDigests
    /// Whether the stored bytes are the whole representation.
    var checksRepresentation: Bool
    /// The content codings the host undid before storing.
    var decodedCodings: [String]

    /// Writes what the entry keeps of the check into `head`'s facts (nothing when the response
    /// sent no digest).
    func note(in head: inout EntryHead) {
        guard
            let note = digests.storedNote(checksRepresentation: checksRepresentation, decodedCodings: decodedCodings),
            var facts = StoredResponseFacts(serialized: head.facts)
        else { return }
        facts.integrity = note
        head.facts = facts.serialized()
    }

    /// The check of the body of `url`'s response; `nil` when nothing is checked.
    func check(url: String) -> IntegrityCheck? {
        guard decodedCodings.isEmpty else { return nil }
        return IntegrityCheck(digests, url: url, checksRepresentation: checksRepresentation)
    }
}
