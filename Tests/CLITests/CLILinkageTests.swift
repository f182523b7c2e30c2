import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache` starts without FoundationNetworking: libcurl and what it loads (LDAP, Kerberos,
/// SSH, RTMP…) cost a short-lived process more than the work it does; and without libxml2 (with
/// ICU, liblzma and libstdc++ on Debian), which only parsing a page needs.
@Suite("httpcache's libraries")
struct CLILinkageTests {
    #if os(Linux)
    /// The libraries the dynamic loader reports loading (`LD_DEBUG=files`) while `httpcache`
    /// runs `arguments`.
    private static func loaded(_ h: CLIHarness, _ arguments: [String]) async throws -> (CLIRun, [Substring]) {
        var full = arguments
        full.insert(contentsOf: ["--cache-dir", h.cacheDirectory], at: 1)
        let run = try await CLIProcess.run(full, environment: ["LD_DEBUG": "files"], in: h.directory.path)
        let files = run.stderrLines.compactMap { line -> Substring? in
            guard let start = line.range(of: "file=") else { return nil }
            return line[start.upperBound...].prefix { $0 != " " && $0 != "\t" }
        }
        return (run, files)
    }

    @Test("A miss, a hit, ls, show, stats, pin and purge load neither FoundationNetworking, libcurl nor libxml2")
    func commandsLoadNoFoundationNetworking() async throws {
        let h = try CLIHarness()
        h.serve("/a", [("Cache-Control", "max-age=86400")], body: "linked")
        let url = h.url("/a")
        for arguments in [
            ["get", url], ["get", url], ["ls"], ["show", url], ["stats"], ["pin", url], ["unpin", url], ["purge", url],
        ] {
            let (run, files) = try await Self.loaded(h, arguments)
            #expect(run.status == 0, "\(arguments): \(run.stderr.suffix(400))")
            // LD_DEBUG is honoured: the C library is among what it reports.
            #expect(files.contains { $0.contains("libc.so") }, "\(arguments): LD_DEBUG reported nothing")
            let unwanted = files.filter {
                $0.contains("FoundationNetworking") || $0.contains("libcurl") || $0.contains("libxml2")
            }
            #expect(unwanted.isEmpty, "\(arguments) loaded \(unwanted)")
        }
        #expect(h.origin.count("/a") == 1)
    }

    @Test("save loads libxml2 when it parses the page")
    func saveLoadsLibXML2() async throws {
        let h = try CLIHarness()
        h.serve("/page", [("Content-Type", "text/html")], body: #"<img src="/image.png">"#)
        h.serve("/image.png", [("Content-Type", "image/png")], body: "png")
        let (run, files) = try await Self.loaded(h, ["save", h.url("/page")])
        #expect(run.status == 0, "\(run.stderr.suffix(400))")
        #expect(files.contains { $0.contains("libxml2") }, "loaded \(files)")
        #expect(h.origin.count("/image.png") == 1)
    }
    #endif
}
