import CacheCrypto
import CacheSemantics
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key a store is encrypted with at rest: 32 bytes for AES-256-GCM, from which one key is
/// derived for bodies, one for the index's sealed heads and one for its lookup hashes.
///
/// Keep it apart from the cache directory (another disk, a secrets manager, the keychain): who
/// holds both reads everything. A store made with a key opens only with that key; one made
/// without a key refuses one (``StorageError/Kind/encryption``). `httpcache rekey` changes it.
///
/// ```swift
/// var configuration = HTTPCache.Configuration()
/// configuration.encryptionKey = try EncryptionKey(contentsOfFile: "/etc/httpcache/key")
/// ```
public struct EncryptionKey: Sendable, Equatable {
    package let key: SymmetricKey

    /// The key of these 32 bytes; `nil` for any other count.
    public init?(bytes: [UInt8]) {
        guard let key = SymmetricKey(bytes: bytes) else { return nil }
        self.key = key
    }

    /// A new random key (from the operating system's generator).
    public static func random() -> EncryptionKey { EncryptionKey(key: SymmetricKey.random()) }

    init(key: SymmetricKey) { self.key = key }

    /// The key in the file `path`: exactly 32 raw bytes, or 64 hex digits with an optional
    /// trailing newline (`openssl rand -hex 32 > key`). Anything else throws
    /// ``StorageError/Kind/encryption`` saying what the file holds instead.
    ///
    /// - Parameters:
    ///   - path: The key file.
    ///   - warn: Told when the file may be read by group or others.
    public init(contentsOfFile path: String, warn: (String) -> Void = { _ in }) throws(StorageError) {
        // Without waiting: opening a FIFO for reading waits for a writer, which would hold every
        // command given it (it is refused below, as anything but a regular file).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw StorageError(.encryption, "cannot read the encryption key file \(path): \(errnoText())")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw StorageError(.encryption, "the encryption key file \(path) is not a regular file")
        }
        // A key file is 65 bytes at most; a larger one is not a key.
        let contents = try FileIO.read(fd, count: Int(min(status.st_size, 66)), at: 0, path: path)
        guard let key = Self.parse(contents) else {
            throw StorageError(
                .encryption,
                "the encryption key file \(path) holds \(status.st_size) bytes, not a key: it must hold exactly 32 "
                    + "bytes, or 64 hex digits (make one with `openssl rand -hex 32 > \(path)`)")
        }
        if status.st_mode & 0o077 != 0 {
            warn(
                "the encryption key file \(path) may be read by group or others (mode 0"
                    + "\(String(status.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`")
        }
        self = key
    }

    /// The key of a key file's bytes (see ``init(contentsOfFile:warn:)``).
    static func parse(_ contents: [UInt8]) -> EncryptionKey? {
        if contents.count == 32 { return EncryptionKey(bytes: contents) }
        var digits = contents[...]
        if digits.last == UInt8(ascii: "\n") { digits = digits.dropLast() }
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var index = digits.startIndex
        while index < digits.endIndex {
            guard let high = ASCII.hexValue(digits[index]), let low = ASCII.hexValue(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return EncryptionKey(bytes: bytes)
    }

    /// What a store keeps to tell its key from another without keeping the key: an HMAC of a
    /// fixed label no other use derives.
    var checkValue: [UInt8] { key.authenticationCode(Array("httpcache store key check, version 1".utf8)) }
}
