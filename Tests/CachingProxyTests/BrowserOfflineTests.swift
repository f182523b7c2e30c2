#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// A saved page read offline by a real browser: headless Chromium, whose every request goes
/// through `httpcache serve --forward`, loads a page of ``SampleSite`` online; the article is
/// saved with `httpcache save` into the proxy's store; the site's origins stop; and Chromium,
/// with a fresh profile (nothing in its own cache), loads the page again.
///
/// What is checked, and why each check can fail:
/// - the offline screenshot matches the online one within a small bound
///   (``ScreenshotComparison``): a resource missing offline (a stylesheet, an image, the
///   frame) changes the rendering, and a page not served from the pack renders as the proxy's
///   error text, which a control load shows the comparison rejects;
/// - the online screenshot is not trivially comparable: many colours, and at least an image's
///   worth of pixels other than the background (the site's images are coloured squares);
/// - every request Chromium made to the site's origins offline was answered from the pack
///   (`Cache-Status` `detail=saved-offline`, the saved status: 200, the saved redirect's
///   302, or 206 for a media element's `Range` request); the only exception is what the
///   origin itself had nothing for (a 404 online);
/// - every resource the browser needs to render the page was requested offline and is in the
///   pack, and everything Chromium loaded online it loaded offline too;
/// - nothing left the machine: Chromium's only TCP connections went to the proxy, it sent no
///   UDP datagram, and each of its own background requests (update, time and account
///   services) was refused by the proxy with 403, which `--allow-destination 127.0.0.1`
///   decides before any name lookup or connection (the proxy's log names each refusal).
///
/// What Chromium asked for and what the proxy answered is read from Chromium's own network log
/// (`--log-net-log`): each request line it sent to the proxy and the response head the proxy
/// returned, `Cache-Status` included. The proxy's access log (`--access-log`) must tell the
/// same story: a line per request of the offline load, each answered from the pack.
@Suite("A real browser reads a saved page offline (headless Chromium through httpcache serve --forward)", .serialized)
struct BrowserOfflineTests {
    /// The largest share of pixels that may differ between the online and offline screenshots:
    /// 0.1 %, 720 of the 800×900, a fifth of one of the site's 60×60 images, so that one image
    /// missing offline fails the comparison (the same page rendered twice differs by none).
    static let bound = 0.001

    /// Pixels of the online screenshot that must differ from its background colour: one of the
    /// site's 60×60 images, so a blank or nearly blank page cannot be what is compared.
    static let leastContent = 3600

    /// Resources of the article a browser loads to render it (Chromium at a device scale
    /// factor of 1): the document, its stylesheets (`css/base.css` by `@import` from
    /// `css/main.css`), the images it shows (the redirect and its target, backgrounds, the
    /// `<picture>`'s 1x source, the frame's documents and image, the video's poster, `<object>`
    /// and `<embed>`), and the preloaded font (the `@font-face` font is used by no element, so
    /// no browser fetches it). Not here: what a browser does not fetch to render (other
    /// densities' `srcset` candidates, media bodies, a print stylesheet's rules).
    static let renderedArticleResources = [
        "/site/article.html", "/site/css/main.css", "/site/css/base.css", "/site/css/from-style.css",
        "/site/fonts/preload.woff2", "/site/img/banner.svg", "/site/img/body.svg", "/site/img/a.svg",
        "/site/img/p.svg", "/site/img/absolute.svg", "/site/img/scheme-relative.svg", "/site/img/redirect.svg",
        "/site/img/redirected.svg", "/site/img/spaces.svg", "/site/frame.html", "/site/inner.html",
        "/site/img/inner.svg", "/site/img/poster.svg", "/site/media/diagram.svg", "/site/media/embedded.svg",
        "/site/img/button.svg",
    ]

    @Test(
        "The saved article (third-party image included) renders offline as online, every request answered from the pack"
    )
    func articleOffline() async throws {
        try await offPool {
            let started = Date()
            let work = TemporaryDirectory("browser-offline")
            let browser = try HeadlessChromium(directory: work.path)
            _ = try ScreenshotComparison.python()  // Pillow is there, before anything is started.
            let site = try SampleSite(manyImages: 1)
            defer {
                site.origin.stop()
                site.thirdParty.stop()
            }
            let accessLog = work.path + "/access.log"
            let proxy = try ServeProcess(
                ["--forward", "--allow-destination", "127.0.0.1", "--access-log", accessLog])
            defer { proxy.terminate() }
            let store = try #require(proxy.cacheDirectory)
            let sitePorts: Set<UInt16> = [site.origin.port, site.thirdParty.port]
            let thirdPartyImage = site.thirdParty.baseURL + "/third-party.svg"

            let online = try browser.load(site.article, through: proxy, name: "article-online")
            let saving = try PackTool.save(site.article, store: store, options: ["--third-party"])
            try #require(saving.status == 0, "httpcache save failed: \(saving.output)")
            let pack = try PackTool.pack(of: site.article, store: store)
            site.origin.stop()
            site.thirdParty.stop()
            let loggedOnline = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n").count
            let offline = try browser.load(site.article, through: proxy, name: "article-offline")

            Self.expectRendersAsOnline(online: online, offline: offline)
            let document = offline.exchanges(on: sitePorts).first { $0.target == site.article.absoluteString }
            #expect(
                document?.status == 200 && document?.cacheStatus?.contains("detail=saved-offline") == true,
                "the article itself was not served from the pack offline:\n\(offline.listing)")
            let rendered = Self.renderedArticleResources.map(site.url) + [thirdPartyImage]
            Self.expectAnsweredFromPack(
                offline: offline, online: online, pack: pack, ports: sitePorts, rendered: rendered)
            Self.expectNothingLeft(online, offline, proxy: proxy)
            Self.expectAccessLog(accessLog, after: loggedOnline, matches: offline, ports: sitePorts)
            print("article offline: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        }
    }

    @Test("Saved with --depth 1, the page the article links to renders offline as online")
    func linkedPageOffline() async throws {
        try await offPool {
            let started = Date()
            let work = TemporaryDirectory("browser-offline")
            let browser = try HeadlessChromium(directory: work.path)
            _ = try ScreenshotComparison.python()  // Pillow is there, before anything is started.
            let site = try SampleSite(manyImages: 1)
            defer {
                site.origin.stop()
                site.thirdParty.stop()
            }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { proxy.terminate() }
            let store = try #require(proxy.cacheDirectory)
            let sitePorts: Set<UInt16> = [site.origin.port, site.thirdParty.port]
            let page2 = site.origin.url("/site/page2.html")

            let online = try browser.load(page2, through: proxy, name: "page2-online")
            let saving = try PackTool.save(site.article, store: store, options: ["--depth", "1"])
            try #require(saving.status == 0, "httpcache save failed: \(saving.output)")
            let pack = try PackTool.pack(of: site.article, store: store)
            site.origin.stop()
            site.thirdParty.stop()
            let offline = try browser.load(page2, through: proxy, name: "page2-offline")

            Self.expectRendersAsOnline(online: online, offline: offline)
            let document = offline.exchanges(on: sitePorts).first { $0.target == page2.absoluteString }
            #expect(
                document?.status == 200 && document?.cacheStatus?.contains("detail=saved-offline") == true,
                "the linked page was not served from the pack offline:\n\(offline.listing)")
            Self.expectAnsweredFromPack(
                offline: offline, online: online, pack: pack, ports: sitePorts,
                rendered: ["/site/page2.html", "/site/img/page2.svg"].map(site.url))

            // The control: a page of the site the pack does not hold renders as the proxy's
            // error, which the comparison tells from the page; so a saved page not served from
            // the pack would fail the comparison above.
            let unsaved = site.origin.url("/site/latin1.html")
            let control = try browser.load(unsaved, through: proxy, name: "unsaved-offline")
            let answer = control.exchanges(on: sitePorts).first { $0.target == unsaved.absoluteString }
            #expect(
                answer?.status.map { $0 >= 500 } == true,
                "a page not in the pack was answered offline:\n\(control.listing)")
            let difference = try ScreenshotComparison(online.screenshot, control.screenshot)
            #expect(
                !difference.sameSize || difference.differingShare > Self.bound,
                "the comparison does not tell the proxy's error page from the saved page: \(difference)")
            print("control (the proxy's error page against the page online): \(difference)")
            Self.expectNothingLeft(online, offline, control, proxy: proxy)
            print("linked page offline: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        }
    }

    // MARK: Checks

    /// The offline screenshot matches the online one, which is varied enough for that to mean
    /// something.
    private static func expectRendersAsOnline(
        online: BrowserLoad, offline: BrowserLoad, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            let comparison = try ScreenshotComparison(online.screenshot, offline.screenshot)
            print("\(online.url.path) online (\(seconds(online))) against offline (\(seconds(offline))): \(comparison)")
            #expect(
                comparison.colours >= 8 && comparison.content >= leastContent,
                "the online screenshot of \(online.url) is nearly blank: \(comparison)", sourceLocation: sourceLocation)
            #expect(comparison.sameSize, "\(comparison)", sourceLocation: sourceLocation)
            #expect(
                comparison.differingShare < bound,
                """
                \(offline.url) offline does not look as it did online: \(comparison)
                online:\n\(online.listing)\noffline:\n\(offline.listing)
                """, sourceLocation: sourceLocation)
        } catch {
            Issue.record(error, sourceLocation: sourceLocation)
        }
    }

    /// The proxy's access log, from line `after` on (the offline load), has a line for each
    /// request Chromium made to the site's origins, with the status Chromium received and the
    /// same `Cache-Status`: what an operator reads shows the page answered from the pack.
    private static func expectAccessLog(
        _ path: String, after: Int, matches load: BrowserLoad, ports: Set<UInt16>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let lines = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").dropFirst(after)
        // TIME CLIENT METHOD TARGET PROTOCOL STATUS "CACHE-STATUS"
        var logged: [String: [(status: Int, cacheStatus: String)]] = [:]
        for line in lines {
            let words = line.split(separator: " ", maxSplits: 6).map(String.init)
            guard words.count == 7, let status = Int(words[5]) else { continue }
            logged[words[3], default: []].append(
                (status, words[6].trimmingCharacters(in: CharacterSet(charactersIn: "\""))))
        }
        for exchange in load.exchanges(on: ports) {
            let entries = logged[exchange.target] ?? []
            #expect(
                entries.contains { $0.status == exchange.status && $0.cacheStatus == exchange.cacheStatus ?? "-" },
                "the proxy's access log has no line \(exchange.target) \(exchange.status ?? 0) for what Chromium received: \(entries)",
                sourceLocation: sourceLocation)
        }
        let fromPack = lines.filter { $0.contains("detail=saved-offline") }.count
        #expect(
            fromPack >= renderedArticleResources.count, "only \(fromPack) lines answered from the pack",
            sourceLocation: sourceLocation)
    }

    /// Every request of the offline load to the site's origins (`ports`) was answered from
    /// `pack` with its saved status, except for what the origin had nothing for online; every
    /// URL of `rendered` is in the pack and was requested; and
    /// what was loaded online was loaded offline too.
    private static func expectAnsweredFromPack(
        offline: BrowserLoad, online: BrowserLoad, pack: PackTool.Pack, ports: Set<UInt16>, rendered: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let requested = offline.exchanges(on: ports)
        var problems: [String] = []
        for exchange in requested {
            guard let status = exchange.status else {
                problems.append("\(exchange): no response")
                continue
            }
            let fromPack = exchange.cacheStatus?.contains("detail=saved-offline") == true
            if let item = pack.item(exchange.target) {
                var expected = [item.status]
                // A media element asks for a range; the pack's 200 answers it with a 206.
                if item.status == 200, exchange.requestField("Range") != nil { expected.append(206) }
                if !fromPack || !expected.contains(status) {
                    problems.append("\(exchange): saved with status \(item.status), not answered from the pack")
                }
                continue
            }
            let onlineStatus = online.exchanges(on: ports).first { $0.target == exchange.target }?.status
            if let onlineStatus, onlineStatus >= 400, status >= 400 {
                continue  // The origin had nothing for it online either (a 404): nothing to save.
            }
            // Chromium asks for /favicon.ico by itself, after the page, when it has time: the
            // page never named it, so saving the page does not save it, and whether the online
            // load got to ask for it first is a matter of timing.
            if URL(string: exchange.target)?.path == "/favicon.ico", status >= 400 { continue }
            problems.append("\(exchange): not in the pack")
        }
        let targets = Set(requested.map(\.target))
        for url in rendered where pack.item(url) == nil {
            problems.append("\(url) is needed to render the page but not in the pack")
        }
        for url in rendered where !targets.contains(url) {
            problems.append("\(url) is needed to render the page but was not requested offline")
        }
        // The page's icons (`<link rel="icon">`) too are fetched when Chromium has time, after
        // the page has loaded: one load may ask for them and the next not.
        let icons: Set<String> = ["/favicon.ico", "/favicon.svg"]
        for exchange in online.exchanges(on: ports)
        where exchange.status.map({ $0 < 400 }) == true && !targets.contains(exchange.target)
            && !icons.contains(URL(string: exchange.target)?.path ?? "")
        {
            problems.append("\(exchange.target) was loaded online but not offline")
        }
        #expect(
            problems.isEmpty,
            """
            \(problems.joined(separator: "\n"))
            Chromium requested offline:\n\(offline.listing)
            The pack holds: \(pack.items.map(\.url).joined(separator: " "))
            """, sourceLocation: sourceLocation)
    }

    /// Nothing Chromium did reached beyond 127.0.0.1: its TCP connections all went to the
    /// proxy, it sent no UDP datagram (the one UDP socket it connects is its IPv6
    /// reachability probe, which sends nothing), and every request for another host got the
    /// proxy's 403, the refusals in the proxy's log (one line a second, the next counting those
    /// held back).
    private static func expectNothingLeft(
        _ loads: BrowserLoad..., proxy: ServeProcess, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let log = proxy.standardError
        for load in loads {
            let elsewhere = load.connections.filter { $0 != "127.0.0.1:\(proxy.port)" }
            #expect(
                elsewhere.isEmpty, "Chromium connected to \(elsewhere) loading \(load.url)",
                sourceLocation: sourceLocation)
            #expect(
                load.datagramsSent == 0, "Chromium sent UDP datagrams loading \(load.url)",
                sourceLocation: sourceLocation)
            for exchange in load.exchanges where exchange.host != "127.0.0.1" {
                #expect(
                    (exchange.status == 403 || exchange.status == nil) && log.contains("refused a request for "),
                    "\(exchange) was not refused by the proxy:\n\(log)", sourceLocation: sourceLocation)
            }
        }
        let refusals = log.split(separator: "\n").filter { $0.contains("refused a request for 127.0.0.1") }
        #expect(refusals.isEmpty, "the proxy refused the site: \(refusals)", sourceLocation: sourceLocation)
    }

    private static func seconds(_ load: BrowserLoad) -> String { String(format: "%.1f s", load.seconds) }
}

// MARK: - Headless Chromium

/// Runs `chromium --headless` for one page load through a proxy, with a fresh profile each
/// time (its HTTP cache is in the profile: a second load cannot be answered by the browser
/// itself), and reads back the screenshot and the network log. `HTTPCACHE_KEEP_SCREENSHOTS`
/// names a directory to copy the screenshots to, for looking at them.
private struct HeadlessChromium {
    /// Where profiles, screenshots and logs go (a test's temporary directory).
    let directory: String
    let executable: String

    /// Finds Chromium; fails, saying how to install it, when it is missing (the suite is not
    /// skipped: CI installs it with `scripts/setup --tests`).
    init(directory: String) throws {
        self.directory = directory
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates =
            ["/usr/bin/chromium"]
            + path.split(separator: ":").flatMap { ["\($0)/chromium", "\($0)/chromium-browser"] }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BrowserTestFailure(
                "Chromium is not installed (looked for chromium in /usr/bin and $PATH): run scripts/setup --tests")
        }
        executable = found
    }

    /// The arguments for loading `url` through the proxy on `proxyPort` into `screenshot`,
    /// with `profile` as the user data directory and the network log in `netLog`.
    static func arguments(
        url: URL, proxyPort: UInt16, profile: String, screenshot: String, netLog: String
    ) -> [String] {
        [
            "--headless",
            // Chromium refuses to run as root with its sandbox (CI and containers run as root).
            "--no-sandbox",
            "--disable-gpu", "--hide-scrollbars", "--window-size=800,900",
            // srcset and image-set choices depend on it: the 1x candidates are the ones loaded.
            "--force-device-scale-factor=1",
            "--user-data-dir=\(profile)",
            "--proxy-server=http://127.0.0.1:\(proxyPort)",
            // Without it Chromium sends loopback URLs directly, bypassing the proxy.
            "--proxy-bypass-list=<-loopback>",
            // Fewer of Chromium's own requests (what is left is refused by the proxy with 403).
            "--disable-background-networking", "--disable-component-update", "--no-first-run",
            "--disable-sync", "--disable-extensions",
            // Belt and braces: no name is ever looked up by Chromium itself.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--log-net-log=\(netLog)",
            // The screenshot is taken once 5 s of virtual time have passed, and virtual time
            // stands still while anything is loading: every load has finished, every timer run.
            // Costs nothing measurable (time is fast-forwarded when the page is idle).
            "--virtual-time-budget=5000",
            "--screenshot=\(screenshot)",
            url.absoluteString,
        ]
    }

    /// Loads `url` through `proxy` with a fresh profile; `name` names its files.
    func load(_ url: URL, through proxy: ServeProcess, name: String) throws -> BrowserLoad {
        let base = directory + "/" + name
        let profile = base + "-profile"
        let screenshot = base + ".png"
        let netLog = base + "-netlog.json"
        let output = base + "-chromium.log"
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Self.arguments(
            url: url, proxyPort: proxy.port, profile: profile, screenshot: screenshot, netLog: netLog)
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        // Nothing of the user's: caches, NSS databases and crash reports go under the profile.
        environment["HOME"] = profile
        environment["XDG_CONFIG_HOME"] = profile + "/config"
        environment["XDG_CACHE_HOME"] = profile + "/cache"
        process.environment = environment
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        defer { try? log.close() }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        let started = Date()
        try process.run()
        let deadline = started.addingTimeInterval(60)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning {
            // ChildProcess starts it in a process group of its own: its renderers and zygotes go too.
            kill(-process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw BrowserTestFailure("Chromium did not finish loading \(url) in 60 s: \(Self.tail(output))")
        }
        let seconds = Date().timeIntervalSince(started)
        guard process.terminationStatus == 0 else {
            throw BrowserTestFailure(
                "Chromium exited with status \(process.terminationStatus) loading \(url): \(Self.tail(output))")
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: screenshot),
            (attributes[.size] as? Int ?? 0) > 0
        else {
            throw BrowserTestFailure("Chromium wrote no screenshot of \(url): \(Self.tail(output))")
        }
        if let keep = ProcessInfo.processInfo.environment["HTTPCACHE_KEEP_SCREENSHOTS"], !keep.isEmpty {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: keep + "/" + name + ".png")
            try? FileManager.default.copyItem(atPath: screenshot, toPath: keep + "/" + name + ".png")
        }
        let network = try NetLog(path: netLog)
        return BrowserLoad(
            url: url, screenshot: screenshot, exchanges: network.exchanges, connections: network.connections,
            datagramsSent: network.datagramsSent, seconds: seconds)
    }

    /// The last lines Chromium wrote.
    static func tail(_ path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(15).joined(separator: "\n")
    }
}

/// A page load: the screenshot, every request Chromium sent the proxy, and where it connected.
private struct BrowserLoad {
    let url: URL
    let screenshot: String
    let exchanges: [ProxiedExchange]
    /// The address of every TCP connection Chromium opened.
    let connections: [String]
    /// UDP datagrams Chromium sent.
    let datagramsSent: Int
    /// How long Chromium ran.
    let seconds: Double

    /// The requests for a URL on 127.0.0.1 at one of `ports`.
    func exchanges(on ports: Set<UInt16>) -> [ProxiedExchange] {
        exchanges.filter { $0.host == "127.0.0.1" && $0.port.map(ports.contains) == true }
    }

    /// The exchanges, one a line, for failure messages.
    var listing: String { exchanges.map { "  \($0)" }.joined(separator: "\n") }
}

/// One request Chromium sent to the proxy, and the response head it read, as its network
/// log recorded them.
private struct ProxiedExchange: CustomStringConvertible {
    /// `GET`, `CONNECT`…
    let method: String
    /// The request target: an absolute URL, or `host:port` for `CONNECT`.
    let target: String
    let requestFields: [String]
    /// The response status; `nil` when no response head was read.
    let status: Int?
    let responseFields: [String]

    /// The destination host.
    var host: String? {
        if method == "CONNECT" { return target.split(separator: ":").dropLast().joined(separator: ":") }
        return URL(string: target)?.host
    }

    /// The destination port.
    var port: UInt16? {
        if method == "CONNECT" { return target.split(separator: ":").last.flatMap { UInt16($0) } }
        guard let url = URL(string: target) else { return nil }
        return url.port.map(UInt16.init) ?? (url.scheme == "https" ? 443 : 80)
    }

    /// `host[:port]` as the request names it (what the proxy's log names in a refusal).
    var authority: String {
        if method == "CONNECT" { return target }
        guard let url = URLComponents(string: target), let host = url.host else { return target }
        return host + (url.port.map { ":\($0)" } ?? "")
    }

    /// The target's path (with query), for comparing with the site's paths.
    var path: String {
        guard let url = URLComponents(string: target) else { return target }
        return url.percentEncodedPath + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// The proxy's `Cache-Status`.
    var cacheStatus: String? { responseField("Cache-Status") }

    func requestField(_ name: String) -> String? { Self.field(name, in: requestFields) }
    func responseField(_ name: String) -> String? { Self.field(name, in: responseFields) }

    static func field(_ name: String, in fields: [String]) -> String? {
        let prefix = name.lowercased() + ":"
        return fields.first { $0.lowercased().hasPrefix(prefix) }.map {
            $0.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
        }
    }

    var description: String {
        let answer = status.map { "\($0)" } ?? "no response"
        return "\(method) \(target) -> \(answer)" + (cacheStatus.map { " [\($0)]" } ?? "")
    }
}

/// Chromium's network log (`--log-net-log`, JSON): the request lines and response heads of
/// every HTTP transaction, which through a proxy are exactly what the proxy received and sent,
/// and the sockets Chromium connected.
private struct NetLog {
    /// The requests, in the order they were sent.
    let exchanges: [ProxiedExchange]
    /// Every TCP connection attempt's address.
    let connections: [String]
    /// UDP datagrams sent.
    let datagramsSent: Int

    private struct File: Decodable {
        struct Constants: Decodable { let logEventTypes: [String: Int] }
        struct Source: Decodable { let id: Int }
        struct Parameters: Decodable {
            let line: String?
            let headers: [String]?
            let address: String?
            enum CodingKeys: String, CodingKey { case line, headers, address }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                line = try? container.decode(String.self, forKey: .line)
                headers = try? container.decode([String].self, forKey: .headers)
                address = try? container.decode(String.self, forKey: .address)
            }
        }
        struct Event: Decodable {
            let type: Int
            let source: Source
            let params: Parameters?
            enum CodingKeys: String, CodingKey { case type, source, params }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                type = try container.decode(Int.self, forKey: .type)
                source = try container.decode(Source.self, forKey: .source)
                params = try? container.decode(Parameters.self, forKey: .params)
            }
        }
        let constants: Constants
        let events: [Event]
    }

    /// Reads the log at `path`.
    init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BrowserTestFailure("Chromium wrote no network log at \(path)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw BrowserTestFailure("Chromium's network log \(path) cannot be read: \(error)")
        }
        let types = file.constants.logEventTypes
        func codes(_ names: String...) -> Set<Int> { Set(names.compactMap { types[$0] }) }
        let sends = codes("HTTP_TRANSACTION_SEND_REQUEST_HEADERS", "HTTP_TRANSACTION_SEND_TUNNEL_HEADERS")
        let reads = codes("HTTP_TRANSACTION_READ_RESPONSE_HEADERS", "HTTP_TRANSACTION_READ_TUNNEL_RESPONSE_HEADERS")
        let connects = codes("TCP_CONNECT_ATTEMPT")
        let datagrams = codes("UDP_BYTES_SENT")
        // Per source (a URL request, or a CONNECT's stream), the request sent and not yet
        // answered; a tunnel's request is logged twice, once as each type.
        var pending: [Int: (index: Int, line: String, fields: [String])] = [:]
        var exchanges: [ProxiedExchange] = []
        var connections: [String] = []
        var datagramsSent = 0
        for event in file.events {
            if sends.contains(event.type), let line = event.params?.line {
                if let open = pending[event.source.id], open.line == line { continue }
                let fields = event.params?.headers ?? []
                pending[event.source.id] = (exchanges.count, line, fields)
                exchanges.append(Self.exchange(line: line, fields: fields, response: nil))
            } else if reads.contains(event.type), let open = pending.removeValue(forKey: event.source.id) {
                exchanges[open.index] = Self.exchange(
                    line: open.line, fields: open.fields, response: event.params?.headers ?? [])
            } else if connects.contains(event.type), let address = event.params?.address {
                connections.append(address)
            } else if datagrams.contains(event.type) {
                datagramsSent += 1
            }
        }
        self.exchanges = exchanges
        self.connections = connections
        self.datagramsSent = datagramsSent
    }

    /// An exchange from a request line (`GET http://… HTTP/1.1`) and fields, and the response
    /// head's lines (`nil`: none was read).
    private static func exchange(line: String, fields: [String], response: [String]?) -> ProxiedExchange {
        let words = line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        let status = response?.first.flatMap { head in
            head.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
        return ProxiedExchange(
            method: words.first.map(String.init) ?? "", target: words.dropFirst().first.map(String.init) ?? "",
            requestFields: fields, status: status, responseFields: Array((response ?? []).dropFirst()))
    }
}

// MARK: - Packs

/// `httpcache save` and `httpcache packs`, run on the proxy's store.
private enum PackTool {
    /// A pack as `httpcache packs show NAME --json` describes it.
    struct Pack: Decodable {
        struct Item: Decodable {
            let url: String
            let status: Int
        }
        struct Problem: Decodable {
            let url: String
            let reason: String
        }
        let name: String
        let page: String
        let items: [Item]
        let problems: [Problem]

        func item(_ url: String) -> Item? { items.first { $0.url == url } }
    }

    private struct Listed: Decodable {
        let name: String
        let page: String
    }

    /// Runs `httpcache ARGUMENTS`: its exit status and what it wrote.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        environment["no_proxy"] = "*"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// `httpcache save URL --cache-dir STORE OPTIONS`.
    static func save(_ url: URL, store: String, options: [String]) throws -> (status: Int32, output: String) {
        try run(["save", url.absoluteString, "--cache-dir", store] + options)
    }

    /// The pack whose page is `url`.
    static func pack(of url: URL, store: String) throws -> Pack {
        let listing = try run(["packs", "--json", "--cache-dir", store])
        let packs = try JSONDecoder().decode([Listed].self, from: Data(listing.output.utf8))
        let name = try #require(
            packs.first { $0.page == url.absoluteString }?.name, "no pack of \(url) in \(listing.output)")
        let shown = try run(["packs", "show", name, "--json", "--cache-dir", store])
        return try JSONDecoder().decode(Pack.self, from: Data(shown.output.utf8))
    }
}

// MARK: - Screenshots

/// Two screenshots compared with Pillow (the checkers' Python environment): their sizes, how
/// many pixels differ by more than 16 in some channel, and how varied the first one is.
private struct ScreenshotComparison: CustomStringConvertible {
    let firstSize: [Int]
    let secondSize: [Int]
    let differing: Int
    /// Distinct colours in the first screenshot.
    let colours: Int
    /// The first screenshot's pixels that are not its most common colour (the background).
    let content: Int

    var sameSize: Bool { firstSize == secondSize }
    var pixels: Int { firstSize.reduce(1, *) }
    /// The share of pixels that differ.
    var differingShare: Double { Double(differing) / Double(max(pixels, 1)) }

    var description: String {
        let percent = String(format: "%.3f%%", differingShare * 100)
        return "\(differing) of \(pixels) pixels differ (\(percent)); \(firstSize) and \(secondSize); "
            + "the first has \(colours) colours and \(content) pixels not of the background's"
    }

    private static let script = """
        import sys
        from PIL import Image, ImageChops
        a = Image.open(sys.argv[1]).convert('RGB')
        b = Image.open(sys.argv[2]).convert('RGB')
        colours = a.getcolors(1 << 24)
        dominant = max(count for count, _ in colours)
        differing = -1
        if a.size == b.size:
            r, g, bl = ImageChops.difference(a, b).split()
            largest = ImageChops.lighter(ImageChops.lighter(r, g), bl)
            differing = sum(largest.histogram()[17:])
        print(a.size[0], a.size[1], b.size[0], b.size[1], differing, len(colours), dominant)
        """

    /// The Python of the checkers' environment `scripts/setup --tests` makes in
    /// `.build/checkers` at the repository root (found from this file's path), or of the one
    /// `HTTPCACHE_CHECKERS` names.
    static func python() throws -> String {
        var checkers = ProcessInfo.processInfo.environment["HTTPCACHE_CHECKERS"] ?? ""
        if checkers.isEmpty {
            let root = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent()  // CachingProxyTests
                .deletingLastPathComponent()  // Tests
                .deletingLastPathComponent()  // the repository
            checkers = root.appendingPathComponent(".build/checkers").path
        }
        let python = checkers + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw BrowserTestFailure("no Python environment with Pillow at \(python): run scripts/setup --tests")
        }
        return python
    }

    /// Compares the PNGs at `first` and `second`.
    init(_ first: String, _ second: String) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try Self.python())
        process.arguments = ["-c", Self.script, first, second]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard process.terminationStatus == 0, numbers.count == 7 else {
            throw BrowserTestFailure(
                "comparing \(first) and \(second) with Pillow failed (run scripts/setup --tests?): \(text)")
        }
        firstSize = Array(numbers[0..<2])
        secondSize = Array(numbers[2..<4])
        differing = numbers[4]
        colours = numbers[5]
        content = numbers[0] * numbers[1] - numbers[6]
    }
}

/// A test could not run what it checks with (Chromium, Pillow), or what it ran failed.
private struct BrowserTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
#endif
