// Release-mode benchmarks: `swift run -c release benchmarks [semantics]`.
// Each line is one operation's median and 99th-percentile time per call.

import Foundation

let arguments = CommandLine.arguments.dropFirst()
let suites = arguments.isEmpty ? ["semantics"] : Array(arguments)
for suite in suites {
    switch suite {
    case "semantics":
        print("== CacheSemantics (lookup target: median <= 200 ns)")
        for measurement in runSemanticsBenchmarks() { print(measurement.line) }
    default:
        print("benchmarks: unknown suite '\(suite)'; known: semantics")
        exit(2)
    }
}
print("peak RSS: \(Int(peakResidentMiB())) MiB")
