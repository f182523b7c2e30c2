internal import CLibXML2HTTPCache
import Foundation

/// What an HTML document refers to: the subresources a browser loads to render it, and the
/// pages it links to.
///
/// Parsed with libxml2's HTML parser, which recovers from malformed markup as browsers do
/// (unclosed elements, stray end tags, unquoted attributes). URLs are resolved against the
/// document's base URL: the first `<base href>`, itself resolved against the document's URL
/// ([HTML §4.2.3](https://html.spec.whatwg.org/multipage/semantics.html#the-base-element)), as a
/// browser resolves them ([URL Standard](https://url.spec.whatwg.org/): `http://a\@b/` is host
/// `a`), not as Foundation's RFC 3986 parser would.
public struct HTMLReferences: Sendable, Hashable {
    /// How a subresource is used, which says whether it is parsed in turn.
    public enum Kind: Sendable, Hashable {
        /// A stylesheet (`<link rel=stylesheet>`): its `url()`s and `@import`s are needed too.
        case stylesheet
        /// A nested browsing context (`<iframe>`, `<frame>`): a document whose own
        /// subresources are needed too.
        case frame
        /// Anything else a browser fetches to render: images, scripts, fonts, media, icons.
        case other
    }

    /// A URL the document refers to, resolved, without its fragment.
    public struct Reference: Sendable, Hashable {
        /// The absolute URL (`http` or `https`).
        public var url: URL
        /// How it is used.
        public var kind: Kind
    }

    /// A subresource that cannot be fetched, and why.
    public struct Unfetchable: Sendable, Hashable {
        /// The reference as written (at most 200 characters of it).
        public var reference: String
        /// Why it is not fetched.
        public var reason: String
    }

    /// Subresources, in document order, each once.
    public var subresources: [Reference] = []
    /// Pages linked with `<a href>` and `<area href>`, in document order, each once.
    public var links: [URL] = []
    /// Subresources that cannot be fetched (`file:`, `ftp:` and other schemes than `http` and
    /// `https`; text that is not a URL), in document order, each once. Empty references, bare
    /// fragments and `data:`, `blob:`, `about:` and `javascript:` URLs are in neither list: there
    /// is nothing to fetch for them.
    public var unfetchable: [Unfetchable] = []
    /// The base URL relative references were resolved against.
    public var baseURL: URL
    /// The encoding the document was decoded with (an IANA name, as libxml2 reports it), which
    /// is also the fallback encoding of its stylesheets (CSS Syntax §3.2).
    public var encoding: String?

    /// Parses `html` (bytes as received).
    ///
    /// - Parameters:
    ///   - html: The document.
    ///   - url: The document's URL.
    ///   - charset: The `charset` parameter of its `Content-Type`, which wins over a `<meta>`
    ///     declaration ([HTML §13.2.3.1](https://html.spec.whatwg.org/multipage/parsing.html#encoding-sniffing-algorithm)).
    ///     Without it, a BOM or `<meta charset>` decides, else Latin-1/UTF-8 detection.
    /// - Throws: ``HTMLParserUnavailable`` when libxml2 cannot be loaded (Linux: it is opened
    ///   when the first page is parsed).
    public init(parsing html: [UInt8], url: URL, charset: String? = nil) throws(HTMLParserUnavailable) {
        let libxml2 = try LibXML2.functions()
        baseURL = url
        guard !html.isEmpty, html.count <= Int(Int32.max) else { return }
        httpcache_libxml2_quiet(libxml2)
        let options = Int32(
            HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                | HTML_PARSE_NONET.rawValue | HTML_PARSE_NOBLANKS.rawValue)
        let parse = { (encoding: String?) -> htmlDocPtr? in
            html.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { bytes in
                    libxml2.readMemory!(bytes, Int32(buffer.count), url.absoluteString, encoding, options)
                }
            }
        }
        // An encoding libxml2 does not know fails the parse: sniff instead.
        guard let document = charset.flatMap(parse) ?? parse(nil) else { return }
        defer { libxml2.freeDoc!(document) }
        encoding = document.pointee.encoding.map { String(cString: $0) } ?? charset
        var collector = Collector(documentURL: url)
        collector.walk(libxml2.rootElement!(document))
        self = collector.references(encoding: encoding)
    }

    init(subresources: [Reference], links: [URL], unfetchable: [Unfetchable], baseURL: URL, encoding: String?) {
        self.subresources = subresources
        self.links = links
        self.unfetchable = unfetchable
        self.baseURL = baseURL
        self.encoding = encoding
    }
}

/// Why HTML cannot be parsed: libxml2, which parses it, cannot be loaded.
public struct HTMLParserUnavailable: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the dynamic loader said, which names the file (`libxml2.so.2: cannot open shared
    /// object file: No such file or directory`).
    public var loaderError: String

    public var description: String {
        "cannot load libxml2, which parses HTML (\(loaderError)): install it with `apt-get install libxml2`"
    }
}

/// libxml2's functions, looked up when the first page is parsed: a program that links
/// OfflinePages and parses nothing (the CLI getting a URL) does not load libxml2 and what it
/// needs (on Debian ICU, liblzma, libstdc++).
enum LibXML2 {
    /// The file opened on Linux: the name Debian's libxml2 package installs the library as.
    static let file = "libxml2.so.2"

    /// The functions, or why they cannot be had.
    static func functions() throws(HTMLParserUnavailable) -> httpcache_libxml2 { try loaded.get() }

    /// Opens `file` and looks the functions up, then initialises the parser (libxml2 asks for
    /// `xmlInitParser()` once, before threads parse at the same time).
    static func load(_ file: String) -> Result<httpcache_libxml2, HTMLParserUnavailable> {
        var functions = httpcache_libxml2()
        if let error = httpcache_libxml2_load(file, &functions) {
            return .failure(HTMLParserUnavailable(loaderError: String(cString: error)))
        }
        return .success(functions)
    }
}

/// Loaded once: Swift runs a global's initializer exactly once, whichever thread gets there
/// first. A failure is kept too (installing libxml2 takes a new process).
private let loaded = LibXML2.load(LibXML2.file)

/// The URLs of a `srcset` attribute ([HTML §4.8.4.3.10](https://html.spec.whatwg.org/multipage/images.html#parsing-a-srcset-attribute)):
/// image candidates separated by commas, each a URL and optional descriptors (`2x`, `300w`),
/// where a URL may itself contain commas.
func srcsetURLs(_ value: String) -> [String] {
    let scalars = Array(value.unicodeScalars)
    func isSpace(_ scalar: Unicode.Scalar) -> Bool { " \t\n\r\u{0C}".unicodeScalars.contains(scalar) }
    var urls: [String] = []
    var index = 0
    while index < scalars.count {
        while index < scalars.count, isSpace(scalars[index]) || scalars[index] == "," { index += 1 }
        guard index < scalars.count else { break }
        let start = index
        while index < scalars.count, !isSpace(scalars[index]) { index += 1 }
        var url = String(String.UnicodeScalarView(scalars[start..<index]))
        if url.hasSuffix(",") {
            // The candidate has no descriptors: trailing commas end it.
            while url.hasSuffix(",") { url.removeLast() }
        } else {
            // Descriptors run to the next comma outside parentheses.
            var inParentheses = false
            while index < scalars.count {
                let scalar = scalars[index]
                if scalar == "(" { inParentheses = true } else if scalar == ")" { inParentheses = false }
                index += 1
                if scalar == ",", !inParentheses { break }
            }
        }
        if !url.isEmpty { urls.append(url) }
    }
    return urls
}

/// Walks libxml2's tree (iteratively: a malformed page may nest deeply) and collects
/// references.
private struct Collector {
    let documentURL: URL
    /// The first `<base href>`: an http(s) URL, or the scheme of another.
    var base: BrowserURL?
    var baseScheme: String?
    var hasBase = false
    /// References as written, with the element's kind; resolved at the end, once the base is
    /// known (a `<base>` counts wherever it is, as in browsers for later-parsed URLs).
    var found: [(text: String, kind: HTMLReferences.Kind)] = []
    var foundLinks: [String] = []
    /// Inline CSS (style blocks and attributes), resolved against the document's base URL.
    var cssReferences: [CSSReference] = []

    init(documentURL: URL) { self.documentURL = documentURL }

    mutating func walk(_ root: xmlNodePtr?) {
        var node = root
        while let current = node {
            let isElement = current.pointee.type == XML_ELEMENT_NODE
            if isElement { visit(current) }
            if isElement, let child = current.pointee.children {
                node = child
                continue
            }
            // The next sibling, else the next sibling of the nearest ancestor that has one.
            node = nil
            var climbing: xmlNodePtr? = current
            while let ancestor = climbing, ancestor != root {
                if let sibling = ancestor.pointee.next {
                    node = sibling
                    break
                }
                climbing = ancestor.pointee.parent
            }
        }
    }

    private mutating func visit(_ element: xmlNodePtr) {
        guard let namePointer = element.pointee.name else { return }
        let name = String(cString: namePointer).lowercased()
        let attributes = Self.attributes(of: element)
        func add(_ attribute: String, _ kind: HTMLReferences.Kind = .other) {
            if let value = attributes[attribute] { found.append((value, kind)) }
        }
        func addSrcset() {
            if let value = attributes["srcset"] { found += srcsetURLs(value).map { ($0, .other) } }
        }
        if let style = attributes["style"] { cssReferences += CSSReferences.inDeclarations(style) }
        switch name {
        case "base":
            if !hasBase, let href = attributes["href"] {
                // A base that is not a URL is ignored (HTML §4.2.3: the fallback base URL).
                switch BrowserURL.parse(href, base: BrowserURL(documentURL)) {
                case .url(let url):
                    (hasBase, base) = (true, url)
                case .otherScheme(let scheme):
                    (hasBase, baseScheme) = (true, scheme)
                case .failure: break
                }
            }
        case "img":
            add("src")
            addSrcset()
        case "source":
            add("src")
            addSrcset()
        case "link":
            let rels = Set(
                (attributes["rel"] ?? "").lowercased().split(whereSeparator: \.isWhitespace).map(String.init))
            // An alternate stylesheet too: browsers fetch it, and a reader may switch to it.
            if rels.contains("stylesheet") {
                add("href", .stylesheet)
            } else if !rels.isDisjoint(with: Self.fetchedLinkTypes) {
                add("href")
            }
        case "script", "embed", "track": add("src")
        case "iframe", "frame": add("src", .frame)
        case "video":
            add("src")
            add("poster")
        case "audio": add("src")
        case "object": add("data")
        case "input":
            if attributes["type"]?.lowercased() == "image" { add("src") }
        case "body", "table", "td", "th": add("background")
        case "style":
            cssReferences += CSSReferences.inStylesheet(Self.text(of: element))
        case "a", "area":
            if let href = attributes["href"] { foundLinks.append(href) }
        default: break
        }
    }

    /// `<link>` types a browser fetches besides stylesheets.
    static let fetchedLinkTypes: Set<String> = [
        "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "preload", "modulepreload", "manifest",
        "mask-icon",
    ]

    /// An element's attributes, names lower-cased; the first of a repeated name wins (HTML
    /// §13.2.5.33).
    static func attributes(of element: xmlNodePtr) -> [String: String] {
        var attributes: [String: String] = [:]
        var attribute = element.pointee.properties
        while let current = attribute {
            if let name = current.pointee.name {
                let key = String(cString: name).lowercased()
                if attributes[key] == nil {
                    attributes[key] = text(of: UnsafeMutableRawPointer(current).assumingMemoryBound(to: xmlNode.self))
                }
            }
            attribute = current.pointee.next
        }
        return attributes
    }

    /// The text of a node's text and CDATA children (an attribute's value, a `<style>`'s
    /// contents), read in place: nothing to free.
    static func text(of node: xmlNodePtr) -> String {
        var bytes: [UInt8] = []
        var child = node.pointee.children
        while let current = child {
            if current.pointee.type == XML_TEXT_NODE || current.pointee.type == XML_CDATA_SECTION_NODE,
                let content = current.pointee.content
            {
                var pointer = content
                while pointer.pointee != 0 {
                    bytes.append(pointer.pointee)
                    pointer += 1
                }
            }
            child = current.pointee.next
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func references(encoding: String?) -> HTMLReferences {
        let document = BrowserURL(documentURL)
        let base = hasBase ? self.base : document
        let baseScheme = hasBase ? self.baseScheme : documentURL.scheme
        var seen = Set<URL>()
        var subresources: [HTMLReferences.Reference] = []
        var unfetchable: [HTMLReferences.Unfetchable] = []
        var seenUnfetchable = Set<String>()
        let inline = cssReferences.map { ($0.url, $0.kind == .import ? HTMLReferences.Kind.stylesheet : .other) }
        for (text, kind) in found + inline {
            switch ReferenceTarget(text, base: base, baseScheme: baseScheme) {
            case .url(_, let url):
                if seen.insert(url).inserted { subresources.append(HTMLReferences.Reference(url: url, kind: kind)) }
            case .unfetchable(let reason):
                let shown = ReferenceTarget.shown(text)
                if seenUnfetchable.insert(shown).inserted {
                    unfetchable.append(.init(reference: shown, reason: reason))
                }
            case .nothing: continue
            }
        }
        var linked = Set<URL>()
        let links = foundLinks.compactMap { text -> URL? in
            guard case .url(_, let url) = ReferenceTarget(text, base: base, baseScheme: baseScheme) else { return nil }
            return url
        }
        .filter { linked.insert($0).inserted }
        return HTMLReferences(
            subresources: subresources, links: links, unfetchable: unfetchable,
            baseURL: base?.foundationURL ?? documentURL, encoding: encoding)
    }
}
