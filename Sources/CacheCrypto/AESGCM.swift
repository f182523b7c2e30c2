#if canImport(CryptoKit)
import CryptoKit
#else
internal import COpenSSLHTTPCache
#endif

/// AES-256 in Galois/Counter Mode ([NIST SP 800-38D](https://csrc.nist.gov/pubs/sp/800/38/d/final)):
/// authenticated encryption, so that a block altered, truncated, moved to another place or sealed
/// under another key is refused rather than decrypted into wrong bytes.
package enum AESGCM {
    /// The length of a nonce. A nonce must never be used twice with one key.
    package static let nonceByteCount = 12
    /// The length of the authentication tag that follows the ciphertext.
    package static let tagByteCount = 16

    /// `plaintext` encrypted under `key` and `nonce`, followed by the 16-byte tag that also covers
    /// `aad` (data authenticated, not stored: what binds the block to its place).
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, nonce: [UInt8],
        authenticating aad: UnsafeRawBufferPointer
    ) -> [UInt8] {
        precondition(nonce.count == nonceByteCount, "an AES-GCM nonce is 12 bytes")
        #if canImport(CryptoKit)
        // The nonce is 12 bytes (checked above), the only thing AES.GCM.Nonce or seal refuse.
        let box = try! AES.GCM.seal(
            plaintext, using: CryptoKit.SymmetricKey(data: key.bytes), nonce: AES.GCM.Nonce(data: nonce),
            authenticating: aad)
        return Array(box.ciphertext) + Array(box.tag)
        #else
        let context = ThreadCiphers.current.encrypting
        context.begin(key: key, nonce: nonce, encrypting: true)
        return [UInt8](unsafeUninitializedCapacity: plaintext.count + tagByteCount) { buffer, count in
            var length: Int32 = 0
            context.addAuthenticatedData(aad)
            if let input = plaintext.baseAddress, !plaintext.isEmpty {
                EVP_EncryptUpdate(
                    context.pointer, buffer.baseAddress, &length, input.assumingMemoryBound(to: UInt8.self),
                    Int32(plaintext.count))
            }
            var final: Int32 = 0
            EVP_EncryptFinal_ex(context.pointer, buffer.baseAddress! + Int(length), &final)
            let written = Int(length + final)
            EVP_CIPHER_CTX_ctrl(
                context.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(tagByteCount), buffer.baseAddress! + written)
            count = written + tagByteCount
        }
        #endif
    }

    /// The plaintext of `sealed` (ciphertext then tag) under `key`, `nonce` and `aad`; nil when
    /// the tag does not authenticate: another key, nonce or `aad`, or any byte changed or missing.
    package static func open(
        _ sealed: UnsafeRawBufferPointer, key: SymmetricKey, nonce: [UInt8],
        authenticating aad: UnsafeRawBufferPointer
    ) -> [UInt8]? {
        guard nonce.count == nonceByteCount, sealed.count >= tagByteCount else { return nil }
        let ciphertextCount = sealed.count - tagByteCount
        #if canImport(CryptoKit)
        guard
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: nonce), ciphertext: sealed[..<ciphertextCount],
                tag: sealed[ciphertextCount...]),
            let plaintext = try? AES.GCM.open(
                box, using: CryptoKit.SymmetricKey(data: key.bytes), authenticating: aad)
        else { return nil }
        return Array(plaintext)
        #else
        let context = ThreadCiphers.current.decrypting
        context.begin(key: key, nonce: nonce, encrypting: false)
        var authentic = false
        // At least one byte of room, so that the buffer has an address even for an empty body.
        let plaintext = [UInt8](unsafeUninitializedCapacity: max(ciphertextCount, 1)) { buffer, count in
            var length: Int32 = 0
            context.addAuthenticatedData(aad)
            let input = sealed.baseAddress!.assumingMemoryBound(to: UInt8.self)
            if ciphertextCount > 0 {
                EVP_DecryptUpdate(context.pointer, buffer.baseAddress, &length, input, Int32(ciphertextCount))
            }
            // OpenSSL takes the expected tag through a mutable pointer but only reads it.
            EVP_CIPHER_CTX_ctrl(
                context.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(tagByteCount),
                UnsafeMutableRawPointer(mutating: input + ciphertextCount))
            var final: Int32 = 0
            authentic = EVP_DecryptFinal_ex(context.pointer, buffer.baseAddress! + Int(length), &final) == 1
            count = authentic ? Int(length + final) : 0
        }
        return authentic ? plaintext : nil
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
