#if canImport(CryptoKit)
import CryptoKit
#else
internal import COpenSSLHTTPCache
#endif

/// A 256-bit secret key: the one a store is encrypted with, and the keys derived from it for each
/// use (bodies, index fields, lookup hashes), so that no key serves two purposes.
package struct SymmetricKey: Sendable, Equatable {
    /// The key's 32 bytes.
    package let bytes: [UInt8]

    /// The length of every key, in bytes.
    package static let byteCount = 32

    /// The key made of `bytes`, or nil unless there are exactly 32 of them.
    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// A new key from the operating system's random source.
    package static func random() -> SymmetricKey {
        SymmetricKey(unchecked: SecureRandom.bytes(byteCount))
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// A key for one use, `HMAC-SHA-256(self, label)`: keys derived with different labels are
    /// independent, and none of them reveals this one.
    package func derived(_ label: String) -> SymmetricKey {
        SymmetricKey(unchecked: authenticationCode(Array(label.utf8)))
    }

    /// `HMAC-SHA-256(self, message)` ([RFC 2104](https://www.rfc-editor.org/rfc/rfc2104)), 32 bytes:
    /// a keyed hash, for lookups by a value the store must not reveal.
    package func authenticationCode(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        #if canImport(CryptoKit)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: CryptoKit.SymmetricKey(data: bytes))
        return Array(code)
        #else
        return ThreadMAC.current.code(key: bytes, message: message)
        #endif
    }

    /// `HMAC-SHA-256(self, message)`, 32 bytes.
    package func authenticationCode(_ message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { authenticationCode($0) }
    }
}

/// Bytes from the operating system's cryptographically secure random source.
package enum SecureRandom {
    /// `count` random bytes.
    package static func bytes(_ count: Int) -> [UInt8] {
        #if canImport(CryptoKit)
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        #else
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            // RAND_bytes fails only when the system's entropy source does; serving with keys or
            // nonces that are not random would be worse than stopping.
            guard count == 0 || RAND_bytes(buffer.baseAddress, Int32(count)) == 1 else {
                fatalError("OpenSSL's random source failed: the operating system gave no entropy")
            }
            initialized = count
        }
        #endif
    }
}

#if !canImport(CryptoKit)
/// The calling thread's HMAC-SHA-256 context, kept for the thread's life and keyed once: a code
/// under the key it already holds only starts the digest again, where `HMAC()` fetches the
/// algorithm and makes a context for every code.
private final class ThreadMAC {
    nonisolated(unsafe) private static let algorithm = EVP_MAC_fetch(nil, "HMAC", nil)
    private let context: OpaquePointer
    private var key: [UInt8] = []

    private init() {
        guard let algorithm = Self.algorithm, let context = EVP_MAC_CTX_new(algorithm) else {
            fatalError("OpenSSL could not make an HMAC context (out of memory, or no default provider)")
        }
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    /// The calling thread's context, made on its first call and freed when it exits.
    static var current: ThreadMAC { perThread.current }
    private static let perThread = PerThread { ThreadMAC() }

    /// `HMAC-SHA-256(key, message)`.
    func code(key: [UInt8], message: UnsafeRawBufferPointer) -> [UInt8] {
        let rekey = self.key != key
        let started: Int32
        if rekey {
            // OSSL_PARAM keeps the pointers it is given: the name and the digest stay valid for
            // the call that reads them.
            started = "digest".withCString { name in
                "SHA256".withCString { digest in
                    var parameters = [
                        OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: digest), 0),
                        OSSL_PARAM_construct_end(),
                    ]
                    return key.withUnsafeBufferPointer { EVP_MAC_init(context, $0.baseAddress, $0.count, &parameters) }
                }
            }
        } else {
            // The key (and digest) set before are kept.
            started = EVP_MAC_init(context, nil, 0, nil)
        }
        // A 32-byte key and SHA-256 are all this checks, both fixed by the types.
        precondition(started == 1, "OpenSSL refused HMAC-SHA-256 with a 32-byte key")
        if rekey { self.key = key }
        if let base = message.baseAddress, !message.isEmpty {
            EVP_MAC_update(context, base.assumingMemoryBound(to: UInt8.self), message.count)
        }
        return [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            var length = 0
            EVP_MAC_final(context, buffer.baseAddress, &length, 32)
            count = length
        }
    }
}

#endif
