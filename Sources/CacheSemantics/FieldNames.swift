extension HeaderField {
    /// A field name: its registered spelling, and its lower-case form computed once, so a lookup
    /// compares bytes without folding case (field names are case-insensitive, RFC 9110 §5.1).
    ///
    /// The package names every field it reads or writes with a constant, as swift-http-types does
    /// (`HTTPField.Name.contentType`); a typo in a constant's name does not compile, one in a string
    /// literal silently finds nothing. Names of your own are strings or string literals:
    ///
    /// ```swift
    /// fields[.cacheControl]                    // "max-age=60"
    /// fields["X-Request-ID"]                   // the String-taking API works as before
    /// let name: HeaderField.Name = "X-Trace"   // or a Name of your own
    /// ```
    public struct Name: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The name as it is written on the wire (the registered spelling for the constants).
        public let rawName: String
        /// `rawName` with ASCII letters lowered: what lookups compare.
        public let lowercasedName: String

        /// A name of your own, spelled as it will be written.
        public init(_ name: String) {
            rawName = name
            lowercasedName = ASCII.lowercased(name)
        }

        public init(stringLiteral name: String) { self.init(name) }

        /// A constant whose lower-case form is written beside it (no folding on each use).
        @inlinable
        init(registered name: String, lowercased: String) {
            assert(lowercased == ASCII.lowercased(name), "\(lowercased) is not \(name) in lower case")
            rawName = name
            lowercasedName = lowercased
        }

        public var description: String { rawName }

        /// Names are equal when they differ at most in case (RFC 9110 §5.1).
        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.lowercasedName == rhs.lowercasedName }
        public func hash(into hasher: inout Hasher) { hasher.combine(lowercasedName) }
    }

    /// A field line named by a constant (its lower-case form is not computed again).
    @inlinable
    public init(name: Name, value: String) {
        self.init(name: name.rawName, lowercasedName: name.lowercasedName, value: value)
    }
}

// Every field the package reads or writes. Computed, not stored: a use compiles to the two string
// literals, with no lazy initialization to check.
extension HeaderField.Name {
    // MARK: RFC 9110, HTTP Semantics

    /// `Accept` ([RFC 9110 §12.5.1](https://www.rfc-editor.org/rfc/rfc9110#section-12.5.1)).
    @inlinable public static var accept: Self { .init(registered: "Accept", lowercased: "accept") }
    /// `Accept-Encoding` ([RFC 9110 §12.5.3](https://www.rfc-editor.org/rfc/rfc9110#section-12.5.3)).
    @inlinable public static var acceptEncoding: Self {
        .init(registered: "Accept-Encoding", lowercased: "accept-encoding")
    }
    /// `Accept-Language` ([RFC 9110 §12.5.4](https://www.rfc-editor.org/rfc/rfc9110#section-12.5.4)).
    @inlinable public static var acceptLanguage: Self {
        .init(registered: "Accept-Language", lowercased: "accept-language")
    }
    /// `Accept-Ranges` ([RFC 9110 §14.3](https://www.rfc-editor.org/rfc/rfc9110#section-14.3)).
    @inlinable public static var acceptRanges: Self { .init(registered: "Accept-Ranges", lowercased: "accept-ranges") }
    /// `Allow` ([RFC 9110 §10.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.1)).
    @inlinable public static var allow: Self { .init(registered: "Allow", lowercased: "allow") }
    /// `Authorization` ([RFC 9110 §11.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-11.6.2)).
    @inlinable public static var authorization: Self { .init(registered: "Authorization", lowercased: "authorization") }
    /// `Connection` ([RFC 9110 §7.6.1](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1)).
    @inlinable public static var connection: Self { .init(registered: "Connection", lowercased: "connection") }
    /// `Content-Digest` ([RFC 9530 §2](https://www.rfc-editor.org/rfc/rfc9530#section-2)).
    @inlinable public static var contentDigest: Self {
        .init(registered: "Content-Digest", lowercased: "content-digest")
    }
    /// `Content-Encoding` ([RFC 9110 §8.4](https://www.rfc-editor.org/rfc/rfc9110#section-8.4)).
    @inlinable public static var contentEncoding: Self {
        .init(registered: "Content-Encoding", lowercased: "content-encoding")
    }
    /// `Content-Language` ([RFC 9110 §8.5](https://www.rfc-editor.org/rfc/rfc9110#section-8.5)).
    @inlinable public static var contentLanguage: Self {
        .init(registered: "Content-Language", lowercased: "content-language")
    }
    /// `Content-Length` ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    @inlinable public static var contentLength: Self {
        .init(registered: "Content-Length", lowercased: "content-length")
    }
    /// `Content-Location` ([RFC 9110 §8.7](https://www.rfc-editor.org/rfc/rfc9110#section-8.7)).
    @inlinable public static var contentLocation: Self {
        .init(registered: "Content-Location", lowercased: "content-location")
    }
    /// `Content-Range` ([RFC 9110 §14.4](https://www.rfc-editor.org/rfc/rfc9110#section-14.4)).
    @inlinable public static var contentRange: Self { .init(registered: "Content-Range", lowercased: "content-range") }
    /// `Content-Type` ([RFC 9110 §8.3](https://www.rfc-editor.org/rfc/rfc9110#section-8.3)).
    @inlinable public static var contentType: Self { .init(registered: "Content-Type", lowercased: "content-type") }
    /// `Repr-Digest` ([RFC 9530 §3](https://www.rfc-editor.org/rfc/rfc9530#section-3)).
    @inlinable public static var reprDigest: Self { .init(registered: "Repr-Digest", lowercased: "repr-digest") }
    /// `Want-Repr-Digest` ([RFC 9530 §4](https://www.rfc-editor.org/rfc/rfc9530#section-4)).
    @inlinable public static var wantReprDigest: Self {
        .init(registered: "Want-Repr-Digest", lowercased: "want-repr-digest")
    }
    /// `Date` ([RFC 9110 §6.6.1](https://www.rfc-editor.org/rfc/rfc9110#section-6.6.1)).
    @inlinable public static var date: Self { .init(registered: "Date", lowercased: "date") }
    /// `ETag` ([RFC 9110 §8.8.3](https://www.rfc-editor.org/rfc/rfc9110#section-8.8.3)).
    @inlinable public static var eTag: Self { .init(registered: "ETag", lowercased: "etag") }
    /// `Expect` ([RFC 9110 §10.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1)).
    @inlinable public static var expect: Self { .init(registered: "Expect", lowercased: "expect") }
    /// `Host` ([RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2)).
    @inlinable public static var host: Self { .init(registered: "Host", lowercased: "host") }
    /// `If-Modified-Since` ([RFC 9110 §13.1.3](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.3)).
    @inlinable public static var ifModifiedSince: Self {
        .init(registered: "If-Modified-Since", lowercased: "if-modified-since")
    }
    /// `If-None-Match` ([RFC 9110 §13.1.2](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.2)).
    @inlinable public static var ifNoneMatch: Self { .init(registered: "If-None-Match", lowercased: "if-none-match") }
    /// `If-Range` ([RFC 9110 §13.1.5](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.5)).
    @inlinable public static var ifRange: Self { .init(registered: "If-Range", lowercased: "if-range") }
    /// `Last-Modified` ([RFC 9110 §8.8.2](https://www.rfc-editor.org/rfc/rfc9110#section-8.8.2)).
    @inlinable public static var lastModified: Self { .init(registered: "Last-Modified", lowercased: "last-modified") }
    /// `Location` ([RFC 9110 §10.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.2)).
    @inlinable public static var location: Self { .init(registered: "Location", lowercased: "location") }
    /// `Max-Forwards` ([RFC 9110 §7.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.2)).
    @inlinable public static var maxForwards: Self { .init(registered: "Max-Forwards", lowercased: "max-forwards") }
    /// `Proxy-Authenticate` ([RFC 9110 §11.7.1](https://www.rfc-editor.org/rfc/rfc9110#section-11.7.1)).
    @inlinable public static var proxyAuthenticate: Self {
        .init(registered: "Proxy-Authenticate", lowercased: "proxy-authenticate")
    }
    /// `Proxy-Authentication-Info` ([RFC 9110 §11.7.3](https://www.rfc-editor.org/rfc/rfc9110#section-11.7.3)).
    @inlinable public static var proxyAuthenticationInfo: Self {
        .init(registered: "Proxy-Authentication-Info", lowercased: "proxy-authentication-info")
    }
    /// `Proxy-Authorization` ([RFC 9110 §11.7.2](https://www.rfc-editor.org/rfc/rfc9110#section-11.7.2)).
    @inlinable public static var proxyAuthorization: Self {
        .init(registered: "Proxy-Authorization", lowercased: "proxy-authorization")
    }
    /// `Proxy-Status` ([RFC 9209 §2](https://www.rfc-editor.org/rfc/rfc9209#section-2)).
    @inlinable public static var proxyStatus: Self { .init(registered: "Proxy-Status", lowercased: "proxy-status") }
    /// `Range` ([RFC 9110 §14.2](https://www.rfc-editor.org/rfc/rfc9110#section-14.2)).
    @inlinable public static var range: Self { .init(registered: "Range", lowercased: "range") }
    /// `Referer` ([RFC 9110 §10.1.3](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.3)).
    @inlinable public static var referer: Self { .init(registered: "Referer", lowercased: "referer") }
    /// `Server` ([RFC 9110 §10.2.4](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.4)).
    @inlinable public static var server: Self { .init(registered: "Server", lowercased: "server") }
    /// `TE` ([RFC 9110 §10.1.4](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.4)).
    @inlinable public static var te: Self { .init(registered: "TE", lowercased: "te") }
    /// `Trailer` ([RFC 9110 §6.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-6.6.2)).
    @inlinable public static var trailer: Self { .init(registered: "Trailer", lowercased: "trailer") }
    /// `Upgrade` ([RFC 9110 §7.8](https://www.rfc-editor.org/rfc/rfc9110#section-7.8)).
    @inlinable public static var upgrade: Self { .init(registered: "Upgrade", lowercased: "upgrade") }
    /// `User-Agent` ([RFC 9110 §10.1.5](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.5)).
    @inlinable public static var userAgent: Self { .init(registered: "User-Agent", lowercased: "user-agent") }
    /// `Vary` ([RFC 9110 §12.5.5](https://www.rfc-editor.org/rfc/rfc9110#section-12.5.5)).
    @inlinable public static var vary: Self { .init(registered: "Vary", lowercased: "vary") }
    /// `Via` ([RFC 9110 §7.6.3](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.3)).
    @inlinable public static var via: Self { .init(registered: "Via", lowercased: "via") }

    // MARK: RFC 9112, HTTP/1.1 (and the hop-by-hop fields RFC 9110 §7.6.1 names)

    /// `Transfer-Encoding` ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    @inlinable public static var transferEncoding: Self {
        .init(registered: "Transfer-Encoding", lowercased: "transfer-encoding")
    }
    /// `Keep-Alive` ([RFC 2068 §19.7.1](https://www.rfc-editor.org/rfc/rfc2068#section-19.7.1), named
    /// hop-by-hop in [RFC 9110 §7.6.1](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1)).
    @inlinable public static var keepAlive: Self { .init(registered: "Keep-Alive", lowercased: "keep-alive") }
    /// `Proxy-Connection` ([RFC 9112 Appendix C.2.2](https://www.rfc-editor.org/rfc/rfc9112#appendix-C.2.2)).
    @inlinable public static var proxyConnection: Self {
        .init(registered: "Proxy-Connection", lowercased: "proxy-connection")
    }

    // MARK: RFC 9111, HTTP Caching

    /// `Age` ([RFC 9111 §5.1](https://www.rfc-editor.org/rfc/rfc9111#section-5.1)).
    @inlinable public static var age: Self { .init(registered: "Age", lowercased: "age") }
    /// `Cache-Control` ([RFC 9111 §5.2](https://www.rfc-editor.org/rfc/rfc9111#section-5.2)); its
    /// `stale-while-revalidate` and `stale-if-error` directives are RFC 5861's, `immutable` RFC 8246's.
    @inlinable public static var cacheControl: Self { .init(registered: "Cache-Control", lowercased: "cache-control") }
    /// `Expires` ([RFC 9111 §5.3](https://www.rfc-editor.org/rfc/rfc9111#section-5.3)).
    @inlinable public static var expires: Self { .init(registered: "Expires", lowercased: "expires") }
    /// `Pragma` ([RFC 9111 §5.4](https://www.rfc-editor.org/rfc/rfc9111#section-5.4)), obsolete; read
    /// for `no-cache` when a request has no `Cache-Control`.
    @inlinable public static var pragma: Self { .init(registered: "Pragma", lowercased: "pragma") }
    /// `Warning` ([RFC 9111 §5.5](https://www.rfc-editor.org/rfc/rfc9111#section-5.5)), obsolete.
    @inlinable public static var warning: Self { .init(registered: "Warning", lowercased: "warning") }

    // MARK: Cache-Status, targeted Cache-Control, Cache Groups, No-Vary-Search

    /// `Cache-Status` ([RFC 9211 §2](https://www.rfc-editor.org/rfc/rfc9211#section-2)).
    @inlinable public static var cacheStatus: Self { .init(registered: "Cache-Status", lowercased: "cache-status") }
    /// `CDN-Cache-Control` ([RFC 9213 §3](https://www.rfc-editor.org/rfc/rfc9213#section-3)), the
    /// field a shared cache obeys before `Cache-Control`.
    @inlinable public static var cdnCacheControl: Self {
        .init(registered: "CDN-Cache-Control", lowercased: "cdn-cache-control")
    }
    /// `Cache-Groups` ([RFC 9875 §2](https://www.rfc-editor.org/rfc/rfc9875#section-2)).
    @inlinable public static var cacheGroups: Self { .init(registered: "Cache-Groups", lowercased: "cache-groups") }
    /// `Cache-Group-Invalidation` ([RFC 9875 §3](https://www.rfc-editor.org/rfc/rfc9875#section-3)).
    @inlinable public static var cacheGroupInvalidation: Self {
        .init(registered: "Cache-Group-Invalidation", lowercased: "cache-group-invalidation")
    }
    /// `No-Vary-Search` ([No-Vary-Search draft §2](https://httpwg.org/http-extensions/draft-ietf-httpbis-no-vary-search.html#section-2)).
    @inlinable public static var noVarySearch: Self {
        .init(registered: "No-Vary-Search", lowercased: "no-vary-search")
    }

    /// `Clear-Site-Data` ([W3C Clear Site Data §3.1](https://www.w3.org/TR/clear-site-data/#header)):
    /// a response's request to remove what is kept for its origin.
    @inlinable public static var clearSiteData: Self {
        .init(registered: "Clear-Site-Data", lowercased: "clear-site-data")
    }
    /// `HTTPCache-Partition`: a request field that names the cache partition a `URLRequest` is
    /// answered in. `HTTPCache` takes it out before the request is sent: the origin never sees it.
    @inlinable public static var httpCachePartition: Self {
        .init(registered: "HTTPCache-Partition", lowercased: "httpcache-partition")
    }

    // MARK: Cookies (RFC 6265)

    /// `Cookie` ([RFC 6265 §5.4](https://www.rfc-editor.org/rfc/rfc6265#section-5.4)).
    @inlinable public static var cookie: Self { .init(registered: "Cookie", lowercased: "cookie") }
    /// `Set-Cookie` ([RFC 6265 §4.1](https://www.rfc-editor.org/rfc/rfc6265#section-4.1)): never combined
    /// into one line (RFC 9110 §5.3).
    @inlinable public static var setCookie: Self { .init(registered: "Set-Cookie", lowercased: "set-cookie") }
}
