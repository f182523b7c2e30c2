import CacheSemantics

/// Times and helpers shared by the tests and benchmarks.
public enum Fixtures {
    /// A fixed "now": Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date.
    public static let epoch = Timestamp(secondsSince1970: 784_111_777)

    /// `epoch` formatted as an HTTP-date, shifted by `offset` seconds.
    public static func httpDate(_ offset: Double = 0) -> String {
        HTTPDate.format(epoch + offset)
    }

    /// A typical cacheable response from a CDN-fronted API or asset server.
    public static let typicalResponseFields: HeaderFields = [
        "Date": httpDate(),
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": "1432",
        "Cache-Control": "public, max-age=300, stale-while-revalidate=60",
        "ETag": "\"5d8c72a5edda8d6a\"",
        "Last-Modified": httpDate(-86_400),
        "Vary": "Accept-Encoding",
        "Age": "12",
        "Server": "nginx",
        "X-Request-Id": "7f3c9a1e-2b4d-4c8e-9f1a-0d2e3b4c5a6f",
    ]

    /// What the engine stores of the typical response to the typical request for `uri`, sent
    /// `roundTrip` seconds before `epoch` (the benchmarks' stored entry).
    public static func typicalStoredFacts(uri: String, roundTrip: Double) -> StoredResponseFacts {
        let request = RequestHead(uri: uri, fields: typicalRequestFields)
        let response = ResponseHead(status: 200, fields: typicalResponseFields)
        guard
            case .store(let stored) = CacheEngine().storageDecision(
                for: request, response: response, requestTime: epoch - roundTrip, responseTime: epoch)
        else { fatalError("the typical response must be storable") }
        return stored.facts
    }

    /// `count` bytes, the one at each index `byte(index)`: a test's large body of a known pattern.
    ///
    /// Filled by a plain loop into the array's storage rather than by `(0..<count).map`: in a
    /// debug build that `map` is the standard library's unspecialized code, which looks up
    /// `Range` type metadata for every element. Under ThreadSanitizer the Swift runtime takes a
    /// process-wide lock for each such lookup (its once-initializations stay on their locked
    /// path so that TSan sees them), and bodies of a few megabytes built that way held every
    /// other thread of the test process that needed the same lock, so that tests running beside
    /// them timed out.
    ///
    /// No bytes is `[]`: `Array(unsafeUninitializedCapacity: 0)` writes a count into the storage
    /// every empty array shares, a write ThreadSanitizer reports against other threads' reads.
    public static func bytes(count: Int, _ byte: (Int) -> UInt8) -> [UInt8] {
        guard count > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var index = 0
            while index < buffer.count {
                buffer[index] = byte(index)
                index += 1
            }
            initialized = buffer.count
        }
    }

    /// A typical request from an app.
    public static let typicalRequestFields: HeaderFields = [
        "Accept": "application/json",
        "Accept-Encoding": "gzip, deflate, br",
        "Accept-Language": "en-US,en;q=0.9",
        "User-Agent": "ExampleApp/1.0 (iPhone; iOS 18.0)",
    ]
}
