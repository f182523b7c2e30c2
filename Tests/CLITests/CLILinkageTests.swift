import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache` starts without FoundationNetworking: libcurl and what it loads (LDAP, Kerberos,
/// SSH, RTMP…) cost a short-lived process more than the work it does; without libxml2 (with
/// ICU, liblzma and libstdc++ on Debian), which only parsing a page needs; and without OpenSSL,
/// which only TLS and an encrypted store need.
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

    @Test(
        "A miss, a hit, ls, show, stats, pin and purge load neither FoundationNetworking, libcurl, libxml2 nor OpenSSL")
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
                    || $0.contains("libssl") || $0.contains("libcrypto")
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

    @Test("An https get loads libssl, its hit neither; an encrypted store loads libcrypto alone")
    func openSSLWhenNeeded() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.localhost))
            defer { origin.stop() }
            origin.setDefault { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: "secure")
            }
            let h = try CLIHarness()
            let https = ["get", "--cacert", certificates.caFile, origin.url("/a").absoluteString]
            let (miss, missFiles) = try await Self.loaded(h, https)
            #expect(miss.status == 0 && miss.stdout == "secure", "\(miss.stderr.suffix(400))")
            #expect(missFiles.contains { $0.contains("libssl.so") }, "loaded \(missFiles)")
            // Without --cacert, whose file CacheTLS reads (with libcrypto) as the transport is made.
            let (hit, hitFiles) = try await Self.loaded(h, ["get", origin.url("/a").absoluteString])
            #expect(hit.status == 0 && hit.stdout == "secure", "\(hit.stderr.suffix(400))")
            #expect(!hitFiles.contains { $0.contains("libssl") || $0.contains("libcrypto") }, "loaded \(hitFiles)")
            #expect(origin.requests.count == 1)

            let encrypted = try CLIHarness()
            encrypted.serve("/e", [("Cache-Control", "max-age=600")], body: "sealed")
            let key = Self.keyFile(encrypted)
            for _ in 0..<2 {
                let (run, files) = try await Self.loaded(
                    encrypted, ["get", "--encryption-key-file", key, encrypted.url("/e")])
                #expect(run.status == 0 && run.stdout == "sealed", "\(run.stderr.suffix(400))")
                #expect(files.contains { $0.contains("libcrypto.so") }, "loaded \(files)")
                #expect(!files.contains { $0.contains("libssl") }, "loaded \(files)")
            }
            #expect(encrypted.origin.count("/e") == 1)
        }
    }

    /// A key file (64 hex digits) in `h`'s directory, for `--encryption-key-file`.
    private static func keyFile(_ h: CLIHarness) -> String {
        let path = h.directory.path + "/key"
        let bytes = Data(String(repeating: "ab", count: 32).utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: bytes, attributes: [.posixPermissions: 0o600]))
        return path
    }

    /// Runs `httpcache arguments` in a mount namespace of its own where `library` (every path
    /// the loader's cache lists for it) is an empty file, as on a machine where it is missing or
    /// broken: `unshare --mount`, root's (or a user namespace's) privilege.
    private static func without(_ library: String, _ h: CLIHarness, _ arguments: [String]) async throws -> CLIRun {
        var full = arguments
        full.insert(contentsOf: ["--cache-dir", h.cacheDirectory], at: 1)
        let script = """
            for file in $(ldconfig -p | awk -v name=\(library) '$1 == name { print $NF }'); do
                mount --bind /dev/null "$file" || exit 90
            done
            exec "$@"
            """
        return try await CLIProcess.run(
            executable: "/usr/bin/unshare",
            ["--mount", "--", "/bin/sh", "-c", script, "sh", try BuiltExecutable.path("httpcache")] + full,
            in: h.directory.path)
    }

    /// Whether this process may make a mount namespace (root, in a container that allows it).
    static let canMaskLibraries: Bool = {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = ["--mount", "--", "/bin/true"]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    @Test(
        "Without a loadable libssl or libcrypto: plain gets and hits work; an https get and an encrypted store fail in one line saying what to install",
        .enabled(if: canMaskLibraries, "needs `unshare --mount` (root or user namespaces)"))
    func missingOpenSSL() async throws {
        let h = try CLIHarness()
        h.serve("/a", [("Cache-Control", "max-age=600")], body: "plain")
        for _ in 0..<2 {
            let run = try await Self.without("libcrypto.so.3", h, ["get", h.url("/a")])
            #expect(run.status == 0 && run.stdout == "plain", "\(run.stderr)")
        }
        #expect(h.origin.count("/a") == 1)

        let https = try await Self.without("libssl.so.3", h, ["get", "https://127.0.0.1:\(h.origin.port)/b"])
        #expect(https.status == 7, "as for any origin that cannot be reached")
        #expect(https.stderrLines.count == 1, "\(https.stderr)")
        #expect(
            https.stderr.contains("libssl.so.3") && https.stderr.contains("apt-get install libssl3"), "\(https.stderr)")

        let sealed = try CLIHarness()
        sealed.serve("/a", [("Cache-Control", "max-age=600")], body: "plain")
        let encrypted = try await Self.without(
            "libcrypto.so.3", sealed, ["get", "--encryption-key-file", Self.keyFile(sealed), sealed.url("/a")])
        #expect(encrypted.status == 1)
        #expect(encrypted.stderrLines.count == 1, "\(encrypted.stderr)")
        #expect(
            encrypted.stderr.contains("libcrypto.so.3") && encrypted.stderr.contains("apt-get install libssl3"),
            "\(encrypted.stderr)")
        #expect(h.origin.requests.count == 1 && sealed.origin.requests.isEmpty, "nothing is fetched without OpenSSL")
    }
    #endif
}
