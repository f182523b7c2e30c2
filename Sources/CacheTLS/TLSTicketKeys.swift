internal import COpenSSLHTTPCache
import CacheSystem

/// The keys that encrypt a server's session tickets (RFC 8446 §4.6.1; RFC 5077 for TLS 1.2),
/// held only in memory and rotated: a new key every `rotation` seconds. A ticket made under
/// the current key resumes; one made under the key before it still resumes and is renewed
/// (the client gets a ticket under the current key); an older one is refused, and the client
/// does a full handshake. Keys come from `RAND_bytes`, never leave the process, and are wiped
/// when dropped, so a ticket can be read for at most two rotations.
///
/// Share one ring among the contexts that replace each other (a certificate reload): tickets
/// issued before the reload still resume after it. ``shared`` is the process's ring, which
/// every ``TLSServerContext`` uses unless given another.
///
/// ```swift
/// let keys = TLSTicketKeys(rotation: 3600)
/// let context = try TLSServerContext(default: identity, ticketKeys: keys)
/// let renewed = try TLSServerContext(default: identity, ticketKeys: keys)  // at reload
/// ```
///
/// Sendable: the keys are behind a lock; a key in use by a handshake stays alive until it is done.
public final class TLSTicketKeys: Sendable {
    /// The process's ring, rotated every hour.
    public static let shared = TLSTicketKeys()

    /// One key: its name (sent in the clear in the ticket), the AES-256-CBC key and the
    /// HMAC-SHA256 key, in one buffer wiped when the key is dropped.
    final class Key {
        private static let nameLength = 16
        private static let secretLength = 32
        /// When the key became current, in ``TLSTicketKeys`` rotations from the ring's start.
        let epoch: Int
        private let bytes: UnsafeMutableRawBufferPointer

        /// A new random key; nil when OpenSSL's random generator fails.
        init?(epoch: Int) {
            self.epoch = epoch
            bytes = .allocate(byteCount: Self.nameLength + 2 * Self.secretLength, alignment: 16)
            guard RAND_bytes(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count)) == 1 else {
                OpenSSLErrorQueue.clear()
                bytes.deallocate()
                return nil
            }
        }

        deinit {
            OPENSSL_cleanse(bytes.baseAddress, bytes.count)
            bytes.deallocate()
        }

        private var cipherKey: UnsafePointer<UInt8> {
            UnsafePointer(bytes.baseAddress!.advanced(by: Self.nameLength).assumingMemoryBound(to: UInt8.self))
        }
        private var macKey: UnsafeMutableRawPointer {
            bytes.baseAddress!.advanced(by: Self.nameLength + Self.secretLength)
        }

        /// Whether `name` (16 bytes) is this key's.
        func isNamed(_ name: UnsafePointer<UInt8>) -> Bool {
            memcmp(bytes.baseAddress!, name, Self.nameLength) == 0
        }

        /// Writes this key's name to `name` (16 bytes).
        func writeName(to name: UnsafeMutablePointer<UInt8>) {
            memcpy(name, bytes.baseAddress!, Self.nameLength)
        }

        /// Sets up `cipher` and `mac` to encrypt (or decrypt) a ticket with this key and `iv`:
        /// whether OpenSSL accepted both.
        func prepare(cipher: OpaquePointer, mac: OpaquePointer, iv: UnsafePointer<UInt8>, encrypt: Bool) -> Bool {
            let started =
                encrypt
                ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nil, cipherKey, iv)
                : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nil, cipherKey, iv)
            guard started == 1 else { return false }
            // OSSL_PARAM keeps the pointers it is given: the names and the digest stay valid
            // for the call that reads them.
            return "key".withCString { keyName in
                "digest".withCString { digestName in
                    "SHA256".withCString { digest in
                        var parameters = [
                            OSSL_PARAM_construct_octet_string(keyName, macKey, Self.secretLength),
                            OSSL_PARAM_construct_utf8_string(digestName, UnsafeMutablePointer(mutating: digest), 0),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_MAC_CTX_set_params(mac, &parameters) == 1
                    }
                }
            }
        }
    }

    private struct Ring {
        var current: Key?
        var previous: Key?
    }

    /// Seconds between two new keys.
    public let rotation: Double
    private let clock: @Sendable () -> Double
    private let start: Double
    private let ring = Locked(Ring())

    /// Makes an empty ring; its first key is made by the first ticket.
    /// - Parameters:
    ///   - rotation: Seconds a key stays current (an hour by default); tickets last twice that.
    ///   - clock: Seconds on a monotonic clock; tests pass their own to rotate without waiting.
    public init(rotation: Double = 3600, clock: @escaping @Sendable () -> Double = MonotonicClock.seconds) {
        precondition(rotation > 0, "a ticket key rotation must be longer than zero seconds")
        self.rotation = rotation
        self.clock = clock
        start = clock()
    }

    /// The key new tickets are made with, rotating the ring when its time has come (the key
    /// before it stays for tickets made under it; older keys go); nil when no key can be made.
    /// A thread that read the clock just before another rotated the ring never turns it back.
    func current() -> Key? {
        let epoch = Int(((clock() - start) / rotation).rounded(.down))
        return ring.withLock { ring in
            if let current = ring.current, current.epoch >= epoch { return current }
            guard let made = Key(epoch: epoch) else { return nil }
            ring.previous = ring.current.flatMap { $0.epoch == epoch - 1 ? $0 : nil }
            ring.current = made
            return made
        }
    }

    /// The key named `name`, current or previous, and whether it is the current one.
    func key(named name: UnsafePointer<UInt8>) -> (key: Key, isCurrent: Bool)? {
        guard let current = current() else { return nil }
        if current.isNamed(name) { return (current, true) }
        return ring.withLock { $0.previous }.flatMap { $0.isNamed(name) ? ($0, false) : nil }
    }

    /// OpenSSL's ticket callback (`SSL_CTX_set_tlsext_ticket_key_evp_cb`): to encrypt, names
    /// the current key and sets up `cipher` and `mac` with a new IV: 1; to decrypt, finds the
    /// key the ticket names: 2 (resume, and send a new ticket) for the previous key or when
    /// `renewing`, 1 (resume) otherwise. 0 when the ticket cannot be made (none is sent) or
    /// names no key we hold (a full handshake): a ticket never costs the connection.
    /// - Parameter renewing: Whether every resumption gets a new ticket: under TLS 1.3, where
    ///   a client uses a ticket once (RFC 8446 §C.4) and OpenSSL sends none after a resumption
    ///   unless told to; under TLS 1.2 a ticket may be offered again (RFC 5077 §3.3).
    func ticket(
        name: UnsafeMutablePointer<UInt8>, iv: UnsafeMutablePointer<UInt8>, cipher: OpaquePointer,
        mac: OpaquePointer, encrypt: Bool, renewing: Bool
    ) -> Int32 {
        if encrypt {
            guard let key = current(), RAND_bytes(iv, Int32(EVP_CIPHER_get_iv_length(EVP_aes_256_cbc()))) == 1
            else {
                OpenSSLErrorQueue.clear()
                return 0
            }
            key.writeName(to: name)
            return key.prepare(cipher: cipher, mac: mac, iv: iv, encrypt: true) ? 1 : 0
        }
        guard let (key, isCurrent) = key(named: name), key.prepare(cipher: cipher, mac: mac, iv: iv, encrypt: false)
        else { return 0 }
        return isCurrent && !renewing ? 1 : 2
    }
}
