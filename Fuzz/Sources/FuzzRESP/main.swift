@_spi(Fuzzing) import CacheStorageRedis
import FuzzSupport

/// Redis replies (RESP2) as a server could send them: the parser never traps, reads the same
/// whether the bytes come at once or in two pieces, and arrays of bulk strings survive being
/// written as a command and read back.
runFuzzer { data, size in
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    RESPFuzzing.check(bytes, split: bytes.first.map { Int($0) } ?? 0)
    return 0
}
