import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Making and checking a cache directory before anything in it is opened.
extension DiskStore {
    /// The files a disk store keeps at the top of its directory (besides `bodies/`), each
    /// checked before the store opens it: regular, not a link, owned by this user or root, not
    /// writable by group or others.
    static let indexFiles = ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.lock", "index.changes"]

    /// Creates `path` when it is missing (each new directory 0700) and checks that no other
    /// user can change it, as OpenSSH's `StrictModes` checks `~/.ssh`; returns the directory
    /// it resolves to, which the caller then uses.
    ///
    /// Links the user named are followed once, here: a cache directory that is a link of the
    /// user's own (`~/.cache` on another disk) works, and what it resolves to is checked.
    /// Refused, with ``StorageError/Kind/unsafeDirectory`` and a line saying how to fix it:
    /// - the directory itself owned by another user than this one or root, or writable by
    ///   group or others (even with the sticky bit: anyone could then create files in it);
    /// - a directory it lies in owned by another user, or writable by group or others without
    ///   the sticky bit (they could rename the cache directory and put their own in its place;
    ///   a sticky directory such as `/tmp` only lets them rename their own entries);
    /// - a link in the path as given owned by another user, or in such a directory.
    ///
    /// Nothing is created under a directory that fails these checks.
    public static func prepareDirectory(_ path: String) throws(StorageError) -> String {
        guard !path.isEmpty else { throw StorageError(.writeFailed, "the cache directory is an empty path") }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let components = absolute.split(separator: "/").map(String.init)
        // Not `joined(separator:)`: unspecialized, it has the Swift runtime look up an associated
        // type's conformance, a scan of every conformance in the binary (0.2M instructions).
        func joined(_ count: Int) -> String {
            var path = ""
            for component in components[..<count] { path += "/" + component }
            return path.isEmpty ? "/" : path
        }
        // The longest part of the path that exists.
        var existing = components.count
        var status = stat()
        while existing > 0 && lstat(joined(existing), &status) != 0 {
            guard errno == ENOENT else {
                throw StorageError(
                    .writeFailed, "cannot use the cache directory \(path): \(joined(existing)): \(errnoText())")
            }
            existing -= 1
        }
        try checkLinks(named: path, in: (0..<existing).map { joined($0 + 1) })
        var resolved = try resolve(joined(existing), for: path)
        if existing < components.count {
            try checkParents(from: resolved, for: path)
            for component in components[existing...] {
                resolved = (resolved == "/" ? "" : resolved) + "/" + component
                guard mkdir(resolved, 0o700) == 0 || errno == EEXIST else {
                    throw StorageError(
                        .writeFailed,
                        "cannot create the cache directory \(resolved): \(errnoText()); check that its parent "
                            + "is writable, or choose another directory")
                }
            }
            resolved = try resolve(resolved, for: path)
        }
        try checkDirectory(resolved, for: path)
        try checkParents(from: (resolved as NSString).deletingLastPathComponent, for: path)
        return resolved
    }

    /// Checks the store's own files and `bodies/` in `directory` (already checked itself),
    /// creating `bodies/` when missing.
    static func prepareContents(of directory: String) throws(StorageError) {
        let bodies = directory + "/bodies"
        guard mkdir(bodies, 0o700) == 0 || errno == EEXIST else {
            throw StorageError(
                .writeFailed,
                "cannot create \(bodies): \(errnoText()); check that the cache directory is writable")
        }
        try checkEntry(bodies, isDirectory: true, in: directory)
        FileIO.restrictMode(bodies, 0o700)
        for name in indexFiles {
            try checkEntry(directory + "/" + name, isDirectory: false, in: directory)
        }
    }

    // MARK: - Checks

    /// Whether a file owned by `owner` may be trusted: this user's or root's.
    private static func isTrusted(_ owner: uid_t) -> Bool { owner == geteuid() || owner == 0 }

    private static func unsafe(_ path: String, _ problem: String) -> StorageError {
        StorageError(.unsafeDirectory, "refusing the cache directory \(path): \(problem)")
    }

    /// `realpath` of `path`, which exists.
    private static func resolve(_ path: String, for given: String) throws(StorageError) -> String {
        guard let resolved = realpath(path, nil) else {
            throw StorageError(.writeFailed, "cannot use the cache directory \(given): \(path): \(errnoText())")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The cache directory itself: a directory of this user's or root's that nobody else may
    /// write; tightened to 0700 when it is this user's.
    private static func checkDirectory(_ directory: String, for given: String) throws(StorageError) {
        var status = stat()
        guard lstat(directory, &status) == 0 else {
            throw StorageError(.writeFailed, "cannot use the cache directory \(given): \(errnoText())")
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw StorageError(.writeFailed, "cannot use the cache directory \(given): \(directory) is not a directory")
        }
        guard isTrusted(status.st_uid) else {
            throw unsafe(
                given,
                "\(directory) is owned by uid \(status.st_uid), not by this user (uid \(geteuid())) or root, who "
                    + "could plant links in it; use a directory of your own, or `chown \(geteuid()) \(directory)` "
                    + "if it is yours")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw unsafe(
                given,
                "\(directory) is writable by group or others (mode \(mode(status))), who could plant links in it; "
                    + "run `chmod go-w \(directory)` or use a directory of your own")
        }
        if status.st_uid == geteuid() && status.st_mode & 0o077 != 0 { FileIO.restrictMode(directory, 0o700) }
    }

    /// `directory` and every directory it lies in, up to `/`, as places the cache directory (or a
    /// link to it) lies in: this user's or root's, and not writable by group or others unless
    /// sticky.
    private static func checkParents(from directory: String, for given: String) throws(StorageError) {
        var parent = directory
        while true {
            var status = stat()
            guard lstat(parent, &status) == 0 else {
                throw StorageError(
                    .writeFailed, "cannot use the cache directory \(given): \(parent): \(errnoText())")
            }
            guard isTrusted(status.st_uid) else {
                throw unsafe(
                    given,
                    "the directory \(parent) it lies in is owned by uid \(status.st_uid), not by this user "
                        + "(uid \(geteuid())) or root, who could put another directory in its place; use a "
                        + "directory elsewhere")
            }
            guard status.st_mode & 0o022 == 0 || status.st_mode & S_ISVTX != 0 else {
                throw unsafe(
                    given,
                    "the directory \(parent) it lies in is writable by group or others (mode \(mode(status))) "
                        + "without the sticky bit, who could put another directory in its place; run "
                        + "`chmod go-w \(parent)` or use a directory elsewhere")
            }
            if parent == "/" { return }
            parent = (parent as NSString).deletingLastPathComponent
        }
    }

    /// The links among `prefixes` (the path as given, one component more each): this user's or
    /// root's, in directories that pass ``checkParents(from:for:)``.
    private static func checkLinks(named given: String, in prefixes: [String]) throws(StorageError) {
        for prefix in prefixes {
            var status = stat()
            guard lstat(prefix, &status) == 0, status.st_mode & S_IFMT == S_IFLNK else { continue }
            guard isTrusted(status.st_uid) else {
                throw unsafe(
                    given,
                    "the link \(prefix) in its path is owned by uid \(status.st_uid), not by this user "
                        + "(uid \(geteuid())) or root; name the directory it points to, if you trust it, or use "
                        + "another")
            }
            try checkParents(from: try resolve((prefix as NSString).deletingLastPathComponent, for: given), for: given)
        }
    }

    /// One of the store's entries in `directory`, when it exists: the kind expected (never a
    /// link), this user's or root's, not writable by group or others.
    private static func checkEntry(_ path: String, isDirectory: Bool, in directory: String) throws(StorageError) {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw StorageError(.readFailed, "cannot check \(path): \(errnoText())")
        }
        let kind = status.st_mode & S_IFMT
        guard kind == (isDirectory ? S_IFDIR : S_IFREG) else {
            let what =
                kind == S_IFLNK
                ? "a symbolic link" : isDirectory ? "not a directory" : "not a regular file"
            throw unsafe(
                directory, "\(path) is \(what), which a cache directory never holds; remove it (`rm \(path)`)")
        }
        guard isTrusted(status.st_uid) else {
            throw unsafe(
                directory,
                "\(path) is owned by uid \(status.st_uid), not by this user (uid \(geteuid())) or root; remove it "
                    + "(`rm \(isDirectory ? "-r " : "")\(path)`)")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw unsafe(
                directory,
                "\(path) is writable by group or others (mode \(mode(status))); run `chmod go-w \(path)`")
        }
    }

    private static func mode(_ status: stat) -> String { "0" + String(status.st_mode & 0o7777, radix: 8) }
}
