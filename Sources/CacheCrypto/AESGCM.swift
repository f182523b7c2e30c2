#if canImport(CryptoKit)
import CryptoKit
#else
internal import COpenSSLHTTPCache
#endif

/// AES-256 in Galois/Counter Mode ([NIST SP 800-38D](https://csrc.nist.gov/pubs/sp/800/38/d/final)):
/// authenticated encryption, so that a block altered, truncated, moved to another place or sealed
/// under another key is refused rather than decrypted into wrong bytes.
package enum AESGCM {
    /// A nonce: 12 bytes (GCM's own length), never to be used twice with one key. Made only as
    /// random bytes, derived from what it seals, or read from a sealed box, so that its length is
    /// never wrong.
    package struct Nonce: Sendable, Equatable {
        fileprivate let bytes: [UInt8]

        /// The length of a nonce.
        package static let byteCount = 12

        private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

        /// `bytes` as a nonce; nil unless there are exactly 12.
        package init?(_ bytes: [UInt8]) {
            guard bytes.count == Self.byteCount else { return nil }
            self.bytes = bytes
        }

        /// 12 random bytes: the nonce for anything sealed under a long-lived key (2^32 seals
        /// keep the chance of a repeat below 2^-32, NIST SP 800-38D §8.3).
        package static func random() -> Nonce { Nonce(unchecked: SecureRandom.bytes(byteCount)) }

        /// The first 12 bytes of HMAC-SHA-256 of `message` under `key` (which must be another key
        /// than the one sealing): the same message always seals to the same bytes, and two
        /// messages share a nonce only if they are the same (a synthetic nonce, as in RFC 5297).
        package static func derived(from message: [UInt8], key: SymmetricKey) -> Nonce {
            Nonce(unchecked: Array(key.authenticationCode(message).prefix(byteCount)))
        }
    }

    /// The length of the authentication tag that follows the ciphertext.
    package static let tagByteCount = 16
    /// What sealing adds to a plaintext: the nonce before it and the tag after it.
    package static let overhead = Nonce.byteCount + tagByteCount

    /// `plaintext` encrypted under `key`, as one box: the nonce, the ciphertext, then the 16-byte
    /// tag that also covers `aad` (data authenticated, not stored: what binds the box to its place).
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, nonce: Nonce = .random(),
        authenticating aad: UnsafeRawBufferPointer
    ) -> [UInt8] {
        #if canImport(CryptoKit)
        // A 12-byte nonce (which Nonce guarantees) is the only thing AES.GCM.Nonce or seal refuse.
        let box = try! AES.GCM.seal(
            plaintext, using: CryptoKit.SymmetricKey(data: key.bytes), nonce: AES.GCM.Nonce(data: nonce.bytes),
            authenticating: aad)
        return nonce.bytes + Array(box.ciphertext) + Array(box.tag)
        #else
        let context = ThreadCiphers.current.encrypting
        context.begin(key: key, nonce: nonce.bytes, encrypting: true)
        return [UInt8](unsafeUninitializedCapacity: overhead + plaintext.count) { buffer, count in
            let base = buffer.baseAddress!
            nonce.bytes.withUnsafeBufferPointer { base.update(from: $0.baseAddress!, count: Nonce.byteCount) }
            let ciphertext = base + Nonce.byteCount
            var length: Int32 = 0
            context.addAuthenticatedData(aad)
            if let input = plaintext.baseAddress, !plaintext.isEmpty {
                EVP_EncryptUpdate(
                    context.pointer, ciphertext, &length, input.assumingMemoryBound(to: UInt8.self),
                    Int32(plaintext.count))
            }
            var final: Int32 = 0
            EVP_EncryptFinal_ex(context.pointer, ciphertext + Int(length), &final)
            let written = Int(length + final)
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(tagByteCount), ciphertext + written)
            count = Nonce.byteCount + written + tagByteCount
        }
        #endif
    }

    /// The plaintext of `box` (nonce, ciphertext, tag, as ``seal(_:key:nonce:authenticating:)``
    /// makes it) under `key` and `aad`; nil when it is too short to be a box or does not
    /// authenticate: another key or `aad`, or any byte changed or missing.
    package static func open(
        _ box: UnsafeRawBufferPointer, key: SymmetricKey, authenticating aad: UnsafeRawBufferPointer
    ) -> [UInt8]? {
        guard box.count >= overhead else { return nil }
        let count = box.count - overhead
        var authentic = false
        // At least one byte of room, so that the buffer has an address even for an empty body.
        let plaintext = [UInt8](unsafeUninitializedCapacity: max(count, 1)) { buffer, initialized in
            let room = UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[..<count]))
            authentic = open(box, key: key, authenticating: aad, into: room)
            initialized = authentic ? count : 0
        }
        return authentic ? plaintext : nil
    }

    /// Opens `box` as ``open(_:key:authenticating:)`` does, writing its plaintext into `plaintext`,
    /// which must be exactly as long (`box.count - overhead`): many boxes open into one buffer
    /// without a copy each. `false` when the lengths differ or the box does not authenticate; the
    /// bytes then written to `plaintext` are not to be used.
    package static func open(
        _ box: UnsafeRawBufferPointer, key: SymmetricKey, authenticating aad: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard box.count >= overhead, plaintext.count == box.count - overhead else { return false }
        let ciphertextCount = plaintext.count
        let sealed = UnsafeRawBufferPointer(rebasing: box[Nonce.byteCount...])
        #if canImport(CryptoKit)
        guard
            let sealedBox = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: box[..<Nonce.byteCount]), ciphertext: sealed[..<ciphertextCount],
                tag: sealed[ciphertextCount...]),
            let opened = try? AES.GCM.open(
                sealedBox, using: CryptoKit.SymmetricKey(data: key.bytes), authenticating: aad)
        else { return false }
        opened.copyBytes(to: plaintext)
        return true
        #else
        let context = ThreadCiphers.current.decrypting
        context.begin(key: key, nonce: Array(box[..<Nonce.byteCount]), encrypting: false)
        context.addAuthenticatedData(aad)
        let input = sealed.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // GCM's final step writes no bytes, but OpenSSL wants an address for them.
        var spare: UInt8 = 0
        return withUnsafeMutablePointer(to: &spare) { spare in
            let output = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? spare
            var length: Int32 = 0
            if ciphertextCount > 0 {
                EVP_DecryptUpdate(context.pointer, output, &length, input, Int32(ciphertextCount))
            }
            // OpenSSL takes the expected tag through a mutable pointer but only reads it.
            EVP_CIPHER_CTX_ctrl(
                context.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(tagByteCount),
                UnsafeMutableRawPointer(mutating: input + ciphertextCount))
            var final: Int32 = 0
            return EVP_DecryptFinal_ex(context.pointer, output + Int(length), &final) == 1
                && Int(length + final) == ciphertextCount
        }
        #endif
    }
}

#if !canImport(CryptoKit)
/// The calling thread's EVP cipher contexts, one per direction, kept for the thread's life and
/// keyed once: a call with the key a context already holds only sets the nonce, rather than
/// making a context and its key schedule for every block.
private final class ThreadCiphers {
    let encrypting = CipherContext()
    let decrypting = CipherContext()

    /// The calling thread's contexts, made on its first call and freed when it exits.
    static var current: ThreadCiphers { perThread.current }
    private static let perThread = PerThread { ThreadCiphers() }
}

/// One EVP cipher context, used by one thread for one message at a time.
private final class CipherContext {
    let pointer: OpaquePointer
    /// The key the context is set up with; empty before the first message.
    private var key: [UInt8] = []

    init() {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            fatalError("OpenSSL could not allocate a cipher context (out of memory)")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    /// Starts a message under `key` and `nonce`: the key schedule is kept when the key is the
    /// one the context already holds.
    func begin(key: SymmetricKey, nonce: [UInt8], encrypting: Bool) {
        let rekey = self.key != key.bytes
        // The cipher, a 32-byte key and a 12-byte nonce (GCM's default length) are all this call
        // checks, and all are fixed by the types above.
        let started = key.bytes.withUnsafeBufferPointer { keyBytes in
            nonce.withUnsafeBufferPointer { nonce in
                EVP_CipherInit_ex2(
                    pointer, rekey ? OpenSSLAlgorithms.aes256GCM : nil, rekey ? keyBytes.baseAddress : nil,
                    nonce.baseAddress, encrypting ? 1 : 0, nil)
            }
        }
        precondition(started == 1, "OpenSSL refused AES-256-GCM with a 32-byte key and a 12-byte nonce")
        if rekey { self.key = key.bytes }
    }

    func addAuthenticatedData(_ aad: UnsafeRawBufferPointer) {
        guard let base = aad.baseAddress, !aad.isEmpty else { return }
        var length: Int32 = 0
        EVP_CipherUpdate(pointer, nil, &length, base.assumingMemoryBound(to: UInt8.self), Int32(aad.count))
    }
}
#endif
