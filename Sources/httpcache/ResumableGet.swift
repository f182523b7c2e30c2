import CacheSemantics
import Foundation
import HTTPCacheCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache get -C -o FILE URL`: a download that resumes (``HTTPCache/download(_:to:retries:)``).
extension GetCommand {
    /// Checks that a request can be downloaded with `-C`.
    ///
    /// - Throws: ``Failure`` with ``ExitCode/usage`` without `-o FILE`, for another method than
    ///   `GET`, with a body, or with `Range` / `If-Range` fields of its own.
    static func checkResumable(_ options: RequestOptions, output: String?) throws(Failure) {
        guard output != nil else {
            throw .usage(name, "-C needs -o FILE (the download is kept in FILE.partial until it is complete)")
        }
        guard options.method.uppercased() == "GET", options.body == nil else {
            throw .usage(name, "-C downloads with GET; it cannot be combined with -X \(options.method) or -d")
        }
        if let field = options.fields.first(where: { ["range", "if-range"].contains($0.name.lowercased()) }) {
            throw .usage(name, "-C sets Range and If-Range itself; remove -H '\(field.name): \(field.value)'")
        }
    }

    /// Downloads to `path`, resuming `path.partial` when an earlier run left one. A symbolic
    /// link is followed (the download goes to the file it leads to; the link stays); a device,
    /// FIFO or directory is refused: the partial file could never be renamed over it.
    func runResumable(to path: String) async throws(Failure) {
        let destination = try OutputFile.followingLinks(path)
        var existing = stat()
        if stat(destination, &existing) == 0 && existing.st_mode & S_IFMT != S_IFREG {
            throw Failure(
                .failure,
                "cannot download \(path) with -C: it is not a regular file (a device, FIFO or directory); "
                    + "without -C a device or FIFO is written in place")
        }
        let cache = try cacheOptions.open(isShared: options.isShared)
        let clock = ContinuousClock()
        let started = clock.now
        let download = cache.download(options.request, to: URL(fileURLWithPath: destination))
        let showsBar = Console.errorIsTerminal
        let bar = Task {
            var bar = ProgressBar(total: nil, enabled: showsBar)
            for await step in download.progress {
                bar.update(received: step.receivedBytes, total: step.expectedBytes, bytesPerSecond: step.bytesPerSecond)
            }
            bar.finish()
        }
        let outcome: Result<DownloadResult, any Error>
        do {
            outcome = .success(try await download.result())
        } catch {
            outcome = .failure(error)
        }
        await bar.value
        await cache.waitForBackgroundWork()
        cache.flushToDisk()
        let fromOrigin =
            (try? outcome.get()).map { [.miss, .bypass].contains($0.outcome) ? $0.transferredBytes : 0 } ?? 0
        PersistentStatistics.add(cache.statistics, bytesFromOrigin: fromOrigin, in: cacheOptions.directory)
        let result: DownloadResult
        switch outcome {
        case .success(let value): result = value
        case .failure(let error): throw failure(error, output: destination)
        }
        if include { Console.out(Report.head(result.response)) }
        let transfer = Transfer(head: result.response, bodyBytes: result.totalBytes, elapsed: clock.now - started)
        if json { Console.out(transfer.json(file: path).text + "\n") }
        if verbose {
            Console.error(Report.verbose(result.response, method: options.method, elapsed: transfer.elapsed))
            Console.error(
                "httpcache: \(path): \(Format.bytes(result.totalBytes)), \(Format.bytes(result.transferredBytes)) "
                    + "received in this run; \(result.resumptions) resumed, \(result.restarts) restarted, "
                    + "\(result.attempts) requests\n")
        }
    }

    /// What a failed download means for the user: what happened and what to do.
    private func failure(_ error: any Error, output: String) -> Failure {
        let url = options.url.absoluteString
        guard let error = error as? DownloadError else { return Failure(.failure, "\(url): \(error)") }
        switch error.kind {
        case .invalidRequest:
            return .usage(Self.name, error.message)
        case .busy, .file, .unexpectedStatus, .digestMismatch:
            return Failure(.failure, error.message)
        case .interrupted:
            let next =
                error.keptBytes > 0
                ? "\(output).partial (\(Format.bytes(error.keptBytes))) is kept: run the same command again to resume"
                : "try again"
            if let urlError = error.underlying as? URLError,
                [.cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .timedOut]
                    .contains(urlError.code)
            {
                let target = Fetching.origin(of: options.url)
                return Failure(
                    .unreachable,
                    "could not reach \(target) (\(urlError.localizedDescription)); check the URL and that the server "
                        + "is running; \(next)")
            }
            let cause = error.underlying.map { ($0 as? URLError)?.localizedDescription ?? String(describing: $0) }
            return Failure(.failure, "the download of \(url) was cut off (\(cause ?? error.message)); \(next)")
        }
    }
}
