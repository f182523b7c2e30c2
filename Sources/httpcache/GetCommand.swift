import CacheSemantics
import Foundation
import HTTPCacheCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache get URL`: fetches through the cache and prints the body (or the response as JSON).
struct GetCommand {
    static let name = "get"
    static let summary = "fetch a URL through the cache and print the body"
    static let specs =
        RequestOptions.specs + CacheOptions.specs + [
            .flag("-i", "--include"), .value("-o", "--output"), .flag("-C", "--continue"), .flag("--json"),
            .flag("-v", "--verbose"), .value("--partition"),
        ]
    static let help = """
        Usage: httpcache get URL [options]

        Fetches URL through the cache and writes the body to standard output. The response
        comes from the cache when RFC 9111 allows it, else from the origin (and is stored when
        it may be); redirects are followed, each cached under its own URL.

        Options:
          -X, --request METHOD   the method (default GET, or POST with -d)
          -H, --header 'N: v'    a request field; repeat for more
          -d, --data DATA        a request body; @FILE reads it from FILE. With -X QUERY
                                 (RFC 10008) the response is cached under the URL and the
                                 content; send its type too (-H 'Content-Type: ...')
          -i, --include          print the status line and fields (with Cache-Status) first
          -o, --output FILE      write the body to FILE; - is stdout. A file is replaced only
                                 when the body is complete and keeps its mode and owner; a
                                 device or FIFO (/dev/null) is written in place; a symbolic
                                 link is followed and stays
          -C, --continue         with -o FILE: a resumable download. The body goes to
                                 FILE.partial (with FILE.partial.json to resume it); a
                                 transfer cut off is resumed at once (up to 5 retries in a row
                                 without progress), and running the same command again after a
                                 failure, Ctrl-C or a crash resumes it with Range and If-Range
                                 (a strong ETag or Last-Modified); if the file changed on the
                                 origin it starts over. FILE appears only when complete
          --json                 print one JSON object instead: url, status, headers ([name,
                                 value] pairs), outcome (hit, miss, revalidated, stale, bypass),
                                 cacheStatus, bodyBytes, body (text under 64 KiB, without -o),
                                 file (with -o), reasons, elapsedMicroseconds
          --policy P             protocol (default), reload, reload-all, revalidate,
                                 prefer-cache, only-cache, or a URLRequest.CachePolicy name
                                 (useProtocolCachePolicy, reloadIgnoringLocalCacheData, ...)
          --offline              the same as --policy only-cache: never contact the origin; a
                                 miss is the cache's 504 response
          --shared               behave as a shared cache (s-maxage, private, Authorization)
          --partition NAME       answer in the cache partition NAME (a user, a site): what is
                                 stored there is never served without it, nor the reverse
          --timeout SECONDS      give up when the origin sends nothing for this long (default 60;
                                 as wget's, not a limit on the whole transfer)
          --cacert FILE          trust the certificate authorities in FILE (PEM) for https
                                 origins, besides the system's (repeatable)
          --cache-dir DIR        the cache directory (default $HTTPCACHE_DIR, else
                                 ~/.cache/httpcache)
          -v, --verbose          say on standard error how the response was obtained and why
          -h, --help             show this help

        A progress bar appears on standard error when it is a terminal, the body is large and
        the body is not going to that terminal.

        Exit status: 0 when an HTTP response was obtained (whatever its status, 504 from
        --offline included); 7 when the origin could not be reached and nothing stored could
        be served (or what is stored may not be served stale: must-revalidate, no-cache); 2 for
        a usage error (a malformed URL too); 1 when the cache directory or the output file
        cannot be used, the transfer was cut off or redirects did not end within 10 (a loop,
        most likely). With -C, a status other than 200, 206 or 416 (already complete) is exit
        1 and nothing is written to FILE.

        Examples:
          httpcache get https://example.com/ -i
          httpcache get https://example.com/data.json --json
          httpcache get https://example.com/big.iso -o big.iso
          httpcache get -C -o big.iso https://example.com/big.iso
          httpcache get https://example.com/ --offline
          httpcache get --partition alice https://example.com/account
        """

    let options: RequestOptions
    let cacheOptions: CacheOptions
    let include: Bool
    let output: String?
    /// `-C`: a resumable download to ``output``.
    let resumes: Bool
    let json: Bool
    let verbose: Bool

    init(_ arguments: ParsedArguments) throws(Failure) {
        options = try RequestOptions(arguments)
        cacheOptions = try CacheOptions(arguments)
        include = arguments.has("-i")
        json = arguments.has("--json")
        verbose = arguments.has("-v")
        output = arguments.value("-o").flatMap { $0 == "-" ? nil : $0 }
        if include && json { throw .usage(Self.name, "-i and --json cannot be combined (--json includes the fields)") }
        if let output, output.isEmpty { throw .usage(Self.name, "-o needs a file name") }
        resumes = arguments.has("-C")
        if resumes { try Self.checkResumable(options, output: output) }
    }

    func run() async throws(Failure) {
        if resumes, let output { return try await runResumable(to: output) }
        // Open the output before fetching, so an unwritable file costs no request.
        let file = try output.map { path throws(Failure) in try OutputFile(path) }
        let cache: HTTPCache
        do {
            cache = try cacheOptions.open(isShared: options.isShared)
        } catch {
            file?.discard()
            throw error
        }
        // The transfer or its failure, thrown once the run is recorded. Not a Result: the
        // metadata of Result<Transfer, Failure>, made at run time, costs the Swift runtime a scan
        // of every conformance in the binary (0.24M instructions of a hit).
        var received: Transfer?
        var failure: Failure?
        do {
            received = try await transfer(cache, file: file)
        } catch {
            file?.discard()
            failure = error
        }
        // The answer is written the moment it is ready, whatever standard output is (a pipe
        // to jq or `$(…)` reads it at once); only then do stale-while-revalidate revalidations
        // finish, so the store is updated before the process exits, and the run is recorded.
        if let received {
            if json { Console.out(received.json(file: output).text + "\n") }
            if verbose {
                Console.error(Report.verbose(received.head, method: options.method, elapsed: received.elapsed))
            }
        }
        // A hit wrote no body: only another outcome, or a failure, may have left one behind.
        if received?.head.outcome != .hit { cache.sweepInBackground() }
        await cache.waitForBackgroundWork()
        cache.flushToDisk()
        let fromOrigin = received.map { [.miss, .bypass].contains($0.head.outcome) ? $0.bodyBytes : 0 } ?? 0
        PersistentStatistics.add(cache.statistics, bytesFromOrigin: fromOrigin, in: cacheOptions.directory)
        if let failure { throw failure }
    }

    /// What one fetch produced.
    struct Transfer {
        var head: CachedResponseHead
        var bodyBytes: Int64
        /// The body when it is text under 64 KiB and `--json` was given without `-o`.
        var text: String?
        var elapsed: Duration

        func json(file: String?) -> JSONValue {
            var members: [(String, JSONValue)] = [
                ("url", .string(head.url.absoluteString)),
                ("status", .int(head.statusCode)),
                ("headers", .array(head.combinedFields.map { .array([.string($0.name), .string($0.value)]) })),
                ("outcome", .string(head.outcome.rawValue)),
                ("cacheStatus", .string(head.cacheStatus.fieldValue)),
                ("bodyBytes", .int(bodyBytes)),
            ]
            if let text { members.append(("body", .string(text))) }
            if let file { members.append(("file", .string(file))) }
            members.append(("reasons", .array(head.reasons.map { .string($0.description) })))
            members.append(("elapsedMicroseconds", .integer(Format.microseconds(elapsed))))
            return .object(members)
        }
    }

    /// `--json` includes a body only when it is shorter than this (64 KiB), as `--help` says.
    static let jsonBodyLimit = 64 * 1024

    /// The failure of a body cut off after `received` bytes, saying whether what came is kept:
    /// the cache keeps a cut body with a strong validator as an incomplete response, which the
    /// next run completes with a range request (RFC 9111 §3.3), and stores nothing otherwise.
    private func cutOff(after received: Int64, _ error: any Error, in cache: HTTPCache) -> Failure {
        // A body that failed its digest (RFC 9530) says so itself, in one line.
        if error is DigestMismatch { return Failure(.failure, "\(error)") }
        let url = options.url.absoluteString
        // The transport's own sentence (a URLError's description), not the NSError around it;
        // the HTTP client's says "the response from URL was cut off: CAUSE; it is incomplete and
        // must not be used as complete", of which this line needs only CAUSE.
        var cause = (error as? URLError)?.localizedDescription ?? "\(error)"
        let lead = "the response from \(url) was cut off: "
        if cause.hasPrefix(lead) {
            cause.removeFirst(lead.count)
            if let tail = cause.range(of: "; it is incomplete") { cause.removeSubrange(tail.lowerBound...) }
        }
        // Nothing that came is nothing kept, whatever an earlier run left incomplete.
        let kept =
            received > 0 && ((try? cache.entries(answering: options.request))?.contains { !$0.isComplete } ?? false)
        let next =
            kept
            ? "the \(received) bytes that came are kept as an incomplete response (RFC 9111 §3.3): the same "
                + "command asks the origin for the rest"
            : "nothing of it was stored; try again"
        return Failure(.failure, "the response from \(url) was cut off after \(received) bytes (\(cause)); \(next)")
    }

    /// The failure for `head` when it is no answer to print: the cache's own `504` because the
    /// origin could not be reached and what is stored may not be served stale (RFC 9111
    /// §4.2.4). `nil` for any other response, whatever its status. (A redirect loop fails the
    /// request itself: `URLError.httpTooManyRedirects`.)
    private func unanswered(_ head: CachedResponseHead) -> Failure? {
        let url = options.url.absoluteString
        if head.statusCode == 504, head.reasons.contains(.originUnreachable) {
            let target = Fetching.origin(of: options.url)
            let why = head.reasons.filter { $0 != .originUnreachable }.map(\.description).joined(separator: "; ")
            return Failure(
                .unreachable,
                "could not reach \(target), and the response stored for \(url) may not be served in its place: "
                    + "\(why); check that the server is running")
        }
        return nil
    }

    /// Fetches and writes the body.
    private func transfer(_ cache: HTTPCache, file: OutputFile?) async throws(Failure) -> Transfer {
        let clock = ContinuousClock()
        let started = clock.now
        let head: CachedResponseHead
        var chunks: ResponseBody.AsyncIterator
        do {
            let body: ResponseBody
            (head, body) = try await cache.bytes(for: options.request)
            chunks = body.makeAsyncIterator()
        } catch {
            throw Fetching.failure(error, url: options.url)
        }
        if let failure = unanswered(head) { throw failure }
        let first: Data?
        do {
            first = try await chunks.next()
        } catch {
            throw cutOff(after: 0, error, in: cache)
        }
        if include { Console.out(Report.head(head)) }
        let collectsText = json && file == nil
        var collected = Data()
        var received: Int64 = 0
        var progress = ProgressBar(
            total: head.expectedLength,
            enabled: Console.errorIsTerminal && (file != nil || json || !Console.outputIsTerminal))
        var suppressedBinary = false
        if let first, file == nil, !json, Console.outputIsTerminal, Report.looksBinary(first, head) {
            suppressedBinary = true
        }
        var next = first
        do {
            while let chunk = next {
                received += Int64(chunk.count)
                progress.advance(by: chunk.count)
                if let file {
                    try file.write(chunk)
                } else if collectsText {
                    if collected.count < Self.jsonBodyLimit { collected.append(chunk.prefix(Self.jsonBodyLimit)) }
                } else if !suppressedBinary {
                    Console.out(bytes: chunk)
                }
                next = try await chunks.next()
            }
        } catch let failure as Failure {
            progress.finish()
            throw failure
        } catch {
            progress.finish()
            throw cutOff(after: received, error, in: cache)
        }
        progress.finish()
        try file?.commit()
        if suppressedBinary {
            Console.error(
                "httpcache: the body is binary (\(Format.bytes(received))); not written to the terminal. "
                    + "Use -o FILE to save it.\n")
        }
        var text: String?
        if collectsText, collected.count < Self.jsonBodyLimit,
            Report.isTextual(head.fields[.contentType])
        {
            text = String(validating: collected, as: UTF8.self)
        }
        return Transfer(head: head, bodyBytes: received, text: text, elapsed: clock.now - started)
    }
}
