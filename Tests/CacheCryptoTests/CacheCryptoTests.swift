import Testing

@testable import CacheCrypto

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

private func bytes(hex text: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        result.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return result
}

@Suite struct DigestTests {
    /// FIPS 180-4's examples ("abc", and the 448-bit two-block message).
    @Test func knownAnswers() {
        #expect(
            hex(DigestAlgorithm.sha256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(DigestAlgorithm.sha512.hash(Array("abc".utf8)))
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
        #expect(
            hex(DigestAlgorithm.sha256.hash([]))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// Bytes given in pieces hash as the same bytes given at once, whatever the cut.
    @Test(arguments: DigestAlgorithm.allCases) func piecesHashLikeTheWhole(_ algorithm: DigestAlgorithm) {
        let body = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for cut in [0, 1, 63, 64, 65, 4_096, 9_999, 10_000] {
            var hasher = DigestHasher(algorithm)
            hasher.update(Array(body[..<cut]))
            hasher.update(Array(body[cut...]))
            #expect(hasher.finalize() == algorithm.hash(body), "cut at \(cut)")
        }
        #expect(algorithm.hash(body).count == algorithm.byteCount)
    }
}

@Suite struct SymmetricKeyTests {
    private let key = SymmetricKey(bytes: Array(0..<32))!

    /// HMAC-SHA-256 (RFC 2104) against Python's hmac module on the same key and message.
    @Test func authenticationCodeMatchesAnIndependentImplementation() {
        #expect(
            hex(key.authenticationCode(Array("what do ya want for nothing?".utf8)))
                == "099805f4ac310786968565c098db515cc50862b420ae31e20238312344bed36a")
        #expect(hex(key.derived("index").bytes) == "c401e9a95ddbdf38f28fc9bc6285ce24b2c0f87484bae8b7d459ca995ef3b0aa")
    }

    /// A thread keeps its HMAC context keyed: codes under alternating keys, and on several
    /// threads at once, are those of a fresh context.
    @Test func reusedContextFollowsTheKey() async {
        let other = SymmetricKey(bytes: Array(repeating: 7, count: 32))!
        let message = Array("what do ya want for nothing?".utf8)
        let expected = "099805f4ac310786968565c098db515cc50862b420ae31e20238312344bed36a"
        let otherCode = other.authenticationCode(message)
        #expect(hex(otherCode) != expected)
        for _ in 0..<3 {
            #expect(hex(key.authenticationCode(message)) == expected)
            #expect(other.authenticationCode(message) == otherCode)
            #expect(key.authenticationCode([]) != other.authenticationCode([]))
        }
        let key = key
        await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    (0..<200).allSatisfy { _ in
                        index % 2 == 0
                            ? hex(key.authenticationCode(message)) == expected
                            : other.authenticationCode(message) == otherCode
                    }
                }
            }
            for await agreed in group { #expect(agreed) }
        }
    }

    @Test func onlyThirtyTwoBytesMakeAKey() {
        #expect(SymmetricKey(bytes: Array(repeating: 1, count: 31)) == nil)
        #expect(SymmetricKey(bytes: Array(repeating: 1, count: 33)) == nil)
        #expect(SymmetricKey.random() != SymmetricKey.random())
        #expect(key.derived("body") != key.derived("index"))
    }
}

@Suite struct AESGCMTests {
    private let zeroKey = SymmetricKey(bytes: Array(repeating: 0, count: 32))!
    private let zeroNonce = AESGCM.Nonce([UInt8](repeating: 0, count: 12))!

    /// The GCM specification's test cases 13 and 14 (AES-256, zero key and nonce): the box is
    /// the nonce, then the ciphertext and tag the specification gives.
    @Test func knownAnswers() {
        let empty = seal([], key: zeroKey, nonce: zeroNonce, aad: [])
        #expect(hex(empty) == String(repeating: "00", count: 12) + "530f8afbc74536b9a963b4f1c4cb738b")
        let block = seal([UInt8](repeating: 0, count: 16), key: zeroKey, nonce: zeroNonce, aad: [])
        #expect(
            hex(block) == String(repeating: "00", count: 12) + "cea7403d4d606b6e074ec5d3baf39d18"
                + "d0d1c8a799996bf0265b98b5d48ab919")
        #expect(open(block, key: zeroKey, aad: []) == [UInt8](repeating: 0, count: 16))
    }

    /// A nonce is 12 bytes or nothing; random ones differ; a derived one depends on the message
    /// and the key only.
    @Test func nonces() {
        #expect(AESGCM.Nonce(Array(repeating: 1, count: 11)) == nil)
        #expect(AESGCM.Nonce(Array(repeating: 1, count: 13)) == nil)
        #expect(AESGCM.Nonce.random() != AESGCM.Nonce.random())
        let (key, other) = (SymmetricKey.random(), SymmetricKey.random())
        let message = Array("a set member".utf8)
        #expect(AESGCM.Nonce.derived(from: message, key: key) == AESGCM.Nonce.derived(from: message, key: key))
        #expect(AESGCM.Nonce.derived(from: message, key: key) != AESGCM.Nonce.derived(from: message, key: other))
        #expect(AESGCM.Nonce.derived(from: message, key: key) != AESGCM.Nonce.derived(from: message + [0], key: key))
    }

    fileprivate func seal(
        _ plain: [UInt8], key: SymmetricKey, nonce: AESGCM.Nonce = .random(), aad: [UInt8]
    ) -> [UInt8] {
        plain.withUnsafeBytes { plain in
            aad.withUnsafeBytes { AESGCM.seal(plain, key: key, nonce: nonce, authenticating: $0) }
        }
    }

    fileprivate func open(_ box: [UInt8], key: SymmetricKey, aad: [UInt8]) -> [UInt8]? {
        box.withUnsafeBytes { box in aad.withUnsafeBytes { AESGCM.open(box, key: key, authenticating: $0) } }
    }

    /// Authenticated encryption: anything but the exact sealed bytes under the same key and
    /// associated data is refused, never decrypted into other bytes.
    @Test func everyAlterationIsRefused() {
        let key = SymmetricKey.random()
        let plain = Array("a stored body, block 3 of entry 17".utf8)
        let aad = Array("entry 17 block 3".utf8)
        let sealed = seal(plain, key: key, aad: aad)
        #expect(sealed.count == plain.count + AESGCM.overhead)
        #expect(open(sealed, key: key, aad: aad) == plain)
        #expect(open(sealed, key: SymmetricKey.random(), aad: aad) == nil)
        #expect(open(sealed, key: key, aad: Array("entry 18 block 3".utf8)) == nil)
        #expect(open(Array(sealed.dropLast()), key: key, aad: aad) == nil)
        #expect(open(Array(sealed.dropFirst()), key: key, aad: aad) == nil)
        #expect(open(Array(sealed.prefix(AESGCM.overhead - 1)), key: key, aad: aad) == nil)
        // The nonce is covered too: a box with another nonce does not open.
        for position in [0, 11, 12, 12 + 5, 12 + plain.count, sealed.count - 1] {
            var flipped = sealed
            flipped[position] ^= 0x01
            #expect(open(flipped, key: key, aad: aad) == nil, "bit flipped at \(position)")
        }
        #expect(seal(plain, key: key, aad: aad) != sealed, "a random nonce each time")
        let emptySealed = seal([], key: key, aad: aad)
        #expect(open(emptySealed, key: key, aad: aad) == [])
    }

    /// Opening into a caller's buffer (how a body's blocks open into one plaintext): the same
    /// bytes as ``AESGCM/open(_:key:authenticating:)``, and a buffer of any other length is
    /// refused rather than written short or past its end.
    @Test func opensIntoABufferOfExactlyItsLength() {
        let key = SymmetricKey.random()
        let plain = Array("two boxes, one buffer".utf8)
        let sealed = seal(plain, key: key, aad: [7])
        func openInto(_ length: Int, aad: [UInt8] = [7]) -> [UInt8]? {
            var room = [UInt8](repeating: 0, count: length)
            let opened = sealed.withUnsafeBytes { box in
                aad.withUnsafeBytes { aad in
                    room.withUnsafeMutableBytes { AESGCM.open(box, key: key, authenticating: aad, into: $0) }
                }
            }
            return opened ? room : nil
        }
        #expect(openInto(plain.count) == plain)
        #expect(openInto(plain.count - 1) == nil)
        #expect(openInto(plain.count + 1) == nil)
        #expect(openInto(plain.count, aad: [8]) == nil)
        let empty = seal([], key: key, aad: [])
        #expect(
            empty.withUnsafeBytes {
                AESGCM.open(
                    $0, key: key, authenticating: .init(start: nil, count: 0), into: .init(start: nil, count: 0))
            })
    }
}

extension AESGCMTests {
    /// A thread keeps its cipher contexts keyed: keys alternating on one thread, and several
    /// threads at once each with its own key, must all seal and open as with fresh contexts.
    @Test func reusedContextsFollowTheKey() async {
        let keys = (0..<3).map { _ in SymmetricKey.random() }
        let nonce = AESGCM.Nonce.random()
        let plain = Array("the same block under three keys".utf8)
        let sealed = keys.map { seal(plain, key: $0, nonce: nonce, aad: []) }
        #expect(Set(sealed).count == 3)
        for round in 0..<6 {
            let index = round % 3
            #expect(seal(plain, key: keys[index], nonce: nonce, aad: []) == sealed[index])
            #expect(open(sealed[index], key: keys[index], aad: []) == plain)
            #expect(open(sealed[index], key: keys[(index + 1) % 3], aad: []) == nil)
        }
        await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let key = keys[index % 3]
                    return (0..<200).allSatisfy { _ in open(seal(plain, key: key, aad: []), key: key, aad: []) == plain
                    }
                }
            }
            for await roundTripped in group { #expect(roundTripped) }
        }
    }
}

@Suite struct Base64Tests {
    /// RFC 4648 §10's test vectors, both ways.
    @Test func rfc4648Section10Vectors() {
        let vectors = [
            "": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=",
            "foobar": "Zm9vYmFy",
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(Substring(encoded)) == Array(plain.utf8))
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64.decode(Substring(Base64.encode(all))) == all)
    }

    /// What is not base64 is refused (RFC 4648 §3.3, §3.5), never decoded to something.
    @Test func malformedIsRefused() {
        for text in ["Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zm-v", "Zm9v\n", "=Zm9", "Zg==Zg==", "Zm 9v", "é123"] {
            #expect(Base64.decode(Substring(text)) == nil, "\(text)")
        }
    }
}
