#if os(Linux)
import CacheTestSupport
import Foundation

/// A body that came in HTTP/2 DATA frames, compared while it came (never held whole): its
/// first bytes, and its comparison with the version the response's ETag named.
struct HTTP2Body: CheckedBody {
    /// The first 300 bytes.
    let prefix: [UInt8]
    /// Made at the first DATA frame when the ETag named the requested URL, from the offset
    /// its first byte has (the requested range's first for a 206, else 0); nil when no DATA
    /// came or the ETag named something else.
    let comparison: (from: Int64, GeneratedComparison)?

    func discard() {}

    func text() -> String {
        String(decoding: prefix, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The comparison made as the bytes came, or one over no bytes (a body that did not come).
    func compare(seed: UInt64, from first: Int64) -> GeneratedComparison {
        if let (start, comparison) = comparison, comparison.seed == seed, start == first { return comparison }
        return GeneratedComparison(seed: seed, from: first)
    }
}

extension SoakWorker {
    /// `requests` at once on streams of the worker's HTTP/2 connection to the proxy's TLS port
    /// (made again after a GOAWAY or a close), each answer checked as over HTTP/1.1. A stream
    /// the proxy resets with INTERNAL_ERROR or CANCEL is a cut the client sees (the origin's
    /// body broke off); any other reset, a stream our nghttp2 had to reset (the proxy broke an
    /// HTTP/2 rule) and a GOAWAY with an error are failures.
    func exchangeOverHTTP2(_ requests: [SoakRequest]) {
        tally.requests += requests.count
        guard let options = http2 else { return }
        if http2Client?.isUsable == false { http2Client = nil }
        if http2Client == nil {
            do {
                http2Client = try HTTP2Client(port: proxyPort, tls: options, windowSize: 1 << 20)
            } catch {
                tally.malformed += requests.count
                tally.problem("HTTP/2 to the proxy: \(error)")
                return
            }
        }
        guard let client = http2Client else { return }
        var prefixes = [[UInt8]](repeating: [], count: requests.count)
        var comparisons = [(from: Int64, GeneratedComparison)?](repeating: nil, count: requests.count)
        var started = [Bool](repeating: false, count: requests.count)
        let responses = client.send(
            requests.map { HTTP2Request($0.method, $0.target, fields: $0.fields) }, timeout: 60
        ) { index, head, bytes in
            if !started[index] {
                started[index] = true
                let request = requests[index]
                if let named = head["etag"].flatMap(SoakOrigin.parse(etag:)), named.index == request.index {
                    let from = head.status == 206 ? request.range?.first ?? 0 : 0
                    comparisons[index] = (
                        from, GeneratedComparison(seed: SoakOrigin.seed(named.index, named.version), from: from)
                    )
                }
            }
            comparisons[index]?.1.consume(ArraySlice(bytes))
            if prefixes[index].count < 300 { prefixes[index] += bytes.prefix(300 - prefixes[index].count) }
        }
        for (index, (request, response)) in zip(requests, responses).enumerated() {
            let what = "\(request.method) \(request.target) over HTTP/2"
            switch response.end {
            case .endStream:
                let head = ResponseHead(status: response.status, fields: response.fields.map { ($0.name, $0.value) })
                // An HTTP2Body never throws: its bytes are all here.
                try? check(head, request, body: HTTP2Body(prefix: prefixes[index], comparison: comparisons[index]))
            case .reset(let code, true) where code == 0x2 || code == 0x8:
                tally.visibleCuts += 1
            case .reset(let code, let byPeer):
                tally.malformed += 1
                tally.problem(
                    "\(what): RST_STREAM \(HTTP2Client.codeName(code)) from the \(byPeer ? "proxy" : "client")"
                        + (response.rejection.map { " (\($0))" } ?? "") + " after \(response.status) \(response.fields)"
                )
            case .unfinished(let why) where why.hasPrefix("nothing from the server"):
                tally.stalls += 1
                tally.problem("\(what): nothing from the proxy for 60 s")
            case .unfinished:
                tally.visibleCuts += 1
            }
        }
        if let goaway = client.goaway, goaway.code != 0 {
            tally.malformed += 1
            tally.problem(
                "the proxy sent GOAWAY \(HTTP2Client.codeName(goaway.code)) (\(client.closeReason ?? "open"))")
        }
    }
}
#endif
