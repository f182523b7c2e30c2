import CacheTestSupport
import Testing

@testable import CacheSemantics

// StoredResponseFacts are computed once when a response is stored (RFC 9111 §3) and kept
// beside it; these tests check the binary form they are kept in.

/// A deterministic generator (SplitMix64), so a failure always reproduces.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func richFacts(entityTag: EntityTag? = EntityTag(opaqueTag: "5d8c72a5edda8d6a", isWeak: true))
    -> StoredResponseFacts
{
    StoredResponseFacts(
        status: 203, requestTime: Fixtures.epoch - 1.25, responseTime: Fixtures.epoch + 0.5,
        date: Fixtures.epoch - 3, ageValue: 12, freshnessLifetime: 300, lifetimeSource: .sMaxAge,
        staleWhileRevalidate: 60, staleIfError: 86_400,
        flags: [.noCache, .mustRevalidate, .proxyRevalidate, .hasSMaxAge, .immutable, .isPublic, .targeted],
        entityTag: entityTag, lastModified: Fixtures.epoch - 86_400,
        vary: Vary(fieldNames: ["Accept-Encoding", "Accept-Language", "X-Absent"]),
        varyValues: ["gzip,br", "en-US,en;q=0.9", nil], varyRawValues: ["gzip, br", "en-US,en;q=0.9", nil],
        contentLength: 1_432)
}

private let minimalFacts = StoredResponseFacts(
    status: 200, requestTime: Fixtures.epoch, responseTime: Fixtures.epoch, date: Fixtures.epoch,
    freshnessLifetime: 0, lifetimeSource: .none)

@Suite("RFC 9111 §3, §4.2 Stored response facts: serialization")
struct StorageFactsSerializationTests {
    /// Facts keep their values in one box that copies share until one of them changes.
    @Test("a copy of stored facts changed leaves the original and other copies as they were")
    func copiesAreIndependent() {
        let original = richFacts()
        var changed = original
        let untouched = original
        changed.flags.formUnion(.invalidated)
        changed.varyValues[0] = "identity"
        changed.integrity = "sha-256 verified when stored (Content-Digest)"
        #expect(!original.flags.contains(.invalidated) && original.varyValues[0] == "gzip,br")
        #expect(original.integrity == nil)
        #expect(untouched == original && untouched.hashValue == original.hashValue)
        #expect(changed != original)
        #expect(changed.flags.contains(.invalidated) && changed.varyValues[0] == "identity")
    }

    @Test(
        "§4.2, RFC 9110 §8.8.3: rich facts round-trip, with weak, strong and no entity tag",
        arguments: [
            EntityTag(opaqueTag: "5d8c72a5edda8d6a", isWeak: true), EntityTag(opaqueTag: "xyzzy", isWeak: false),
            EntityTag(opaqueTag: "", isWeak: false), EntityTag(opaqueTag: "caf\u{E9}", isWeak: true), nil,
        ])
    func richRoundTrip(entityTag: EntityTag?) throws {
        let facts = richFacts(entityTag: entityTag)
        let decoded = try #require(StoredResponseFacts(serialized: facts.serialized()))
        #expect(decoded == facts)
        #expect(decoded.entityTag?.isWeak == entityTag?.isWeak)
        #expect(decoded.varyValues == ["gzip,br", "en-US,en;q=0.9", nil])
        #expect(decoded.varyRawValues == ["gzip, br", "en-US,en;q=0.9", nil])
        #expect(decoded.vary.fieldNames == ["accept-encoding", "accept-language", "x-absent"])
        #expect(decoded.lastModified == Fixtures.epoch - 86_400)
        #expect(decoded.staleWhileRevalidate == 60)
        #expect(decoded.staleIfError == 86_400)
        #expect(decoded.contentLength == 1_432)
        #expect(decoded.requestTime == Fixtures.epoch - 1.25)
        #expect(decoded.flags.contains(.targeted) && !decoded.flags.contains(.isPrivate))
    }

    @Test("RFC 9530: what was checked of the body's digests round-trips; facts of version 1 (before it) still read")
    func integrityRoundTrip() throws {
        var facts = richFacts()
        // Version 1 was version 2 without the integrity byte at the end.
        let versionOne = [1] + facts.serialized().dropFirst().dropLast()
        facts.integrity = "sha-256 verified when stored (Content-Digest)"
        let decoded = try #require(StoredResponseFacts(serialized: facts.serialized()))
        #expect(decoded.integrity == "sha-256 verified when stored (Content-Digest)")
        #expect(decoded == facts)
        facts.integrity = nil
        #expect(StoredResponseFacts(serialized: versionOne) == facts)
    }

    @Test("§4.2: minimal facts (nothing optional, no flags) round-trip")
    func minimalRoundTrip() throws {
        let decoded = try #require(StoredResponseFacts(serialized: minimalFacts.serialized()))
        #expect(decoded == minimalFacts)
        #expect(decoded.entityTag == nil && decoded.lastModified == nil && decoded.contentLength == nil)
        #expect(decoded.staleWhileRevalidate == nil && decoded.staleIfError == nil)
    }

    @Test("§4.1: a Vary: * and every flag and lifetime source survive the round trip")
    func everyFlagAndSource() throws {
        let sources: [LifetimeSource] = [.sMaxAge, .maxAge, .expires, .heuristic, .none, .invalid]
        for source in sources {
            var facts = richFacts()
            facts.lifetimeSource = source
            facts.flags = StoredResponseFacts.Flags(rawValue: 0x3FF)
            facts.vary = Vary(fieldNames: [], isAny: true)
            facts.varyValues = []
            facts.varyRawValues = []
            facts.freshnessLifetime = -60
            let decoded = try #require(StoredResponseFacts(serialized: facts.serialized()))
            #expect(decoded == facts)
            #expect(decoded.vary.isAny)
            #expect(decoded.lifetimeSource == source)
            #expect(decoded.flags.contains(.incomplete) && decoded.flags.contains(.invalidated))
        }
    }

    @Test("§3: facts the engine computes for a typical response round-trip")
    func engineFactsRoundTrip() throws {
        let decision = CacheEngine(configuration: .sharedCache).storageDecision(
            for: RequestHead(uri: "https://api.example.com/items", fields: Fixtures.typicalRequestFields),
            response: ResponseHead(status: 200, fields: Fixtures.typicalResponseFields),
            requestTime: Fixtures.epoch - 0.2, responseTime: Fixtures.epoch)
        guard case .store(let stored) = decision else {
            Issue.record("expected the typical response to be stored, got \(decision)")
            return
        }
        #expect(stored.facts.entityTag == EntityTag(opaqueTag: "5d8c72a5edda8d6a"))
        #expect(stored.facts.varyValues == ["br,deflate,gzip"])
        #expect(StoredResponseFacts(serialized: stored.facts.serialized()) == stored.facts)
    }

    @Test("§3: the first byte is the format version; bytes of any other version are rejected")
    func otherVersionRejected() {
        var bytes = richFacts().serialized()
        #expect(bytes.first == StoredResponseFacts.formatVersion)
        for version in [0, StoredResponseFacts.formatVersion &+ 1, 0x7F, 0xFF] as [UInt8] {
            bytes[0] = version
            #expect(StoredResponseFacts(serialized: bytes) == nil, "version \(version) was accepted")
        }
    }

    @Test("§3: every truncation of the bytes is rejected, and so is a trailing extra byte")
    func everyTruncationRejected() {
        var checked = richFacts()
        checked.integrity = "sha-512 verified when stored (Repr-Digest)"
        for facts in [richFacts(), richFacts(entityTag: nil), minimalFacts, checked] {
            let bytes = facts.serialized()
            for length in 0..<bytes.count {
                #expect(StoredResponseFacts(serialized: bytes.prefix(length)) == nil, "prefix \(length) was accepted")
            }
            #expect(StoredResponseFacts(serialized: bytes + [0]) == nil)
            #expect(StoredResponseFacts(serialized: bytes) == facts)
        }
    }

    @Test("§3: random byte flips never crash; whatever decodes is a consistent value that round-trips")
    func randomFlips() {
        var generator = SplitMix64(state: 0x5EED_9111)
        let original = richFacts().serialized()
        var rejected = 0
        for _ in 0..<5_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[index] ^= UInt8.random(in: 1...255, using: &generator)
            }
            guard let decoded = StoredResponseFacts(serialized: bytes) else {
                rejected += 1
                continue
            }
            #expect(decoded.vary.fieldNames.count == decoded.varyValues.count)
            #expect(decoded.status < 1000)
            #expect(StoredResponseFacts(serialized: decoded.serialized()) == decoded)
        }
        // Flipping the version byte alone is rejected, so some mutations must be.
        #expect(rejected > 0)
    }

    @Test("§3: arbitrary random byte strings never crash the decoder")
    func randomBytes() {
        var generator = SplitMix64(state: 42)
        var accepted = 0
        for length in 0..<200 {
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if length > 0 { bytes[0] = StoredResponseFacts.formatVersion }
            if let decoded = StoredResponseFacts(serialized: bytes) {
                accepted += 1
                #expect(StoredResponseFacts(serialized: decoded.serialized()) == decoded)
            }
        }
        #expect(accepted < 200)
    }
}
