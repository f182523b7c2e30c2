import CacheSemantics

/// What values cost in memory, estimated from their sizes without walking the heap: what a
/// memory budget charges for an entry besides its body bytes (``MemoryStore``), and for what
/// the exchange and the proxy remember per key.
///
/// The estimates are upper bounds of how Swift and glibc lay the values out on 64-bit Linux:
/// a heap allocation costs malloc's 8-byte header rounded up to 16 bytes (at least 32); a
/// native string its 32-byte object header and a NUL, unless its UTF-8 fits inline (15 bytes);
/// an array its 32-byte header and its capacity. `benchmarks memory` measures the real cost
/// (resident memory per entry over 200,000 entries) and checks the estimate is at least that.
package enum MemoryCost {
    /// A heap allocation of `payload` bytes.
    package static func allocation(_ payload: Int) -> Int { max(32, (payload + 8 + 15) & ~15) }

    /// The heap bytes of `string` (0 when it is stored inline).
    package static func string(_ string: String) -> Int {
        let count = string.utf8.count
        return count <= 15 ? 0 : allocation(32 + count + 1)
    }

    /// The heap bytes of an array of `count` elements of `stride` bytes (0 when empty).
    package static func array(count: Int, stride: Int) -> Int {
        count == 0 ? 0 : allocation(32 + count * stride)
    }

    /// The heap bytes of `bytes`.
    package static func bytes(_ bytes: [UInt8]?) -> Int {
        guard let bytes, bytes.capacity > 0 else { return 0 }
        return allocation(32 + bytes.capacity)
    }

    /// The heap bytes of `strings` (the array and each string).
    package static func strings(_ strings: [String]) -> Int {
        strings.reduce(array(count: strings.count, stride: MemoryLayout<String>.stride)) { $0 + string($1) }
    }

    /// The heap bytes of `fields`: their array and each name (twice: as sent and in lower case)
    /// and value.
    package static func fields(_ fields: HeaderFields) -> Int {
        var total = array(count: fields.count, stride: MemoryLayout<HeaderField>.stride)
        for field in fields { total += 2 * string(field.name) + string(field.value) }
        return total
    }

    /// The heap bytes an entry's head holds (its box, its strings and arrays).
    package static func head(_ head: EntryHead) -> Int {
        allocation(EntryHead.boxBytes) + string(head.primaryKey) + string(head.variantKey) + string(head.url)
            + fields(head.fields) + bytes(head.facts) + bytes(head.userInfo) + strings(head.tags)
    }

    /// The heap bytes `facts` hold (their box, their `Vary` names and values and entity tag).
    package static func facts(_ facts: StoredResponseFacts) -> Int {
        var total = allocation(StoredResponseFacts.boxBytes) + strings(facts.vary.fieldNames)
        total += array(count: facts.varyValues.count, stride: MemoryLayout<String?>.stride)
        total += array(count: facts.varyRawValues.count, stride: MemoryLayout<String?>.stride)
        for value in facts.varyValues + facts.varyRawValues { total += value.map(string) ?? 0 }
        if let tag = facts.entityTag { total += string(tag.opaqueTag) }
        return total
    }
}
