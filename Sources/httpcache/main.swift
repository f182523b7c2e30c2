// The `httpcache` command-line tool. Its subcommands (get, explain, ls, show, purge, stats,
// pin, demo, serve) arrive with the CLI issue; until then it says so instead of pretending.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let message = "httpcache: no subcommands yet; this build has the CacheSemantics engine only (see README.md)\n"
_ = message.withCString { write(2, $0, strlen($0)) }
exit(2)
