#if os(Linux)
import CacheSystem
import Glibc

/// `httpcache serve --user NAME`: the user the proxy runs as once it listens.
struct ServiceUser: Sendable, Equatable {
    var name: String
    var uid: uid_t
    var gid: gid_t

    /// The account `name` (a name, or a number for an account without one).
    /// - Throws: a usage ``Failure`` when there is no such user.
    init(_ name: String, command: String) throws(Failure) {
        if let entry = getpwnam(name) {
            self.name = name
            uid = entry.pointee.pw_uid
            gid = entry.pointee.pw_gid
        } else if let number = uid_t(name), let entry = getpwuid(number) {
            self.name = String(cString: entry.pointee.pw_name)
            uid = number
            gid = entry.pointee.pw_gid
        } else {
            throw .usage(
                command, "--user \(name): no such user on this system; name one from /etc/passwd such as nobody")
        }
    }

    /// Makes `directory` the user's before the proxy opens its store there: created (mode 0700,
    /// owned by the user) when missing; refused when it belongs to someone else, since the
    /// store refuses a directory another user could plant links in.
    /// - Throws: a ``Failure`` saying what to run.
    func prepare(cacheDirectory directory: String) throws(Failure) {
        var status = stat()
        if lstat(directory, &status) != 0 {
            guard errno == ENOENT else {
                throw Failure(
                    .failure, "cannot use the cache directory \(directory): \(errnoText()); choose another --cache-dir")
            }
            guard mkdir(directory, 0o700) == 0 else {
                throw Failure(
                    .failure,
                    "cannot create the cache directory \(directory): \(errnoText()); create its parent, or choose another --cache-dir"
                )
            }
            guard lchown(directory, uid, gid) == 0 else {
                throw Failure(
                    .failure, "cannot give \(directory) to \(name): \(errnoText()); run chown \(name) \(directory)")
            }
            return
        }
        guard status.st_uid == uid else {
            throw Failure(
                .failure,
                "the cache directory \(directory) belongs to uid \(status.st_uid), not to \(name) (uid \(uid)) whom --user runs the proxy as; run chown -R \(name) \(directory), or choose another --cache-dir"
            )
        }
    }

    /// Gives up root for the user: supplementary groups, group, then user, in that order, each
    /// checked; then checks that root cannot be had back.
    /// - Throws: a ``Failure`` naming the step that failed; the proxy must not go on.
    func become() throws(Failure) {
        func failed(_ step: String) -> Failure {
            Failure(
                .failure, "--user \(name): \(step) failed: \(errnoText()); run httpcache serve as root to use --user")
        }
        guard initgroups(name, gid) == 0 else { throw failed("initgroups") }
        guard setgid(gid) == 0 else { throw failed("setgid(\(gid))") }
        guard setuid(uid) == 0 else { throw failed("setuid(\(uid))") }
        guard getuid() == uid, geteuid() == uid, getgid() == gid, getegid() == gid, uid == 0 || setuid(0) != 0 else {
            throw Failure(.failure, "--user \(name): the process still has other ids after setuid; not serving")
        }
    }
}
#endif
