/// The subcommands, their help, and dispatching to them.
enum Commands {
    /// One subcommand.
    struct Entry: Sendable {
        var name: String
        var synopsis: String
        var summary: String
        var help: String
        var specs: [OptionSpec]
        var run: @Sendable (ParsedArguments) async throws(Failure) -> Void
    }

    static let all: [Entry] = [
        Entry(
            name: GetCommand.name, synopsis: "get URL", summary: GetCommand.summary, help: GetCommand.help,
            specs: GetCommand.specs, run: { arguments throws(Failure) in try await GetCommand(arguments).run() }),
        Entry(
            name: ExplainCommand.name, synopsis: "explain URL", summary: ExplainCommand.summary,
            help: ExplainCommand.help, specs: ExplainCommand.specs,
            run: { arguments throws(Failure) in try await ExplainCommand(arguments).run() }),
        Entry(
            name: ListCommand.name, synopsis: "ls [PREFIX]", summary: ListCommand.summary, help: ListCommand.help,
            specs: ListCommand.specs, run: { arguments throws(Failure) in try ListCommand(arguments).run() }),
        Entry(
            name: ShowCommand.name, synopsis: "show URL", summary: ShowCommand.summary, help: ShowCommand.help,
            specs: ShowCommand.specs, run: { arguments throws(Failure) in try ShowCommand(arguments).run() }),
        Entry(
            name: PurgeCommand.name, synopsis: "purge URL|--prefix P|--all", summary: PurgeCommand.summary,
            help: PurgeCommand.help, specs: PurgeCommand.specs,
            run: { arguments throws(Failure) in try PurgeCommand(arguments).run() }),
        Entry(
            name: "pin", synopsis: "pin URL", summary: PinCommand.summary(pinning: true),
            help: PinCommand.help(pinning: true), specs: PinCommand.specs,
            run: { arguments throws(Failure) in try PinCommand(arguments, pinning: true).run() }),
        Entry(
            name: "unpin", synopsis: "unpin URL", summary: PinCommand.summary(pinning: false),
            help: PinCommand.help(pinning: false), specs: PinCommand.specs,
            run: { arguments throws(Failure) in try PinCommand(arguments, pinning: false).run() }),
        Entry(
            name: SaveCommand.name, synopsis: "save URL", summary: SaveCommand.summary, help: SaveCommand.help,
            specs: SaveCommand.specs, run: { arguments throws(Failure) in try await SaveCommand(arguments).run() }),
        Entry(
            name: PacksCommand.name, synopsis: "packs [show|refresh|rm NAME]", summary: PacksCommand.summary,
            help: PacksCommand.help, specs: PacksCommand.specs,
            run: { arguments throws(Failure) in try await PacksCommand(arguments).run() }),
        Entry(
            name: ExportCommand.name, synopsis: "export --warc FILE", summary: ExportCommand.summary,
            help: ExportCommand.help, specs: ExportCommand.specs,
            run: { arguments throws(Failure) in try ExportCommand(arguments).run() }),
        Entry(
            name: ImportCommand.name, synopsis: "import FILE", summary: ImportCommand.summary,
            help: ImportCommand.help, specs: ImportCommand.specs,
            run: { arguments throws(Failure) in try await ImportCommand(arguments).run() }),
        Entry(
            name: StatsCommand.name, synopsis: "stats", summary: StatsCommand.summary, help: StatsCommand.help,
            specs: StatsCommand.specs, run: { arguments throws(Failure) in try StatsCommand(arguments).run() }),
        Entry(
            name: ServeCommand.name, synopsis: "serve --origin URL", summary: ServeCommand.summary,
            help: ServeCommand.help, specs: ServeCommand.specs,
            run: { arguments throws(Failure) in try await ServeCommand(arguments).run() }),
        Entry(
            name: RekeyCommand.name, synopsis: "rekey --new-key-file F", summary: RekeyCommand.summary,
            help: RekeyCommand.help, specs: RekeyCommand.specs,
            run: { arguments throws(Failure) in try RekeyCommand(arguments).run() }),
        Entry(
            name: TopCommand.name, synopsis: "top [--proxy URL]", summary: TopCommand.summary, help: TopCommand.help,
            specs: TopCommand.specs, run: { arguments throws(Failure) in try TopCommand(arguments).run() }),
        Entry(
            name: DemoCommand.name, synopsis: "demo", summary: DemoCommand.summary, help: DemoCommand.help,
            specs: DemoCommand.specs, run: { arguments throws(Failure) in try await DemoCommand(arguments).run() }),
    ]

    static var help: String {
        let rows = all.map { ["  " + $0.synopsis, $0.summary] } + [["  help [COMMAND]", "this help, or a command's"]]
        return """
            httpcache: an HTTP cache (RFC 9111) on the command line

            Usage: httpcache COMMAND [options]   (httpcache COMMAND --help for its options)

            Commands:
            \(Format.table(rows))
            The cache directory: --cache-dir DIR, else $HTTPCACHE_DIR, else $XDG_CACHE_HOME/httpcache
            or ~/.cache/httpcache. `get` and `explain` add their outcome counts to
            <cache directory>/cli-stats.json, which `stats` reads. An encrypted cache: every
            command takes --encryption-key-file FILE (else $HTTPCACHE_ENCRYPTION_KEY_FILE); a new
            cache given a key is made encrypted; `rekey` changes the key.

            Exit status:
              0  done; for get and explain: an HTTP response was obtained, whatever its status
              1  the cache directory or a file could not be used, a transfer was cut off,
                 redirects did not end within 10, or a demo step did not behave as expected
              2  usage error: unknown command or option, malformed URL or field
              3  nothing is stored for the URL (show, pin, unpin), or no such pack (packs)
              7  the origin could not be reached and nothing stored could be served

            Start with: httpcache demo
            """
    }

    /// Whether the command line `arguments` (without the program name) runs on the main thread
    /// (``MainThreadExecutor``). Not the commands that run servers, or several transfers and a
    /// progress display at once, where one job may wait for another: they run on the global pool.
    static func runsOnMainThread(_ arguments: [String]) -> Bool {
        // A switch, not a Set: a Set<String>'s metadata, made at run time, costs the runtime a
        // scan of every protocol conformance in the binary.
        switch arguments.first {
        case ServeCommand.name, DemoCommand.name, TopCommand.name, SaveCommand.name, PacksCommand.name,
            ImportCommand.name:
            return false
        default:
            return true
        }
    }

    /// Runs the command line `arguments` (without the program name) and returns the exit status.
    static func run(_ arguments: [String]) async -> ExitCode {
        do {
            try await dispatch(arguments)
            return .success
        } catch {
            Console.error("httpcache: \(error.message)\n")
            return error.code
        }
    }

    private static func dispatch(_ arguments: [String]) async throws(Failure) {
        guard let name = arguments.first else {
            throw .usage(nil, "missing command; try `httpcache demo`")
        }
        if name == "-h" || name == "--help" || name == "help" {
            if let topic = arguments.dropFirst().first {
                guard let entry = all.first(where: { $0.name == topic }) else {
                    throw .usage(nil, "unknown command '\(topic)'")
                }
                Console.out(entry.help + "\n")
            } else {
                Console.out(help + "\n")
            }
            return
        }
        guard let entry = all.first(where: { $0.name == name }) else {
            if name.hasPrefix("-") { throw .usage(nil, "unknown option '\(name)'; options follow the command") }
            throw .usage(nil, "unknown command '\(name)'")
        }
        let parsed = try ParsedArguments(command: name, arguments: Array(arguments.dropFirst()), specs: entry.specs)
        if parsed.wantsHelp {
            Console.out(entry.help + "\n")
            return
        }
        try await entry.run(parsed)
    }
}
