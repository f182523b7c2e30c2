internal import COpenSSLHTTPCache
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading the PEM files an operator names (certificates, keys, trust roots): opened only when
/// they are regular files, and read with a password callback that never asks for a passphrase.
enum PEMFile {
    /// Why a PEM file cannot be read, in words that follow its path.
    struct Unreadable: Error {
        var reason: String
    }

    /// What one read of a PEM file gave: the objects in order, what OpenSSL said when the last
    /// read found none (after objects, only the file's end; with none, why it could not decode
    /// what it found), and whether a block was encrypted with a passphrase.
    struct Contents {
        var objects: [OpaquePointer]
        var lastError: String
        var encrypted: Bool
    }

    /// Every object `read` takes off the PEM file `path`, in order. `read` gets the file and the
    /// argument to pass with ``refusePassphrase`` to OpenSSL's `PEM_read_bio_…`.
    ///
    /// A directory or another file that is not a regular one (a FIFO, a socket, a device) is
    /// refused before it is opened: OpenSSL opens a directory and then finds "no start line",
    /// and opening a FIFO waits for a writer, which would hold a reload forever.
    /// - Throws: ``Unreadable`` when `path` is not a regular file or cannot be opened.
    static func read(
        _ path: String, _ read: (_ file: OpaquePointer, _ passphraseArgument: UnsafeMutableRawPointer) -> OpaquePointer?
    ) throws(Unreadable) -> Contents {
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
            let kind = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
            throw Unreadable(reason: "is \(kind), not a PEM file")
        }
        errno = 0
        OpenSSLErrorQueue.clear()
        guard let file = BIO_new_file(path, "r") else {
            let reason = errno != 0 ? errnoText(errno) : OpenSSLErrorQueue.drainText(or: "cannot be opened")
            OpenSSLErrorQueue.clear()
            throw Unreadable(reason: "cannot be read: \(reason)")
        }
        defer { BIO_free(file) }
        var encrypted = false
        var objects: [OpaquePointer] = []
        withUnsafeMutablePointer(to: &encrypted) { flag in
            while let object = read(file, UnsafeMutableRawPointer(flag)) { objects.append(object) }
        }
        return Contents(
            objects: objects, lastError: OpenSSLErrorQueue.drainText(or: "nothing decodable"), encrypted: encrypted)
    }
}

/// The password callback (`pem_password_cb`) of every PEM read: it gives no passphrase and
/// never asks for one. OpenSSL's default callback prompts "Enter PEM pass phrase:" on the
/// terminal, which blocks the thread that reads (a `SIGHUP` reload, forever, with no line
/// logged) or, without a terminal, prints the prompt into the log. It marks the `Bool` that
/// `asked` points to, so that the caller can say the file is encrypted.
func refusePassphrase(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32, _ asked: UnsafeMutableRawPointer?
) -> Int32 {
    asked?.storeBytes(of: true, as: Bool.self)
    return -1
}
