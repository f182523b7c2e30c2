/// How often each entry was used lately, estimated in a few bits an entry: a count-min sketch
/// of 4-bit counters, four counters a key and the least of them its estimate, every counter
/// halved each time the sketch has counted ten uses a word, so that past popularity fades.
/// This is TinyLFU's frequency filter (Einziger, Friedman and Manes, "TinyLFU: A Highly
/// Efficient Cache Admission Policy", ACM Transactions on Storage 13(4), 2017), which a memory
/// tier asks whether an entry read from a slower tier is used more than the one it would evict.
///
/// Estimates err only upwards (keys sharing counters), by little while the table has a word
/// for each key it holds (``ensureCapacity(_:)``); counters stop at 15.
struct FrequencySketch {
    /// Sixteen 4-bit counters a word.
    private var table: [UInt64]
    /// Uses counted since the last halving.
    private var additions = 0

    /// The most words the table grows to: 8 MiB, a word for each of a million entries.
    static let maximumWords = 1 << 20
    private static let minimumWords = 64

    init() { table = Array(repeating: 0, count: Self.minimumWords) }

    /// The uses counted before every counter is halved.
    private var sampleSize: Int { 10 * table.count }

    /// Grows the table to a word for each of `entries` keys (a power of two, at most
    /// ``maximumWords``). A larger table starts empty: what was counted is forgotten.
    mutating func ensureCapacity(_ entries: Int) {
        guard entries > table.count, table.count < Self.maximumWords else { return }
        var words = table.count
        while words < entries && words < Self.maximumWords { words *= 2 }
        table = Array(repeating: 0, count: words)
        additions = 0
    }

    /// The four counters of `hash`: each a word of the table and a nibble in it, from two
    /// halves of the mixed hash (Kirsch and Mitzenmacher's double hashing).
    @inline(__always)
    private func counters(_ hash: Int) -> (words: (Int, Int, Int, Int), shifts: (UInt64, UInt64, UInt64, UInt64)) {
        // The identity's hash is Swift's seeded hash; mixed again so low bits vary with all of it.
        var mixed = UInt64(bitPattern: Int64(hash)) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        let first = mixed & 0xFFFF_FFFF
        let step = (mixed >> 32) | 1
        let mask = UInt64(table.count * 16 - 1)
        func place(_ index: UInt64) -> (Int, UInt64) {
            let counter = (first &+ index &* step) & mask
            return (Int(counter >> 4), (counter & 15) << 2)
        }
        let (w0, s0) = place(0)
        let (w1, s1) = place(1)
        let (w2, s2) = place(2)
        let (w3, s3) = place(3)
        return ((w0, w1, w2, w3), (s0, s1, s2, s3))
    }

    /// Counts a use of the key hashing to `hash`.
    mutating func increment(_ hash: Int) {
        let (words, shifts) = counters(hash)
        var added = bump(words.0, shifts.0)
        added = bump(words.1, shifts.1) || added
        added = bump(words.2, shifts.2) || added
        added = bump(words.3, shifts.3) || added
        guard added else { return }
        additions += 1
        if additions >= sampleSize { halve() }
    }

    /// Adds one to a counter below 15; whether it did.
    @inline(__always)
    private mutating func bump(_ word: Int, _ shift: UInt64) -> Bool {
        guard count(word, shift) < 15 else { return false }
        table[word] += 1 << shift
        return true
    }

    /// The estimated uses of the key hashing to `hash` (0 to 15).
    func frequency(_ hash: Int) -> Int {
        let (words, shifts) = counters(hash)
        let first = min(count(words.0, shifts.0), count(words.1, shifts.1))
        return min(first, min(count(words.2, shifts.2), count(words.3, shifts.3)))
    }

    @inline(__always)
    private func count(_ word: Int, _ shift: UInt64) -> Int { Int((table[word] >> shift) & 15) }

    /// Halves every counter (the sketch's aging).
    private mutating func halve() {
        for index in table.indices { table[index] = (table[index] >> 1) & 0x7777_7777_7777_7777 }
        additions /= 2
    }
}
