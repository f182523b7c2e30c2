@_spi(Fuzzing) import CacheStorage
import FuzzSupport

/// An encrypted body's blocks truncated, reordered, replayed from another entry, flipped or
/// given another length: every read is the original plaintext or a miss, never a trap.
runFuzzer { data, size in
    SealedBodyFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
