import CacheSystem
import Foundation
import LoopbackOrigin

/// A small web site on a loopback origin, for saving pages for offline reading: an article
/// whose HTML uses every construct a browser loads subresources from, stylesheets with an
/// `@import` chain (a cycle included), fonts, a redirecting image, a missing image, a large
/// file, a frame, a linked page, a Latin-1 page, malformed HTML, and a page of many images.
///
/// Every resource has an `ETag` (`"v1"`, then `"v2"`… after ``change(_:)``) and answers a
/// matching `If-None-Match` with 304; `Cache-Control: no-cache` makes every online use a
/// revalidation, so a saved page is served offline only because it is saved.
public final class SampleSite: Sendable {
    /// The site's origin.
    public let origin: LoopbackOrigin
    /// Another origin the article refers to (a third party).
    public let thirdParty: LoopbackOrigin
    /// An origin on another loopback address, 127.0.0.2, that `/site/redirects.html` reaches
    /// only through redirects, and `/site/resolution.html` only when its URLs are misread.
    public let elsewhere: LoopbackOrigin
    /// Images on `/many.html`.
    public let manyImages: Int
    private let versions = Locked([String: Int]())
    private let delays = Locked([String: Double]())
    /// `/site/big.bin`'s length.
    public static let bigLength = 300_000

    /// Starts both origins.
    public init(manyImages: Int = 10_000) throws {
        origin = try LoopbackOrigin()
        thirdParty = try LoopbackOrigin()
        elsewhere = try LoopbackOrigin(host: "127.0.0.2")
        self.manyImages = manyImages
        install()
        installRedirects()
        installResolution()
    }

    deinit {
        origin.stop()
        thirdParty.stop()
        elsewhere.stop()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    public func url(_ path: String) -> String { origin.baseURL + path }

    /// Makes the resource at `path` change: a new body and `ETag`.
    public func change(_ path: String) {
        versions.withLock { $0[path, default: 1] += 1 }
    }

    /// Makes the resource at `path` answer after `seconds`.
    public func delay(_ path: String, seconds: Double) {
        delays.withLock { $0[path] = seconds }
    }

    /// The article: `/site/article.html`.
    public var article: URL { origin.url("/site/article.html") }

    /// The article's HTML (its `<base href>` is `/site/`).
    public var articleHTML: String {
        let port = origin.port
        let other = thirdParty.port
        return """
            <!DOCTYPE html>
            <html lang="en"><head>
            <meta charset="utf-8">
            <base href="/site/">
            <title>Saved for offline reading</title>
            <link rel="stylesheet" href="css/main.css">
            <link rel="alternate stylesheet" href="css/alternate.css" title="other">
            <link rel="canonical" href="canonical.html">
            <link rel="icon" href="/favicon.svg">
            <link rel="apple-touch-icon" href="touch.svg">
            <link rel="preload" href="fonts/preload.woff2" as="font" crossorigin>
            <link rel="modulepreload" href="js/module.js">
            <link rel="manifest" href="app.webmanifest">
            <script src="js/app.js"></script>
            <style>
            @import url("css/from-style.css");
            .banner { background-image: url('img/banner.svg'); height: 40px }
            </style>
            </head>
            <body style="background: #fff url(img/body.svg) no-repeat right top">
            <h1 class="title">Saved for offline reading</h1>
            <div class="banner"></div>
            <img src="img/a.svg#part" srcset="img/a-2x.svg 2x, img/a-3x.svg 3x" width="60" height="60" alt="a">
            <picture><source srcset="img/p.svg 1x, img/p-2x.svg 2x" type="image/svg+xml"><img src="img/p-fallback.svg" alt="p"></picture>
            <img src="http://127.0.0.1:\(port)/site/img/absolute.svg" width="60" height="60" alt="absolute">
            <img src="//127.0.0.1:\(port)/site/img/scheme-relative.svg" width="60" height="60" alt="scheme-relative">
            <img src="//127.0.0.1:\(other)/third-party.svg" width="60" height="60" alt="third party">
            <img src="img/redirect.svg" width="60" height="60" alt="redirected">
            <img src="img/missing.svg" width="60" height="60" alt="missing">
            <img src="  img/spaces.svg  " width="60" height="60" alt="spaces">
            <img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="inline">
            <a href="page2.html">next page</a> <a href="javascript:void(0)">script</a>
            <a href="mailto:someone@example.invalid">mail</a> <a href="#top">top</a>
            <a href="http://127.0.0.1:\(other)/elsewhere.html">elsewhere</a>
            <iframe src="frame.html" width="200" height="80"></iframe>
            <video src="media/clip.webm" poster="img/poster.svg" width="60" height="40"><source src="media/clip.mp4"><track src="media/captions.vtt" kind="captions"></video>
            <audio src="media/sound.ogg"></audio>
            <object data="media/diagram.svg" width="60" height="60"></object>
            <embed src="media/embedded.svg" width="60" height="60">
            <input type="image" src="img/button.svg" alt="go"> <input type="text" src="img/not-an-image.svg">
            <p><a href="big.bin">download</a></p>
            </body></html>
            """
    }

    /// The URLs saving the article stores (depth 0, no third party, no size limit).
    public var articleResources: [String] {
        [
            "/site/article.html", "/site/css/main.css", "/favicon.svg", "/site/touch.svg",
            "/site/fonts/preload.woff2", "/site/js/module.js", "/site/app.webmanifest", "/site/js/app.js",
            "/site/css/from-style.css", "/site/img/banner.svg", "/site/img/body.svg", "/site/img/a.svg",
            "/site/img/a-2x.svg", "/site/img/a-3x.svg", "/site/img/p.svg", "/site/img/p-2x.svg",
            "/site/img/p-fallback.svg", "/site/img/absolute.svg", "/site/img/scheme-relative.svg",
            "/site/img/redirect.svg", "/site/img/redirected.svg", "/site/img/spaces.svg", "/site/frame.html",
            "/site/media/clip.webm", "/site/img/poster.svg", "/site/media/clip.mp4", "/site/media/captions.vtt",
            "/site/media/sound.ogg", "/site/media/diagram.svg", "/site/media/embedded.svg", "/site/img/button.svg",
            // From the stylesheets: @import chain, fonts, backgrounds.
            "/site/css/base.css", "/site/css/print.css", "/site/fonts/body.woff2", "/site/fonts/body.woff",
            "/site/css/alternate.css", "/site/img/alternate.svg",
            "/site/img/background.svg", "/site/img/esc)aped.svg", "/site/img/from-base.svg", "/site/css/fs.svg",
            // From the frame: a frameset whose frame has an image.
            "/site/inner.html", "/site/img/inner.svg",
        ]
    }

    /// The article's resources from another origin or missing: third party (skipped) and 404.
    public var articleProblems: [String] {
        ["//127.0.0.1:\(thirdParty.port)/third-party.svg", "/site/img/missing.svg"]
    }

    private func install() {
        let svgs = [
            "/favicon.svg", "/site/touch.svg", "/site/img/banner.svg", "/site/img/body.svg", "/site/img/a.svg",
            "/site/img/a-2x.svg", "/site/img/a-3x.svg", "/site/img/p.svg", "/site/img/p-2x.svg",
            "/site/img/p-fallback.svg", "/site/img/absolute.svg", "/site/img/scheme-relative.svg",
            "/site/img/redirected.svg", "/site/img/spaces.svg", "/site/img/poster.svg", "/site/media/diagram.svg",
            "/site/media/embedded.svg", "/site/img/button.svg", "/site/img/background.svg", "/site/img/esc)aped.svg",
            "/site/img/from-base.svg", "/site/css/fs.svg", "/site/img/inner.svg", "/site/img/page2.svg",
            "/site/img/caf%C3%A9.svg", "/site/img/m1.svg", "/site/img/m2.svg",
            "/site/img/m3.svg", "/site/img/alternate.svg",
        ]
        for (index, path) in svgs.enumerated() {
            let hue = (index * 47) % 360
            serve(path, "image/svg+xml") { version in
                """
                <svg xmlns="http://www.w3.org/2000/svg" width="60" height="60"><rect width="60" height="60" \
                fill="hsl(\((hue + version * 120) % 360),70%,50%)"/></svg>
                """
            }
        }
        for path in [
            "/site/fonts/preload.woff2", "/site/fonts/body.woff2", "/site/fonts/body.woff", "/site/media/clip.webm",
            "/site/media/clip.mp4", "/site/media/sound.ogg",
        ] {
            serve(path, "application/octet-stream") { "binary \(path) v\($0)" }
        }
        serve("/site/js/app.js", "text/javascript") { "console.log('app v\($0)')" }
        serve("/site/js/module.js", "text/javascript") { "export const v = \($0)" }
        serve("/site/app.webmanifest", "application/manifest+json") { "{\"name\": \"site v\($0)\"}" }
        serve("/site/media/captions.vtt", "text/vtt") { "WEBVTT\n\n00:00.000 --> 00:01.000\nv\($0)\n" }
        let html = articleHTML
        serve("/site/article.html", "text/html; charset=utf-8") { _ in html }
        serve("/site/css/main.css", "text/css") { version in
            """
            @charset "utf-8";
            @import url("base.css");
            @import "print.css" print;
            /* url(../img/commented-out.svg) is not a reference */
            @font-face { font-family: Body; src: url(../fonts/body.woff2) format("woff2"), url('../fonts/body.woff') format("woff"); }
            body { font-family: sans-serif; margin: 8px; background-image: url("../img/background.svg") }
            h1.title { color: hsl(\(version * 90), 60%, 30%); content: "not-a-url.svg" }
            .escaped { background: url(../img/esc\\)aped.svg) }
            """
        }
        serve("/site/css/base.css", "text/css") { _ in
            "@import url(main.css);\n.b { background: URL(/site/img/from-base.svg) }\n"
        }
        serve("/site/css/print.css", "text/css") { _ in "@media print { .b { display: none } }\n" }
        serve("/site/css/alternate.css", "text/css") { _ in "body { background: url(../img/alternate.svg) }\n" }
        serve("/site/css/from-style.css", "text/css") { _ in ".fs { background: url(fs.svg) }\n" }
        serve("/site/frame.html", "text/html") { _ in
            "<html><frameset cols='*'><frame src='inner.html'></frameset></html>"
        }
        serve("/site/inner.html", "text/html") { _ in "<html><body><img src='img/inner.svg'></body></html>" }
        serve("/site/page2.html", "text/html") { _ in
            "<html><body><h1>Page two</h1><img src='img/page2.svg'><a href='article.html'>back</a></body></html>"
        }
        serve("/site/big.bin", "application/octet-stream") { _ in String(repeating: "x", count: Self.bigLength) }
        origin.route("/site/img/redirect.svg") { _ in
            LoopbackOrigin.Response(
                status: 302, headers: [("Location", "/site/img/redirected.svg"), ("Cache-Control", "no-cache")],
                body: "")
        }
        // A Latin-1 page declared by Content-Type, and one declared only by <meta>.
        let latin1Body = Array("<html><body><img src=\"img/caf".utf8) + [0xE9] + Array(".svg\"></body></html>".utf8)
        origin.route("/site/latin1.html") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "text/html; charset=iso-8859-1"), ("Cache-Control", "no-cache")],
                body: latin1Body)
        }
        let metaBody =
            Array("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\">".utf8)
            + Array("</head><body><img src=\"img/caf".utf8) + [0xE9] + Array(".svg\"></body></html>".utf8)
        origin.route("/site/latin1-meta.html") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "text/html"), ("Cache-Control", "no-cache")], body: metaBody)
        }
        // Bytes that are not the encoding the page declares (libxml2 reports them on stderr
        // unless told not to).
        let misdeclared =
            Array("<html><body><img src=\"img/m1.svg\"><p>".utf8) + [0xFF, 0xFE, 0x1B, 0x24]
            + Array("</p></body></html>".utf8)
        origin.route("/site/misdeclared.html") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "text/html; charset=iso-2022-jp"), ("Cache-Control", "no-cache")],
                body: misdeclared)
        }
        serve("/site/malformed.html", "text/html") { _ in
            """
            <html><body><div><p>unclosed <b>bold <img src=img/m1.svg><table><tr><td><img src='img/m2.svg'>
            </div></span></i><img src=img/m3.svg alt=x <p>after</body
            """
        }
        let count = manyImages
        serve("/site/many.html", "text/html") { _ in
            "<html><body>" + (0..<count).map { "<img src=\"many/\($0).svg\">" }.joined() + "</body></html>"
        }
        origin.setDefault { request in
            guard request.path.hasPrefix("/site/many/") else {
                return LoopbackOrigin.Response(
                    status: 404, headers: [("Content-Type", "text/plain")], body: "not found")
            }
            return LoopbackOrigin.Response(
                headers: [("Content-Type", "image/svg+xml"), ("Cache-Control", "max-age=3600")],
                body: "<svg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/>")
        }
        thirdParty.route("/third-party.svg") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "image/svg+xml")],
                body:
                    "<svg xmlns='http://www.w3.org/2000/svg' width='60' height='60'><circle cx='30' cy='30' r='28' fill='teal'/></svg>"
            )
        }
    }

    /// Every kind of reference on `/site/redirects.html`, by name: each is a same-origin URL
    /// `/site/r/NAME` that redirects (302) to `elsewhere` (`http://127.0.0.2:PORT/NAME`).
    public static let redirectedReferences = [
        "img.svg", "srcset.svg", "style.css", "style-url.svg", "style-import.css", "css-url.svg",
        "css-import.css", "script.js", "frame.html", "link.html",
    ]

    /// `/site/redirects.html`: a page whose every reference redirects to another origin
    /// (``redirectedReferences``), plus `/site/r/metadata.svg` and `/site/r/zero.svg`, which
    /// redirect to the link-local metadata address 169.254.169.254 and to 0.0.0.0 (which reaches
    /// this machine). `/site/r/page.html` redirects itself to `elsewhere`; `/site/r/loop.html`
    /// redirects to itself.
    public var redirectsPage: URL { origin.url("/site/redirects.html") }

    /// `/site/resolution.html`: URLs a browser and RFC 3986 read differently (a backslash, a tab,
    /// numeric hosts) and references that cannot be fetched (`file:`, `ftp:`). Read as a browser
    /// reads them, every fetchable one is on this origin: ``resolvedPaths`` (paths as the origin
    /// sees them).
    public var resolutionPage: URL { origin.url("/site/resolution.html") }

    /// The paths the origin is asked for when `/site/resolution.html` is read as a browser reads
    /// it.
    public var resolvedPaths: [String] {
        [
            "/site/resolution.html", "/@127.0.0.2:\(elsewhere.port)/backslash.svg", "/site/img/tab.svg",
            "/site/img/decimal.svg", "/site/img/hex.svg", "/site/img/octal.svg",
        ]
    }

    private func installRedirects() {
        let other = elsewhere.baseURL
        for name in Self.redirectedReferences + ["page.html"] {
            redirect("/site/r/" + name, to: "\(other)/\(name)")
        }
        redirect("/site/r/metadata.svg", to: "http://169.254.169.254/latest/meta-data/")
        redirect("/site/r/zero.svg", to: "http://0.0.0.0:\(origin.port)/site/zero-target.svg")
        redirect("/site/r/loop.html", to: "/site/r/loop.html")
        let page = """
            <!DOCTYPE html><html><head>
            <link rel="stylesheet" href="r/style.css">
            <link rel="stylesheet" href="linked.css">
            <script src="r/script.js"></script>
            <style>@import url("r/style-import.css"); .x { background: url(r/style-url.svg) }</style>
            </head><body>
            <img src="r/img.svg"><img srcset="r/srcset.svg 2x">
            <img src="r/metadata.svg"><img src="r/zero.svg">
            <iframe src="r/frame.html"></iframe>
            <a href="r/link.html">linked page</a>
            </body></html>
            """
        serve("/site/redirects.html", "text/html") { _ in page }
        serve("/site/linked.css", "text/css") { _ in
            "@import \"r/css-import.css\";\n.y { background: url(r/css-url.svg) }\n"
        }
        elsewhere.setDefault { request in
            let type =
                request.path.hasSuffix(".css")
                ? "text/css" : request.path.hasSuffix(".html") ? "text/html" : "image/svg+xml"
            return LoopbackOrigin.Response(
                headers: [("Content-Type", type)], body: type == "text/html" ? "<img src='/secret.svg'>" : "secret")
        }
    }

    private func installResolution() {
        let port = origin.port
        let page = """
            <html><body>
            <img src="http://127.0.0.1:\(port)\\@127.0.0.2:\(elsewhere.port)/backslash.svg">
            <img src="img/ta\tb.svg">
            <img src="http://2130706433:\(port)/site/img/decimal.svg">
            <img src="http://0x7f.1:\(port)/site/img/hex.svg">
            <img src="http://0177.0.0.1:\(port)/site/img/octal.svg">
            <img src="file:///etc/passwd"><img src="ftp://127.0.0.1/x.svg">
            <img src="data:image/gif;base64,R0lGODlhAQABAAAAACw="><iframe src="about:blank"></iframe>
            </body></html>
            """
        serve("/site/resolution.html", "text/html") { _ in page }
        for path in resolvedPaths.dropFirst() { serve(path, "image/svg+xml") { "<svg v='\($0)'/>" } }
    }

    /// Routes `path` to a 302 to `location`.
    private func redirect(_ path: String, to location: String) {
        origin.route(path) { _ in
            LoopbackOrigin.Response(
                status: 302, headers: [("Location", location), ("Cache-Control", "no-cache")], body: "")
        }
    }

    /// Routes `path` to a body made from its version, with an `ETag` and `no-cache`, answering
    /// a matching `If-None-Match` with 304.
    private func serve(_ path: String, _ contentType: String, _ body: @escaping @Sendable (Int) -> String) {
        origin.route(path) { [versions, delays] request in
            let version = versions.withLock { $0[path, default: 1] }
            let delay = delays.withLock { $0[path] } ?? 0
            let etag = "\"v\(version)\""
            let fields = [("ETag", etag), ("Cache-Control", "no-cache"), ("Content-Type", contentType)]
            if let tags = request.header("If-None-Match"), tags.contains(etag) {
                return LoopbackOrigin.Response(status: 304, headers: fields, body: [UInt8](), delay: delay)
            }
            return LoopbackOrigin.Response(headers: fields, body: body(version), delay: delay)
        }
    }
}
