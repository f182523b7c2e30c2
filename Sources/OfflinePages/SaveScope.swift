import Foundation

/// What a URL found in a document or stylesheet is to a save.
enum ReferenceTarget: Sendable, Hashable {
    /// An `http` or `https` URL, resolved as a browser resolves it, and as the transport is
    /// given it.
    case url(BrowserURL, URL)
    /// A URL a save does not fetch (`file:`, `ftp:`, `ws:`…), or text that is not a URL: why,
    /// for the save's report.
    case unfetchable(String)
    /// Nothing to fetch: empty, only a fragment (the document itself), or a scheme whose content
    /// comes with the page or its scripts (`data:`, `blob:`, `about:`, `javascript:`).
    case nothing

    /// Resolves `text` (an attribute's or a `url()`'s value) against `base` as a browser would
    /// (WHATWG URL Standard, via ``BrowserURL``). `base` is `nil` when the document's base URL
    /// is not `http`/`https` (a `<base href="file:…">`); `baseScheme` then names its scheme.
    init(_ text: String, base: BrowserURL?, baseScheme: String? = nil) {
        let trimmed = text.unicodeScalars.drop { $0.value <= 0x20 }
        guard let first = trimmed.first, first != "#" else {
            self = .nothing
            return
        }
        switch BrowserURL.parse(text, base: base) {
        case .url(let url):
            if let foundation = url.foundationURL {
                self = .url(url, foundation)
            } else {
                self = .unfetchable("\(url.serialization) cannot be given to the transport as it is")
            }
        case .otherScheme(let scheme):
            // The Fetch Standard's local schemes (§2.1: about, blob, data), and javascript:,
            // which is run, not fetched.
            if ["about", "blob", "data", "javascript"].contains(scheme) {
                self = .nothing
            } else {
                self = .unfetchable("a \(scheme): URL; a save fetches only http and https")
            }
        case .failure(let reason):
            if base == nil, let baseScheme {
                self = .unfetchable(
                    "relative to the document's <base href> of scheme \(baseScheme):, not http or https")
            } else {
                self = .unfetchable("not a URL a browser would load: \(reason)")
            }
        }
    }

    /// `text` as it appears in a report: at most 200 characters.
    static func shown(_ text: String) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.count <= 200 ? trimmed : String(trimmed.prefix(200)) + "… (\(trimmed.count) characters)"
    }
}

/// Which URLs a save or a refresh of a pack may request, decided before each request is sent
/// (a redirect's target included).
///
/// - The page's own origin (RFC 6454 / HTML: scheme, host, port) always; another origin only
///   with ``SaveOptions/includesThirdParty``. A redirect to another origin is a third-party
///   resource like any other: not followed without it.
/// - Never a link-local or unspecified address (IPv4 169.254.0.0/16 and 0.0.0.0/8; IPv6
///   `fe80::/10` and `::`, also as IPv4-mapped `::ffff:…`), whatever the options, unless the page
///   itself is on that host: that is where cloud metadata services answer (169.254.169.254), and
///   where a connection reaches the local machine (0.0.0.0).
///
/// Hosts are compared as the WHATWG host parser reads them, so every spelling of an address
/// (`0xa9.254.43518`, `2852039166`, `[::ffff:a9fe:a9fe]`) is caught. Names are not resolved: a
/// name whose address is link-local is fetched only with `includesThirdParty` (without it only
/// the page's own host is ever contacted); checking where a name leads would need the
/// transport to check the address it connects to, since a lookup made first could differ from
/// the transport's own.
struct SaveScope: Sendable, Hashable {
    let page: BrowserURL
    let includesThirdParty: Bool

    /// Why `url` is not fetched, or `nil` when it may be.
    func refusal(_ url: BrowserURL) -> String? {
        if url.host != page.host, Self.isLinkLocalOrUnspecified(url.host) {
            return "\(url.host) is a link-local or unspecified address (169.254.0.0/16, 0.0.0.0/8, fe80::/10, ::),"
                + " where cloud metadata services and the local machine answer; a save never fetches one unless"
                + " the page itself is there"
        }
        if !includesThirdParty, url.origin != page.origin {
            return "another origin (third party); saved only with includesThirdParty (--third-party)"
        }
        return nil
    }

    /// Where a redirect from `url` with `location` leads, when the save may follow it: the URL
    /// to request, or why it is not followed.
    func redirect(from url: URL, to location: String) -> Result<URL, Refusal> {
        guard let from = BrowserURL(url) else {
            return .failure(Refusal(reason: "redirects from \(url.absoluteString), which is not an http(s) URL"))
        }
        switch ReferenceTarget(location, base: from) {
        case .url(let target, let next):
            if let refusal = refusal(target) {
                let kind = target.origin != page.origin ? "third-party redirect: " : ""
                return .failure(Refusal(reason: "redirects to \(target.serialization) (\(kind)\(refusal))"))
            }
            return .success(next)
        case .unfetchable(let why):
            return .failure(Refusal(reason: "redirects to \(ReferenceTarget.shown(location)): \(why)"))
        case .nothing:
            return .failure(Refusal(reason: "redirects to \(ReferenceTarget.shown(location)), nothing to fetch"))
        }
    }

    /// Why a redirect is not followed.
    struct Refusal: Error, Sendable, Hashable {
        var reason: String
    }

    static func isLinkLocalOrUnspecified(_ host: BrowserURL.Host) -> Bool {
        switch host {
        case .domain: return false
        case .ipv4(let address): return isLinkLocalOrUnspecified(ipv4: address)
        case .ipv6(let pieces):
            if pieces.allSatisfy({ $0 == 0 }) || pieces[0] & 0xFFC0 == 0xFE80 { return true }
            // IPv4-mapped: ::ffff:a.b.c.d.
            if pieces[0..<5].allSatisfy({ $0 == 0 }), pieces[5] == 0xFFFF {
                return isLinkLocalOrUnspecified(ipv4: UInt32(pieces[6]) << 16 | UInt32(pieces[7]))
            }
            return false
        }
    }

    private static func isLinkLocalOrUnspecified(ipv4 address: UInt32) -> Bool {
        address >> 16 == 0xA9FE || address >> 24 == 0
    }
}
