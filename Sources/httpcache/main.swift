// The `httpcache` command-line tool: fetch through the cache, explain its decisions, inspect
// and manage what is stored, and a self-contained demo. See `httpcache --help`.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

Console.ignoreBrokenPipes()
let status = await Commands.run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
