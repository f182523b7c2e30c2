import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where `get -o FILE` writes the body.
///
/// - A new file, or an existing regular file, is written as a temporary file beside it and
///   renamed over it once the body is complete, so a failed transfer leaves no half-written
///   file. The new file keeps an existing file's mode, and its owner and group where this
///   process may set them (as root, or when the file is its own).
/// - A symbolic link is followed, as a shell's `>` does: the link stays, and the file it leads
///   to gets the body by these rules (a link to nothing yet creates that file).
/// - An existing file of another type — a character device such as `/dev/null`, a FIFO, a
///   socket — is written in place, never replaced. Whatever arrived before a failure has
///   reached it.
/// - A directory is refused before anything is fetched.
final class OutputFile {
    /// The path as given.
    let path: String
    private let handle: FileHandle
    /// The file that gets the body: ``path``, or where its symbolic links lead.
    private let target: String
    /// Renamed over ``target`` by ``commit()``; `nil` when ``target`` is written in place.
    private let temporary: String?

    init(_ path: String) throws(Failure) {
        self.path = path
        target = try Self.followingLinks(path)
        var existing = stat()
        let exists = stat(target, &existing) == 0
        let type = existing.st_mode & S_IFMT
        if exists && type == S_IFDIR {
            throw Failure(.failure, "cannot write \(path): it is a directory; give a file name")
        }
        if exists && type != S_IFREG {
            let descriptor = open(target, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            guard descriptor >= 0 else { throw Self.cannotWrite(path, "check that it can be opened for writing") }
            handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            temporary = nil
            return
        }
        let url = URL(fileURLWithPath: target)
        let temporary =
            url.deletingLastPathComponent().path + "/." + url.lastPathComponent + ".httpcache-\(getpid()).part"
        unlink(temporary)  // left by an earlier process with this identifier
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { throw Self.cannotWrite(path, "check the directory exists and is writable") }
        if exists {
            // The owner first: changing it clears the set-user-ID and set-group-ID bits.
            _ = fchown(descriptor, existing.st_uid, existing.st_gid)
            _ = fchmod(descriptor, existing.st_mode & 0o7777)
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        self.temporary = temporary
    }

    func write(_ chunk: Data) throws(Failure) {
        do {
            try handle.write(contentsOf: chunk)
        } catch {
            throw Failure(.failure, "cannot write \(path): \(error)")
        }
    }

    /// Puts the complete file in place.
    func commit() throws(Failure) {
        try? handle.close()
        guard let temporary else { return }
        guard rename(temporary, target) == 0 else {
            let failure = Self.cannotWrite(path, "check the directory is writable")
            discard()
            throw failure
        }
    }

    /// Removes the temporary file (a file written in place keeps what it got).
    func discard() {
        try? handle.close()
        if let temporary { unlink(temporary) }
    }

    /// `path` with its symbolic links followed, at most 40 as the kernel does; a link to
    /// nothing gives the path it leads to.
    static func followingLinks(_ path: String) throws(Failure) -> String {
        var current = path
        for _ in 0..<40 {
            guard let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: current) else {
                return current
            }
            current =
                destination.hasPrefix("/")
                ? destination
                : URL(fileURLWithPath: current).deletingLastPathComponent().appendingPathComponent(destination).path
        }
        throw Failure(.failure, "cannot write \(path): more than 40 symbolic links lead from it")
    }

    /// The failure for the last system call on `path`, with `errno`'s text.
    private static func cannotWrite(_ path: String, _ advice: String) -> Failure {
        Failure(.failure, "cannot write \(path): \(errnoText()); \(advice)")
    }
}
