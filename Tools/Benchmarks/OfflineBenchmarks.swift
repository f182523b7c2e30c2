import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import OfflinePages

// The offline suite: a page with 500 subresources on a loopback origin (images of 2–60 KiB,
// stylesheets whose url()s name fonts and backgrounds, scripts), every one with an ETag and
// `no-cache`.
//   1. Saving it (HTTPCache.savePage into a fresh disk cache) with 1 job and with the default
//      6, each in a child process of its own so that its peak RSS is its own; wget
//      --page-requisites on the same page in the same run, for comparison.
//   2. Loading the page and all it needs through `httpcache serve --forward` (release build,
//      next to this executable) with curl, 6 transfers at a time as a browser would: online
//      (every resource revalidated: 304s) and offline (origin stopped: served from the pack).

private let offlineClock = ContinuousClock()

private struct OfflineBenchFailure: Error, CustomStringConvertible {
    var description: String
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// The 500-subresource page and what it refers to.
private final class BenchSite: Sendable {
    let origin: LoopbackOrigin
    static let images = 400
    static let stylesheets = 20
    static let scripts = 30
    /// Backgrounds and fonts, named by the stylesheets (50 of them, 2–3 per stylesheet).
    static let cssResources = 50

    init() throws {
        origin = try LoopbackOrigin()
        var html = "<!DOCTYPE html><html><head><title>bench</title>"
        for sheet in 0..<Self.stylesheets { html += "<link rel=stylesheet href=\"css/\(sheet).css\">" }
        for script in 0..<Self.scripts { html += "<script src=\"js/\(script).js\"></script>" }
        html += "</head><body>"
        for image in 0..<Self.images { html += "<p>Paragraph \(image)</p><img src=\"img/\(image).png\" alt=\"\">" }
        html += "</body></html>"
        let page = html
        origin.setDefault { request in
            let path = request.path
            let etag = "\"\(path.hashValue & 0xFFFF)\""
            var fields = [("ETag", etag), ("Cache-Control", "no-cache")]
            if request.header("If-None-Match") == etag {
                return LoopbackOrigin.Response(status: 304, headers: fields, body: [UInt8]())
            }
            let parts = path.split(separator: "/")
            let index = parts.last.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
            switch parts.dropFirst().first {
            case "page.html":
                fields.append(("Content-Type", "text/html; charset=utf-8"))
                return LoopbackOrigin.Response(headers: fields, body: page)
            case "css":
                fields.append(("Content-Type", "text/css"))
                var css = "body { margin: \(index)px }\n"
                for member in stride(from: index, to: Self.cssResources, by: Self.stylesheets) {
                    css +=
                        member % 2 == 0
                        ? ".b\(member) { background: url(\"../bg/\(member).png\") }\n"
                        : "@font-face { font-family: F\(member); src: url(../font/\(member).woff2) format(\"woff2\") }\n"
                }
                return LoopbackOrigin.Response(headers: fields, body: css)
            case "js":
                fields.append(("Content-Type", "text/javascript"))
                return LoopbackOrigin.Response(headers: fields, generatedLength: 8_000 + Int64(index) * 100, seed: 7)
            default:
                fields.append(("Content-Type", "application/octet-stream"))
                let length = 2_048 + Int64((index &* 7919) % 59) * 1_024
                return LoopbackOrigin.Response(headers: fields, generatedLength: length, seed: UInt64(index))
            }
        }
    }

    var pageURL: String { origin.baseURL + "/bench/page.html" }

    /// Every URL a browser loads for the page.
    var allURLs: [String] {
        [pageURL] + (0..<Self.stylesheets).map { origin.baseURL + "/bench/css/\($0).css" }
            + (0..<Self.scripts).map { origin.baseURL + "/bench/js/\($0).js" }
            + (0..<Self.images).map { origin.baseURL + "/bench/img/\($0).png" }
            + (0..<Self.cssResources).map {
                origin.baseURL + ($0 % 2 == 0 ? "/bench/bg/\($0).png" : "/bench/font/\($0).woff2")
            }
    }
}

/// The child's side: saves `url` into `directory` with `jobs`, prints one line.
func runOfflineSaveChild(url: String, directory: String, jobs: Int) async throws {
    var configuration = HTTPCache.Configuration()
    configuration.directory = directory
    let cache = try HTTPCache(configuration: configuration)
    var options = SaveOptions()
    options.jobs = jobs
    let started = offlineClock.now
    guard let page = URL(string: url) else { throw OfflineBenchFailure(description: "not a URL: \(url)") }
    let pack = try await cache.savePage(page, options: options).pack
    let elapsed = seconds(offlineClock.now - started)
    print("\(elapsed) \(peakResidentMiB()) \(pack.resources.count) \(pack.bytes) \(pack.problems.count)")
}

/// Runs `executable arguments`, returning its standard output and wall time.
func run(_ executable: String, _ arguments: [String]) throws -> (output: String, seconds: Double, status: Int32) {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
    environment["no_proxy"] = ""
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let started = offlineClock.now
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (String(decoding: data, as: UTF8.self), seconds(offlineClock.now - started), process.terminationStatus)
}

func runOfflineBenchmarks() async throws {
    let site = try BenchSite()
    let me = CommandLine.arguments[0]
    let binDirectory = (me as NSString).deletingLastPathComponent
    let urls = site.allURLs
    print(
        "page: \(urls.count - 1) subresources (\(BenchSite.images) images, \(BenchSite.stylesheets) stylesheets, "
            + "\(BenchSite.scripts) scripts, \(BenchSite.cssResources) fonts and backgrounds named in CSS)")

    var savedDirectory: TemporaryDirectory?
    for jobs in [1, 6] {
        var times: [Double] = []
        var peak = 0.0
        var line = ""
        for _ in 0..<3 {
            let directory = TemporaryDirectory("offline-bench")
            let child = try run(me, ["offline-save-child", site.pageURL, directory.path, String(jobs)])
            guard child.status == 0 else { throw OfflineBenchFailure(description: "the save child failed") }
            let fields = child.output.split(separator: " ")
            guard fields.count == 5, let time = Double(fields[0]), let rss = Double(fields[1]) else {
                throw OfflineBenchFailure(description: "the save child printed \(child.output)")
            }
            times.append(time)
            peak = max(peak, rss)
            line = "\(fields[2]) resources, \((Int64(fields[3]) ?? 0) >> 10) KiB, \(fields[4].dropLast()) problems"
            savedDirectory = directory
        }
        times.sort()
        print(
            String(
                format: "save --jobs %d: median %.3f s (min %.3f, max %.3f), peak RSS %.0f MiB; ", jobs, times[1],
                times[0], times[2], peak)
                + line)
    }
    let wgetDirectory = TemporaryDirectory("offline-bench-wget")
    if FileManager.default.isExecutableFile(atPath: "/usr/bin/wget") {
        var times: [Double] = []
        for round in 0..<3 {
            let wget = try run(
                "/usr/bin/wget", ["-q", "-p", "--no-proxy", "-P", wgetDirectory.path + "/\(round)", site.pageURL])
            times.append(wget.seconds)
        }
        times.sort()
        print(String(format: "same run, wget --page-requisites (one connection at a time): median %.3f s", times[1]))
    }

    // Loading through the proxy, on the cache saved with 6 jobs.
    guard let saved = savedDirectory else { return }
    let httpcache = binDirectory + "/httpcache"
    guard FileManager.default.isExecutableFile(atPath: httpcache) else {
        print("offline load: skipped: build the proxy first (swift build -c release --product httpcache)")
        return
    }
    let proxy = ChildProcess()
    proxy.executableURL = URL(fileURLWithPath: httpcache)
    proxy.arguments = [
        "serve", "--forward", "--allow-destination", "127.0.0.1", "--listen", "127.0.0.1:0", "--cache-dir",
        saved.path,
    ]
    let proxyOutput = Pipe()
    proxy.standardOutput = proxyOutput
    proxy.standardError = FileHandle.nullDevice
    try proxy.run()
    defer { proxy.terminate() }
    var first: [UInt8] = []
    while let byte = try proxyOutput.fileHandleForReading.read(upToCount: 1)?.first, byte != 0x0A { first.append(byte) }
    guard let port = String(decoding: first, as: UTF8.self).split(separator: ":").last.flatMap({ Int($0) }) else {
        throw OfflineBenchFailure(description: "httpcache serve did not start")
    }
    let list = saved.path + "/urls.curl"
    try urls.map { "url = \"\($0)\"\noutput = \"/dev/null\"\nwrite-out = \"%{http_code}\\\\n\"\n" }.joined()
        .write(toFile: list, atomically: true, encoding: .utf8)
    func load(_ label: String) throws {
        var times: [Double] = []
        var codes = ""
        for _ in 0..<5 {
            let curl = try run(
                "/usr/bin/curl",
                ["-s", "--parallel", "--parallel-max", "6", "-x", "http://127.0.0.1:\(port)", "-K", list])
            times.append(curl.seconds)
            codes = curl.output
        }
        times.sort()
        let ok = codes.split(separator: "\n").filter { $0 == "200" }.count
        print(
            String(
                format:
                    "load through httpcache serve --forward, %@: median %.3f s (min %.3f, max %.3f), %d of %d answered 200",
                label, times[2], times[0], times[4], ok, urls.count))
    }
    try load("online (origin up, every resource revalidated)")
    site.origin.stop()
    try load("offline (origin stopped, served from the pack)")
}

// The import suite: `/usr/bin/time -v httpcache import FILE --cache-dir DIR` (the release build
// next to this executable) on WARC files made here; the peak RSS is time's "Maximum resident
// set size", the kernel's for the whole process:
//   1. a gzip bomb: a ~1 MB .warc.gz whose middle record inflates to 1 GiB;
//   2. a hostless `WARC-Target-URI: http://` record amid 1,000 good ones;
//   3. 100,000 and 1,000,000 tiny records, and the growth per record between them.
func runImportBenchmarks() throws {
    let me = CommandLine.arguments[0]
    let httpcache = (me as NSString).deletingLastPathComponent + "/httpcache"
    guard FileManager.default.isExecutableFile(atPath: httpcache),
        FileManager.default.isExecutableFile(atPath: "/usr/bin/time")
    else {
        print("import: skipped: needs /usr/bin/time and httpcache (swift build -c release --product httpcache)")
        return
    }
    let directory = TemporaryDirectory("import-bench")
    /// Imports `path` into a fresh cache; returns the peak RSS in KiB.
    func importing(_ path: String, _ label: String) throws -> Int {
        let cache = directory.path + "/cache"
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/time")
        process.arguments = ["-v", httpcache, "import", path, "--cache-dir", cache]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let started = offlineClock.now
        try process.run()
        // time writes its report after the command's output ends: read both to their ends.
        let printed = Locked(Data())
        let reader = Thread { printed.withLock { $0 = output.fileHandleForReading.readDataToEndOfFile() } }
        reader.start()
        let report = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        while reader.isExecuting || !reader.isFinished { usleep(1_000) }
        let elapsed = seconds(offlineClock.now - started)
        let peak =
            report.split(separator: "\n").first { $0.contains("Maximum resident set size") }
            .flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") } ?? 0
        let size = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int64) ?? 0
        print(
            String(
                format: "%@ (%.1f MB file): exit %d, %.1f s, peak RSS %.1f MiB", label, Double(size) / 1e6,
                process.terminationStatus, elapsed, Double(peak) / 1024))
        let stdout = String(decoding: printed.withLock { $0 }, as: UTF8.self)
        for line in stdout.split(separator: "\n").prefix(3) { print("    " + line) }
        return peak
    }
    let bomb = directory.path + "/bomb.warc.gz"
    _ = try WARCFixtures.writeGzipBomb(to: bomb, inflatedSize: 1 << 30)
    _ = try importing(bomb, "gzip bomb, one record inflating to 1 GiB")
    try? FileManager.default.removeItem(atPath: bomb)

    let hostless = directory.path + "/hostless.warc.gz"
    try WARCFixtures.writeTinyRecords(to: hostless, count: 1_001, hostless: [500])
    _ = try importing(hostless, "a hostless record amid 1,000 good ones")

    var peaks: [Int: Int] = [:]
    for count in [100_000, 1_000_000] {
        let path = directory.path + "/tiny-\(count).warc.gz"
        try WARCFixtures.writeTinyRecords(to: path, count: count)
        peaks[count] = try importing(path, "\(count) tiny records")
        try? FileManager.default.removeItem(atPath: path)
    }
    let growth = Double(peaks[1_000_000, default: 0] - peaks[100_000, default: 0]) * 1024 / 900_000
    print(String(format: "growth of the peak from 100,000 to 1,000,000 records: %.0f bytes a record", growth))
}
