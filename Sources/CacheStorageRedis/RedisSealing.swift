import CacheCrypto
import CacheStorage

/// What a ``RedisStore`` with ``RedisConfiguration/encryptionKey`` seals with: records, inline
/// body pieces and chunks in AES-256-GCM (a random nonce first, the tag last), each bound to the
/// key and field it is stored under, and keyed hashes for the names that were plain hashes.
struct RedisSealing: Sendable {
    private let sealing: SymmetricKey
    private let naming: SymmetricKey

    init(_ key: EncryptionKey) {
        sealing = key.key.derived("redis seal")
        naming = key.key.derived("redis names")
    }

    /// The first 8 bytes of HMAC-SHA-256 of `text` under `kind`, as 16 hex digits.
    func hash(_ kind: Character, _ text: String) -> String {
        let code = naming.authenticationCode(Array("\(kind)\0\(text)".utf8))
        return code.prefix(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// `value` sealed for the place `place` (its key and field).
    func seal(_ value: [UInt8], for place: [UInt8], nonce: AESGCM.Nonce = .random()) -> [UInt8] {
        value.withUnsafeBytes { plain in
            place.withUnsafeBytes { AESGCM.seal(plain, key: sealing, nonce: nonce, authenticating: $0) }
        }
    }

    /// `value` sealed for `place` with a nonce derived from it: the same value always seals to the
    /// same bytes there (a set's member, which must be found again to be removed).
    func sealDeterministically(_ value: [UInt8], for place: [UInt8]) -> [UInt8] {
        seal(value, for: place, nonce: .derived(from: place + [0] + value, key: naming))
    }

    /// What `sealed` holds for `place`; `nil` when it does not authenticate there.
    func open(_ sealed: [UInt8], for place: [UInt8]) -> [UInt8]? {
        sealed.withUnsafeBytes { box in place.withUnsafeBytes { AESGCM.open(box, key: sealing, authenticating: $0) } }
    }
}
