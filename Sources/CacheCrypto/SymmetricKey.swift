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
        return [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            var length: UInt32 = 0
            bytes.withUnsafeBytes { key in
                // HMAC reads `message` only; an empty message still needs a valid pointer.
                let data = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
                let empty: UInt8 = 0
                withUnsafePointer(to: empty) { fallback in
                    _ = HMAC(
                        EVP_sha256(), key.baseAddress, Int32(key.count), data ?? fallback, message.count,
                        buffer.baseAddress, &length)
                }
            }
            count = Int(length)
        }
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
