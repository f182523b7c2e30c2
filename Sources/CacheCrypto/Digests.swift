#if canImport(CryptoKit)
import CryptoKit
#else
internal import COpenSSLHTTPCache
#endif

/// The hash algorithms of the digest fields the cache checks: `sha-256` and `sha-512` of the
/// Hash Algorithms for HTTP Digest Fields registry ([RFC 9530 §5](https://www.rfc-editor.org/rfc/rfc9530#section-5)),
/// the two it marks "Active".
package enum DigestAlgorithm: Sendable, Hashable, CaseIterable {
    case sha256
    case sha512

    /// The length of a digest in bytes.
    package var byteCount: Int {
        switch self {
        case .sha256: 32
        case .sha512: 64
        }
    }

    /// The digest of `bytes`, in one call.
    package func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = DigestHasher(self)
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The digest of `bytes`, in one call.
    package func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }
}

/// A digest computed over bytes that arrive in pieces (a body as it streams), so that no body is
/// ever held whole just to be hashed.
package struct DigestHasher: ~Copyable {
    #if canImport(CryptoKit)
    private enum State {
        case sha256(SHA256)
        case sha512(SHA512)
    }
    private var state: State

    /// A hasher that has seen no bytes yet.
    package init(_ algorithm: DigestAlgorithm) {
        switch algorithm {
        case .sha256: state = .sha256(SHA256())
        case .sha512: state = .sha512(SHA512())
        }
    }

    /// Adds `bytes` to what is hashed.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch state {
        case .sha256(var hasher):
            hasher.update(bufferPointer: bytes)
            state = .sha256(hasher)
        case .sha512(var hasher):
            hasher.update(bufferPointer: bytes)
            state = .sha512(hasher)
        }
    }

    /// The digest of every byte given so far.
    package consuming func finalize() -> [UInt8] {
        switch state {
        case .sha256(let hasher): Array(hasher.finalize())
        case .sha512(let hasher): Array(hasher.finalize())
        }
    }
    #else
    private let context: OpaquePointer
    private let byteCount: Int

    /// A hasher that has seen no bytes yet.
    package init(_ algorithm: DigestAlgorithm) {
        // Allocation is the only way these calls fail; an HTTP cache without memory stops here as
        // it would on any other allocation.
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, OpenSSLAlgorithms.digest(algorithm), nil) == 1
        else { fatalError("OpenSSL could not start a \(algorithm) digest (out of memory)") }
        self.context = context
        self.byteCount = algorithm.byteCount
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `bytes` to what is hashed.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest of every byte given so far.
    package consuming func finalize() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, count in
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, buffer.baseAddress, &length)
            count = Int(length)
        }
    }
    #endif

    /// Adds `bytes` to what is hashed.
    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }
}

#if !canImport(CryptoKit)
/// The algorithms, fetched from OpenSSL's default provider once per process rather than at every
/// use (an implicit fetch per call costs more than hashing a small body).
enum OpenSSLAlgorithms {
    nonisolated(unsafe) private static let sha256 = EVP_MD_fetch(nil, "SHA256", nil)
    nonisolated(unsafe) private static let sha512 = EVP_MD_fetch(nil, "SHA512", nil)
    nonisolated(unsafe) static let aes256GCM = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    static func digest(_ algorithm: DigestAlgorithm) -> OpaquePointer? {
        switch algorithm {
        case .sha256: sha256
        case .sha512: sha512
        }
    }
}
#endif
