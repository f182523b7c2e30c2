import CacheExchange
import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

// The partial suite: a disk store holding the first 1 GiB of a 2 GiB representation (an
// incomplete response, RFC 9111 §3.3), and range requests of 1 MiB within it answered through
// the exchange (RFC 9111 §3.4). Reported: the time to the last byte and the bytes the process
// read (rchar in /proc/self/io), against the part's size.
//
//   PARTIAL_BENCH_HELD=1073741824   bytes held

private let partialClock = ContinuousClock()

/// Bytes this process has read through read(2) and pread(2) so far (page cache included).
private func bytesRead() -> Int64 {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix("rchar:") {
        return Int64(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? -1
    }
    return -1
}

func runPartialBenchmarks() throws {
    let held = ProcessInfo.processInfo.environment["PARTIAL_BENCH_HELD"].flatMap(Int64.init) ?? 1 << 30
    let complete = held * 2
    let directory = TemporaryDirectory("partial-bench")
    let store = try DiskStore(
        DiskStore.Configuration(directory: directory.path, capacity: held * 2, maximumEntrySize: held * 2))
    let url = "https://bench.example/disk.img"
    let engine = CacheEngine(configuration: .sharedCache)
    let now = Date().timeIntervalSince1970
    let date = HTTPDate.format(Timestamp(secondsSince1970: now))
    let fields: HeaderFields = [
        "Date": date, "Cache-Control": "max-age=3600", "ETag": "\"img\"", "Content-Length": String(complete),
    ]
    guard
        case .store(let storable) = engine.storageDecision(
            for: RequestHead(uri: url), response: ResponseHead(status: 200, fields: fields),
            requestTime: Timestamp(secondsSince1970: now), responseTime: Timestamp(secondsSince1970: now))
    else { throw StorageError(.index, "the benchmark's response is not storable") }
    var facts = storable.facts
    facts.flags.insert(.incomplete)
    let writer = try store.makeWriter(
        for: EntryHead(
            primaryKey: url, url: url, status: 200, fields: storable.fields, facts: facts.serialized(),
            isComplete: false))
    let chunk = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let filling = partialClock.now
    for _ in 0..<(held >> 20) { try writer.append(chunk) }
    try writer.commit()
    print(
        "stored an incomplete response holding \(held >> 20) MiB of \(complete >> 20) MiB in \(partialClock.now - filling)"
    )

    let driver = ExchangeDriver(
        store: store,
        configuration: ExchangeDriver.Configuration(
            engine: engine, name: "bench", clock: { Date().timeIntervalSince1970 }, log: { print($0) }))
    var times: [Double] = []
    var reads: [Int64] = []
    let part: Int64 = 1 << 20
    for round in 0..<21 {
        let start = held / 21 * Int64(round) + 12_345
        let request = RequestHead(uri: url, fields: ["Range": "bytes=\(start)-\(start + part - 1)"])
        let before = bytesRead()
        let began = partialClock.now
        var machine = driver.exchange(for: ExchangeRequest(head: request, primaryKey: url))
        guard case .serve(let served, _) = driver.start(&machine), served.status == 206,
            case .stored(let body, let range) = served.body
        else { throw StorageError(.index, "round \(round): the range was not answered from the store") }
        var offset = range.lowerBound
        var received: Int64 = 0
        while offset < range.upperBound {
            let bytes = try body.read(offset...min(range.upperBound - 1, offset + (256 << 10) - 1))
            guard let first = bytes.first, first == chunk[Int(offset % Int64(chunk.count))] else {
                throw StorageError(.corrupted, "round \(round): wrong bytes at \(offset)")
            }
            received += Int64(bytes.count)
            offset += Int64(bytes.count)
        }
        let elapsed = began.duration(to: partialClock.now)
        times.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
        reads.append(bytesRead() - before)
        guard received == part else { throw StorageError(.readFailed, "round \(round): \(received) bytes") }
    }
    times.sort()
    reads.sort()
    print(
        String(
            format:
                "range of %lld KiB within %lld MiB held: median %.2f ms, max %.2f ms; bytes read median %lld (%.2f× the part), max %lld",
            part >> 10, held >> 20, times[times.count / 2], times.last ?? 0, reads[reads.count / 2],
            Double(reads[reads.count / 2]) / Double(part), reads.last ?? 0))
}
