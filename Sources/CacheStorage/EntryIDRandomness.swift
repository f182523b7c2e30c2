import CacheSystem

#if canImport(Glibc)
import Glibc
import Synchronization

/// The random bits of new entry identities on Linux, read from the kernel 4 KiB at a time:
/// `SystemRandomNumberGenerator` makes one `getrandom` call per 64-bit word, two per identity,
/// and the proxy makes an identity on every miss, on its event loop.
///
/// The bits are the kernel's (as the generator's are), only fetched in bulk. A
/// child process made by `fork` does not reuse its parent's remaining bits: a fork handler
/// counts forks (an atomic store, safe in the child) and a pool filled before the last fork is
/// thrown away.
enum EntryIDRandomness {
    private struct Pool {
        var words = [UInt64](repeating: 0, count: 512)
        /// The next unused word; `words.count` when all are used.
        var next = 512
        /// ``forks`` when the words were read.
        var filledAt = -1
    }

    private static let pool: Locked<Pool> = {
        pthread_atfork(nil, nil, { EntryIDRandomness.forks.add(1, ordering: .relaxed) })
        return Locked(Pool())
    }()

    /// Forks made since the process started, counted in the child.
    private static let forks = Atomic<Int>(0)

    /// Two random words: 128 bits.
    static func next() -> (UInt64, UInt64) {
        let forked = forks.load(ordering: .relaxed)
        return pool.withLock { pool in
            if pool.next + 2 > pool.words.count || pool.filledAt != forked {
                fill(&pool.words)
                pool.next = 0
                pool.filledAt = forked
            }
            defer { pool.next += 2 }
            return (pool.words[pool.next], pool.words[pool.next + 1])
        }
    }

    /// Fills `words` from the kernel (`/dev/urandom`: three system calls for 256 identities);
    /// from `SystemRandomNumberGenerator` when that cannot be read.
    private static func fill(_ words: inout [UInt64]) {
        let filled = words.withUnsafeMutableBytes { bytes -> Bool in
            let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var offset = 0
            while offset < bytes.count {
                let count = read(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        guard !filled else { return }
        var generator = SystemRandomNumberGenerator()
        for index in words.indices { words[index] = generator.next() }
    }
}
#else
enum EntryIDRandomness {
    /// Two random words: 128 bits (`arc4random_buf` underneath, no system call per word).
    static func next() -> (UInt64, UInt64) {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }
}
#endif
