import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A loop's way to a disk store's index without waiting for its lock on the loop: a lookup the
// head memo cannot answer, and that cannot be read now without waiting (the background writer
// holds the index with a batch open, whose rows only its connection sees), is read on a thread
// of the channel's own, and the loop is told through a pipe once the memo holds the answer.

extension DiskStore {
    /// A channel on which one event loop makes lookups that would wait for the index's lock
    /// without waiting for them: a key beyond the head memo is read at once
    /// when the index is free or a reading connection can answer (as ``variants(of:)`` would,
    /// and remembered), and off the loop only while the background writer holds the index
    /// with a batch open. `nil` when the shared change counter cannot be mapped (nothing read
    /// is remembered then, so a read off the loop would not spare the loop its own).
    public func makeLookupChannel() -> (any LookupChannel)? {
        guard changeCount != nil else { return nil }
        return IndexLookups(
            mayWait: { [self] in mayWaitForIndex }, waitsForIndex: { [self] in waitsForIndex($0) },
            prepare: { [self] primaryKey in _ = try? rememberVariants(of: primaryKey) })
    }

    /// Whether a lookup of `primaryKey` would wait for the index's lock: it is not remembered,
    /// and reading it now without waiting (``rememberVariantsWithoutWaiting(of:)``) could not.
    /// Only an open batch (whose rows a reading connection cannot see), or a store without
    /// reading connections, can make it wait: otherwise it is `false` at once, before the
    /// memo's lock and the key's hash (some 900 instructions a request; a batch opening in the
    /// moment between this and the lookup is met as before this channel, on the loop).
    func waitsForIndex(_ primaryKey: String) -> Bool {
        mayWaitForIndex && readsIndex(for: primaryKey) && !rememberVariantsWithoutWaiting(of: primaryKey)
    }

    /// Whether a lookup may wait for the index's lock now (``waitsForIndex(_:)`` without the
    /// key): a batch is open, or the store has no reading connection. One atomic load.
    var mayWaitForIndex: Bool { batchTransitions.value & 1 == 1 || configuration.readingConnections == 0 }
}

extension TieredStore {
    /// As ``DiskStore/makeLookupChannel()``; the bodies of the variants read off the loop are
    /// promoted to memory there too (up to ``preparedBodyLimit`` each), so that the hit the
    /// loop then answers reads nothing from disk either.
    public func makeLookupChannel() -> (any LookupChannel)? {
        guard disk.changeCount != nil else { return nil }
        return IndexLookups(
            mayWait: { [disk] in disk.mayWaitForIndex }, waitsForIndex: { [disk] in disk.waitsForIndex($0) },
            prepare: { [self] primaryKey in prepareLookup(of: primaryKey) })
    }

    /// The largest body a lookup made off the loop reads into memory: a caching proxy reads
    /// bodies up to this size on its loop; larger ones are streamed from a worker.
    public static let preparedBodyLimit: Int64 = 1 << 20

    /// Reads the variants of `primaryKey` into the disk's memo and their bodies into memory
    /// (as a hit would: a full memory tier takes one only when it was used more lately than
    /// the entry it evicts). A failure is left for the lookup that follows to meet.
    func prepareLookup(of primaryKey: String) {
        guard let variants = try? disk.rememberVariants(of: primaryKey) else { return }
        let limit = min(Self.preparedBodyLimit, memory.maximumEntrySize)
        for entry in variants.prefix(4) where entry.bodySize > 0 && entry.bodySize <= limit {
            guard let body = try? openBody(for: entry), body.bytesInMemory == nil else { continue }
            _ = try? body.read(0...(body.size - 1))
        }
    }
}

/// One event loop's lookups of a disk store that would wait for its index (``LookupChannel``):
/// each is made on the channel's own serial queue, and its `done` called on the loop, from
/// ``descriptorReady()``, once it is answered; a lookup answered without waiting is not queued.
/// The queue reads one key at a time, so a loop never has more than one read in flight.
final class IndexLookups: LookupChannel {
    /// What the queue shares with the loop: the answered lookups and the pipe that says so.
    /// Its descriptors are closed when the last of them lets it go: a read still queued when
    /// the loop closed the channel never writes to a descriptor number reused meanwhile.
    private final class Answers: Sendable {
        let numbers = Mutex<[UInt64]>([])
        let readEnd: Int32
        let writeEnd: Int32

        init?() {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { return nil }
            for end in ends {
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            }
            readEnd = ends[0]
            writeEnd = ends[1]
        }

        deinit {
            closeDescriptor(readEnd)
            closeDescriptor(writeEnd)
        }

        /// Lookup `number` is answered; the pipe is written only when the list was empty
        /// (the loop drains the pipe before it takes the list, so no answer goes unseen).
        func answer(_ number: UInt64) {
            let wasEmpty = numbers.withLock { numbers in
                numbers.append(number)
                return numbers.count == 1
            }
            guard wasEmpty else { return }
            var byte: UInt8 = 1
            _ = write(writeEnd, &byte, 1)
        }
    }

    private let answers: Answers
    private let mayWait: @Sendable () -> Bool
    private let waitsForIndex: @Sendable (String) -> Bool
    private let prepare: @Sendable (String) -> Void
    private let queue = DispatchQueue(label: "httpcache.index-lookups", qos: .userInitiated)
    /// The lookups queued and not yet answered, by number.
    private var waiting: [UInt64: () -> Void] = [:]
    private var nextNumber: UInt64 = 0
    private var closed = false

    var willClose: ((Int32) -> Void)?

    /// `nil` when no pipe can be had.
    init?(
        mayWait: @escaping @Sendable () -> Bool, waitsForIndex: @escaping @Sendable (String) -> Bool,
        prepare: @escaping @Sendable (String) -> Void
    ) {
        guard let answers = Answers() else { return nil }
        self.answers = answers
        self.mayWait = mayWait
        self.waitsForIndex = waitsForIndex
        self.prepare = prepare
    }

    var descriptor: Int32 { closed ? -1 : answers.readEnd }
    var wantsToWrite: Bool { false }
    /// None: a read off the loop ends when the disk answers; the loop is not held meanwhile.
    var deadline: Double? { nil }

    /// Only while a batch is open (or there is no reading connection): one atomic load.
    func mayQueue(_ primaryKey: String) -> Bool { !closed && mayWait() }

    func lookUp(_ primaryKey: String, _ done: @escaping () -> Void) -> Bool {
        guard !closed, waitsForIndex(primaryKey) else { return false }
        nextNumber += 1
        let number = nextNumber
        waiting[number] = done
        queue.async { [prepare, answers] in
            prepare(primaryKey)
            answers.answer(number)
        }
        return true
    }

    func descriptorReady() {
        var drained = [UInt8](repeating: 0, count: 64)
        while read(answers.readEnd, &drained, drained.count) == drained.count {}
        let answered = answers.numbers.withLock { numbers in
            let taken = numbers
            numbers = []
            return taken
        }
        for number in answered {
            waiting.removeValue(forKey: number)?()
        }
    }

    func expire() {}

    /// The lookups still waiting go on at once (they read the index themselves).
    func close() {
        guard !closed else { return }
        willClose?(answers.readEnd)
        closed = true
        let left = waiting.sorted { $0.key < $1.key }
        waiting.removeAll()
        for (_, done) in left { done() }
    }
}

@available(*, unavailable)
extension IndexLookups: Sendable {}

/// `close(2)`, by a name no channel's ``LookupChannel/close()`` hides.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
