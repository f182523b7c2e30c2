import CacheSemantics
import CacheSystem

/// Where the exchanges of a cache write their transitions when tracing is on: one line per
/// (state, event, action), as Varnish's `cnt_diag` logs each step of a request.
///
/// Each request gets a number; its first line names its method and URI, the lines after it
/// the state it was in, the event that came and the action the exchange returned:
///
/// ```
/// trace 7 GET http://127.0.0.1:8080/a
/// trace 7 idle start → readCandidates
/// trace 7 lookingUp candidatesRead(0) → join
/// trace 7 joining joinedAsLeader → forward(uri-miss)
/// trace 7 forwarding originResponded(200) → relay(200, store)
/// ```
///
/// Set `HTTPCACHE_TRACE=1` in the environment of a process (`httpcache get`, `httpcache serve`,
/// an app) and every cache it makes writes these lines to standard error; or give a cache a
/// trace of its own in ``ExchangeDriver/Configuration/trace``. With no trace, an exchange pays
/// one branch per event.
public final class ExchangeTrace: Sendable {
    /// The environment variable that turns the trace on for a process: `HTTPCACHE_TRACE=1`
    /// (any value but empty or `0`), read when a cache is made.
    public static let environmentVariable = "HTTPCACHE_TRACE"

    private let sink: @Sendable (String) -> Void
    private let lastNumber = Locked(0)

    /// A trace that hands each line, without its newline, to `sink`, on the thread that fed the
    /// exchange its event.
    public init(_ sink: @escaping @Sendable (String) -> Void) {
        self.sink = sink
    }

    /// The process's trace on standard error: one for every cache in the process, so that
    /// request numbers do not repeat.
    static let standardError = ExchangeTrace { line in FileDescriptor.writeToStandardError(line + "\n") }

    /// ``standardError`` when ``environmentVariable`` turns it on, else `nil`.
    static func fromEnvironment() -> ExchangeTrace? {
        guard let value = FileDescriptor.environment(environmentVariable), !value.isEmpty, value != "0" else {
            return nil
        }
        return standardError
    }

    /// Numbers a new request and writes its first line: its method and URI, and `note` (what
    /// started it, when not a client).
    func begin(_ request: RequestHead, note: String? = nil) -> Int {
        let number = lastNumber.withLock { number in
            number += 1
            return number
        }
        record(number, "\(request.method) \(request.uri)" + (note.map { " (\($0))" } ?? ""))
        return number
    }

    /// Writes a line of request `number`.
    func record(_ number: Int, _ text: String) {
        sink("trace \(number) \(text)")
    }
}
