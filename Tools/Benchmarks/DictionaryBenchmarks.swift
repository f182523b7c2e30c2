import CBrotliHTTPCache
import CZlibHTTPCache
import CacheCrypto
import CacheSemantics
import CacheSystem
import CacheZstd
import Foundation

#if os(Linux)
import CachingProxy
import HTTPClient
@_spi(Wire) import HTTPWire
import LoopbackOrigin
#endif

// The dictionaries suite: `benchmarks dictionaries OLD NEW` prints the sizes of NEW raw, gzip -9,
// Brotli (quality 11), zstd -19 without a dictionary and the dcz delta (RFC 9842 §5) against OLD,
// the form a client that holds OLD gets, then (Linux) the same NEW through `httpcache serve
// --dictionary-compress` in this process: the bytes a client receives, the miss that makes the
// delta and the hit that serves it stored. scripts/dictionary-sizes downloads two releases of a
// package that ships a large script and runs it.

struct DictionaryBenchmarkFailure: Error, CustomStringConvertible {
    var description: String
}

/// Runs the suite on the files at `oldPath` and `newPath`.
func runDictionaryBenchmarks(oldPath: String, newPath: String) async throws {
    let old = try [UInt8](Data(contentsOf: URL(fileURLWithPath: oldPath)))
    let new = try [UInt8](Data(contentsOf: URL(fileURLWithPath: newPath)))
    print("   dictionary \(oldPath) (\(old.count) bytes), content \(newPath)")
    print("   load average: \(loadAverage())")
    let hash = DigestAlgorithm.sha256.hash(old)
    let started = MonotonicClock.seconds()
    let delta = try DictionaryZstandard.compress(new, dictionary: old, hash: hash)
    let deltaSeconds = MonotonicClock.seconds() - started
    guard try DictionaryZstandardDecoder.decode(delta, dictionary: old, hash: hash) == new else {
        throw DictionaryBenchmarkFailure(description: "the dcz delta did not decode to the content")
    }
    let rows: [(String, Int)] = [
        ("raw", new.count),
        ("gzip -9", try gzip(new).count),
        ("br (quality 11, 4 MiB window)", try brotli(new).count),
        ("zstd -19, no dictionary", try DictionaryZstandard.compress(new, dictionary: [], hash: hash).count - 40),
        ("dcz: zstd -19, the old release as dictionary", delta.count),
    ]
    for (name, size) in rows {
        let share = String(format: "%6.2f%%", Double(size) * 100 / Double(max(1, new.count)))
        print(
            "   \(name.padding(toLength: 48, withPad: " ", startingAt: 0)) \(String(size).leftPadded(10)) bytes  \(share)"
        )
    }
    // Debian 12's libbrotli (1.0.9) has no shared dictionaries: they came in 1.1.0.
    print("   dcb: not measured (Brotli with a dictionary needs libbrotli >= 1.1.0; Debian 12 has 1.0.9)")
    print(String(format: "   dcz made in %.0f ms (level 19), checked by decoding it", deltaSeconds * 1000))
    #if os(Linux)
    try throughProxy(old: old, new: new, hash: hash, expected: delta.count)
    #endif
}

/// `bytes` as gzip at level 9 (zlib).
private func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    var stream = z_stream()
    guard httpcache_deflate_init_gzip(&stream, 9) == Z_OK else {
        throw DictionaryBenchmarkFailure(description: "zlib could not start deflate")
    }
    defer { deflateEnd(&stream) }
    var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 32)
    var input = bytes
    let result = input.withUnsafeMutableBufferPointer { source in
        output.withUnsafeMutableBufferPointer { destination in
            stream.next_in = source.baseAddress
            stream.avail_in = UInt32(source.count)
            stream.next_out = destination.baseAddress
            stream.avail_out = UInt32(destination.count)
            return deflate(&stream, Z_FINISH)
        }
    }
    guard result == Z_STREAM_END else { throw DictionaryBenchmarkFailure(description: "deflate returned \(result)") }
    return Array(output.prefix(Int(stream.total_out)))
}

/// `bytes` as Brotli at quality 11 with a 4 MiB window (libbrotlienc's defaults for text).
private func brotli(_ bytes: [UInt8]) throws -> [UInt8] {
    var size = BrotliEncoderMaxCompressedSize(bytes.count)
    var output = [UInt8](repeating: 0, count: size)
    let done = bytes.withUnsafeBufferPointer { source in
        output.withUnsafeMutableBufferPointer { destination in
            BrotliEncoderCompress(
                11, 22, BROTLI_MODE_TEXT, source.count, source.baseAddress, &size, destination.baseAddress)
        }
    }
    guard done == BROTLI_TRUE else { throw DictionaryBenchmarkFailure(description: "libbrotlienc failed") }
    return Array(output.prefix(size))
}

#if os(Linux)
/// NEW through an in-process proxy with `--dictionary-compress`, after OLD (sent with
/// `Use-As-Dictionary`): what the client receives and how long the delta's miss and hit take.
private func throughProxy(old: [UInt8], new: [UInt8], hash: [UInt8], expected: Int) throws {
    let origin = try LoopbackOrigin()
    defer { origin.stop() }
    let cached = [("Cache-Control", "max-age=3600")]
    origin.route("/static/v1/app.js") { _ in
        LoopbackOrigin.Response(headers: cached + [("Use-As-Dictionary", "match=\"/static/*/app.js\"")], body: old)
    }
    origin.route("/static/v2/app.js") { _ in LoopbackOrigin.Response(headers: cached, body: new) }
    var configuration = CachingProxy.Configuration(mode: .reverse(origin: origin.baseURL))
    configuration.port = 0
    configuration.log = { _ in }
    configuration.dictionaryCompression = .init()
    let proxy = try CachingProxy(configuration)
    proxy.start()
    defer { proxy.shutdown(timeout: 5) }
    let client = try UpstreamClient(configuration: .init())
    func get(_ path: String, _ fields: [(String, String)]) throws -> (UpstreamResponseHead, [UInt8], Double) {
        let collector = ResponseCollector()
        let url = "http://127.0.0.1:\(proxy.port)\(path)"
        let started = MonotonicClock.seconds()
        try client.perform(
            UpstreamRequest(
                method: "GET", url: url,
                fields: HeaderFields([("Host", "127.0.0.1:\(proxy.port)")] + fields), body: nil),
            collector)
        guard let head = collector.heads.first else { throw DictionaryBenchmarkFailure(description: "no response") }
        return (head, collector.body, MonotonicClock.seconds() - started)
    }
    _ = try get("/static/v1/app.js", [])
    let offer = [("Available-Dictionary", ":\(Base64.encode(hash)):"), ("Accept-Encoding", "gzip, br, zstd, dcz")]
    let (missHead, missBody, missSeconds) = try get("/static/v2/app.js", offer)
    let (hitHead, hitBody, hitSeconds) = try get("/static/v2/app.js", offer)
    guard missHead.fields[.contentEncoding] == "dcz", hitBody == missBody,
        try DictionaryZstandardDecoder.decode(hitBody, dictionary: old, hash: hash) == new
    else {
        throw DictionaryBenchmarkFailure(description: "the proxy did not serve the delta: \(missHead.fields)")
    }
    print("   through httpcache serve --dictionary-compress (loopback origin, same run):")
    print(
        String(
            format: "     miss: %d bytes received (%.2f%% of %d), delta made and stored, %.0f ms", missBody.count,
            Double(missBody.count) * 100 / Double(new.count), new.count, missSeconds * 1000))
    print(
        String(
            format: "     hit:  %d bytes received, %.1f ms (%@)", hitBody.count, hitSeconds * 1000,
            hitHead.fields[.cacheStatus] ?? ""))
    if missBody.count != expected { print("     (the suite's own dcz above was \(expected) bytes)") }
}
#endif

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
