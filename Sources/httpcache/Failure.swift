/// The exit statuses of `httpcache` (listed in `httpcache --help`).
enum ExitCode: Int32, Sendable {
    /// Done; for `get` and `explain`: an HTTP response was obtained, whatever its status.
    case success = 0
    /// Something else failed: the cache directory or a file could not be used, a transfer was
    /// cut off, a `demo` step did not behave as expected.
    case failure = 1
    /// The command line is wrong: unknown subcommand or option, a malformed URL or field.
    case usage = 2
    /// Nothing is stored for the URL (`show`, `pin`, `unpin`).
    case notStored = 3
    /// The origin could not be reached and nothing stored could be served (as curl's 7).
    case unreachable = 7
}

/// Why a command stopped: a one-line message for standard error and an exit status.
struct Failure: Error, Sendable {
    /// The exit status.
    var code: ExitCode
    /// What happened and what to do, on one line, without the `httpcache: ` prefix.
    var message: String

    init(_ code: ExitCode, _ message: String) {
        self.code = code
        // One line, whatever the underlying error's description holds.
        self.message = message.split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    /// A usage error of `command` (or of `httpcache` itself when `nil`), with a pointer to its
    /// help.
    static func usage(_ command: String?, _ problem: String) -> Failure {
        let help = command.map { "httpcache \($0) --help" } ?? "httpcache --help"
        let prefix = command.map { "\($0): " } ?? ""
        return Failure(.usage, "\(prefix)\(problem) (see `\(help)`)")
    }
}
