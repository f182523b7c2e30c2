import Testing

@testable import OfflinePages

// The URLs a stylesheet refers to, by a CSS Syntax Level 3 tokenizer
// (https://www.w3.org/TR/css-syntax-3/), and the decoding of stylesheet bytes (§3.2).

private func urls(_ css: String) -> [String] {
    CSSReferences.inStylesheet(css).map(\.url)
}

private func url(_ value: String) -> CSSReference {
    CSSReference(kind: .url, url: value)
}

private func imported(_ value: String) -> CSSReference {
    CSSReference(kind: .import, url: value)
}

private func tokens(_ css: String) -> [CSSReferences.Token] {
    var tokenizer = CSSReferences.Tokenizer(css)
    var result: [CSSReferences.Token] = []
    while let token = tokenizer.next() { result.append(token) }
    return result
}

@Suite("CSS references (CSS Syntax Level 3)")
struct CSSReferencesTests {
    // MARK: url()

    @Test("§4.3.6 consume a url token: an unquoted URL, whitespace around it not part of it")
    func unquotedURL() {
        #expect(CSSReferences.inStylesheet("a { background: url(foo.png) }") == [url("foo.png")])
        #expect(urls("a { background: url(  foo.png\t\n) }") == ["foo.png"])
        #expect(urls("a{b:url(https://example.com/a.png?x=1&y=2#f)}") == ["https://example.com/a.png?x=1&y=2#f"])
    }

    @Test("§4.3.4 consume an ident-like token: url( followed by a quote is a function; its string is the URL")
    func quotedURL() {
        #expect(urls(#"a { b: url( "foo.png" ) }"#) == ["foo.png"])
        #expect(urls("a { b: url('a b.png') }") == ["a b.png"])
        #expect(urls("a { b: url(   'c.png'   ) }") == ["c.png"])
        #expect(tokens(#"url(  "x")"#) == [.function("url"), .whitespace, .string("x"), .closeParen])
    }

    @Test("§4.3.4: function names are ASCII case-insensitive (URL(, Url(, IMAGE-SET()")
    func caseInsensitiveFunctionNames() {
        #expect(urls(#"a { b: URL(x.png); c: Url("y.png"); d: uRl( 'z.png' ) }"#) == ["x.png", "y.png", "z.png"])
        #expect(urls(#"a { b: IMAGE-SET("i.png" 1x) }"#) == ["i.png"])
    }

    @Test("§4.3.6: only the first string in url() is the URL (the rest are url modifiers)")
    func urlModifiers() {
        #expect(urls(#"a { b: url("a.png" "b.png" crossorigin(anonymous)) }"#) == ["a.png"])
    }

    @Test("CSS Values 4 §4.5: src(\"…\") is a URL like url(\"…\")")
    func srcFunction() {
        #expect(urls(#"a { b: src("s.png"); c: SRC('t.png') }"#) == ["s.png", "t.png"])
    }

    // MARK: Escapes

    @Test("§4.3.7 consume an escaped code point: escapes in an unquoted URL")
    func escapesInUnquotedURL() {
        #expect(urls(#"a { b: url(a\)b.png) }"#) == ["a)b.png"])
        #expect(urls(#"a { b: url(a\ b\(c\'d\".png) }"#) == [#"a b(c'd".png"#])
        #expect(urls(#"a { b: url(caf\e9 .png) }"#) == ["café.png"])
        #expect(urls(#"a { b: url(caf\0000e9.png) }"#) == ["café.png"])
    }

    @Test("§4.3.4: an escaped ident that is `url` is url( (\\75 rl(, u\\72l(, \\55 RL()")
    func escapedURLName() {
        #expect(urls(#"a { b: \75 rl(x.png) }"#) == ["x.png"])
        #expect(urls(#"a { b: u\72l(y.png) }"#) == ["y.png"])
        #expect(urls(#"a { b: \55 RL("z.png") }"#) == ["z.png"])
        #expect(urls(#"a { b: \75 rl(x y) }"#) == [])
    }

    @Test("§4.3.5 consume a string token: escapes and escaped newlines in strings")
    func escapesInStrings() {
        #expect(urls(#"a { b: url("a\"b.png") }"#) == [#"a"b.png"#])
        #expect(urls("a { b: url(\"a\\\nb.png\") }") == ["ab.png"])
        #expect(urls(#"a { b: url('caf\E9 .png') }"#) == ["café.png"])
        #expect(urls(#"a { b: url("\1F600.png") }"#) == ["😀.png"])
    }

    @Test("§4.3.7: NUL, surrogate and out-of-range escapes become U+FFFD; escape at EOF too")
    func replacementEscapes() {
        #expect(urls(#"a { b: url(a\0 b) }"#) == ["a\u{FFFD}b"])
        #expect(urls(#"a { b: url(a\D800 b) }"#) == ["a\u{FFFD}b"])
        #expect(urls(#"a { b: url(a\110000 b) }"#) == ["a\u{FFFD}b"])
        #expect(urls(#"a { b: url(a\10FFFF b) }"#) == ["a\u{10FFFF}b"])
        #expect(urls(#"a { b: url(a\"#) == ["a\u{FFFD}"])
    }

    // MARK: Bad URLs, bad strings, empty URLs

    @Test("§4.3.6: whitespace inside, quotes, ( and non-printables make a bad url, which yields nothing")
    func badURLs() {
        #expect(urls("a { b: url(a b.png) }") == [])
        #expect(urls(#"a { b: url(a"b.png) }"#) == [])
        #expect(urls("a { b: url(a'b.png) }") == [])
        #expect(urls("a { b: url(a(b.png) }") == [])
        #expect(urls("a { b: url(a\u{01}b.png) }") == [])
        #expect(urls("a { b: url(a\u{7F}b.png) }") == [])
        #expect(urls("a { b: url(a\\\nb.png) }") == [])
    }

    @Test("§4.3.14 consume the remnants of a bad url: up to `)`, escaped `\\)` included; then tokenizing resumes")
    func badURLRecovery() {
        #expect(urls("a { b: url(a b) url(c.png) }") == ["c.png"])
        #expect(urls(#"a { b: url(a b\) url(c.png)) url(d.png) }"#) == ["d.png"])
    }

    @Test("§4.3.5: a newline ends a string as a bad string, which yields nothing; the next line is tokenized")
    func badStrings() {
        #expect(urls("a { b: url(\"a.png\n); c: url(d.png) }") == ["d.png"])
        #expect(CSSReferences.inStylesheet("@import \"a.css\n;\n@import \"b.css\";") == [imported("b.css")])
        #expect(tokens("'a\nb'") == [.badString, .whitespace, .ident("b"), .string("")])
    }

    @Test("§4.3.6: empty URLs yield nothing: url(), url( ), url(\"\"), image-set(\"\")")
    func emptyURLs() {
        #expect(urls(#"a { b: url(); c: url(   ); d: url(""); e: url(''); f: image-set("" 1x) } @import "";"#) == [])
        #expect(tokens("url( )") == [.url("")])
    }

    @Test("§4.3.6: a url token unterminated at EOF still counts")
    func urlAtEOF() {
        #expect(urls("a { b: url(x.png") == ["x.png"])
        #expect(urls("a { b: url(x.png   ") == ["x.png"])
        #expect(urls(#"a { b: url("x.png"#) == ["x.png"])
    }

    // MARK: Comments

    @Test("§4.3.2 consume comments: nothing inside a comment is a reference; unclosed comments run to EOF")
    func comments() {
        #expect(urls("/* url(x.png) */ a { b: url(y.png) /* @import 'z.css'; */ }") == ["y.png"])
        #expect(urls("a { b: url(y.png) } /* url(x.png) ") == ["y.png"])
        #expect(urls("a { b: /**/url(/**/) }") == ["/**/"])
        #expect(urls(#"a { content: "/*"; b: url(y.png) } /* */"#) == ["y.png"])
    }

    @Test("§4.3.6: `/*` inside an unquoted url is part of the URL, not a comment")
    func commentMarkersInsideURL() {
        #expect(urls("a { b: url(a/*b*/c.png) }") == ["a/*b*/c.png"])
    }

    // MARK: Strings that are not URLs, image-set()

    @Test("Plain strings are not URLs: content, font-family, format(), local()")
    func plainStringsAreNotURLs() {
        #expect(urls(#"a { content: "x.png"; font-family: "a.png", 'b.png'; quotes: "«" "»" }"#) == [])
        let fontFace = #"""
            @font-face { font-family: "F"; src: url(a.woff2) format("woff2"), local("F.png"),
              url("b.woff") format("woff"); }
            """#
        #expect(urls(fontFace) == ["a.woff2", "b.woff"])
    }

    @Test("CSS Images 4 §2.2: strings directly in image-set() / -webkit-image-set() are URLs")
    func imageSet() {
        #expect(urls(#"a { b: image-set("a.png" 1x, "b.png" 2x) }"#) == ["a.png", "b.png"])
        #expect(urls(#"a { b: -webkit-image-set(url(a.png) 1x, 'b.png' 2x) }"#) == ["a.png", "b.png"])
        #expect(
            urls(#"a { b: image-set("a.avif" type("image/avif"), url("b.png") type("image/png")) }"#) == [
                "a.avif", "b.png",
            ])
        #expect(urls(#"a { b: image-set(linear-gradient(red, blue) 1x, "c.png" 2x) }"#) == ["c.png"])
    }

    // MARK: @import

    @Test("Cascade 5 @import: string, url() and url(\"…\") forms, with media, layer() and supports()")
    func importForms() {
        let css = """
            @import "a.css";
            @import 'b.css' screen;
            @import url(c.css) screen and (min-width: 10px);
            @import url("d.css") layer(x) supports(display:grid);
            @IMPORT url( 'e.css' ) layer;
            @\\69mport "f.css";
            """
        #expect(
            CSSReferences.inStylesheet(css) == [
                imported("a.css"), imported("b.css"), imported("c.css"), imported("d.css"), imported("e.css"),
                imported("f.css"),
            ])
    }

    @Test("@import: the rest of the prelude is not a reference; the rule ends at `;`")
    func importPreludeRest() {
        let css = #"@import url(a.css) supports(background: url(x.png)) "y.png"; b { c: url(d.png) }"#
        #expect(CSSReferences.inStylesheet(css) == [imported("a.css"), url("d.png")])
    }

    @Test("@import: only its first token can be the URL; anything else yields nothing")
    func importWithoutURL() {
        #expect(CSSReferences.inStylesheet(#"@import foo "a.css"; @import; @import url(a b);"#) == [])
        #expect(CSSReferences.inStylesheet(#"@import screen url(x.css);"#) == [])
    }

    @Test("@import counts only at the top level: inside a block it is invalid and yields nothing")
    func importInsideBlock() {
        let css = #"@media print { @import "a.css"; @import url(b.css); x { y: url(c.png) } } @import "d.css";"#
        #expect(CSSReferences.inStylesheet(css) == [url("c.png"), imported("d.css")])
    }

    @Test("@import after style rules still counts at the top level (tolerant)")
    func importAfterRules() {
        let css = #"a { b: url(x.png) } @import "late.css";"#
        #expect(CSSReferences.inStylesheet(css) == [url("x.png"), imported("late.css")])
    }

    @Test("§5.4 consume a simple block: a `}` inside an open function does not end the block")
    func mismatchedClosers() {
        #expect(
            CSSReferences.inStylesheet(#"a { b: f( } @import "x.css"; ) } @import "y.css";"#) == [
                imported("y.css")
            ])
        #expect(CSSReferences.inStylesheet(#"a { b: [ ) } ] } @import "z.css";"#) == [imported("z.css")])
        #expect(CSSReferences.inStylesheet(#"f( } @import "x.css"; ) @import "y.css";"#) == [imported("y.css")])
        #expect(CSSReferences.inStylesheet(#") ] } @import "t.css";"#) == [imported("t.css")])
    }

    @Test("A nested at-rule ends at the `}` of its block")
    func nestedAtRuleEndsAtBrace() {
        #expect(CSSReferences.inStylesheet(#"a { @import "x.css" } b { c: url(d.png) }"#) == [url("d.png")])
    }

    @Test("CSS Namespaces: the @namespace URL is a name, never fetched: not a reference")
    func namespaceIsNotAReference() {
        let css = #"@namespace svg url(http://www.w3.org/2000/svg); @namespace "urn:x"; a { b: url(c.png) }"#
        #expect(CSSReferences.inStylesheet(css) == [url("c.png")])
    }

    @Test("@-moz-document: the prelude's URLs are conditions, the block's references count")
    func documentRule() {
        let css = #"@-moz-document url(http://a.example/) { a { b: url(c.png) } }"#
        #expect(CSSReferences.inStylesheet(css) == [url("c.png")])
    }

    @Test("References are in order of appearance, including repeats")
    func order() {
        let css = #"@import "i.css"; a { b: url(1.png) } c { d: image-set("2.png" 1x); e: url('1.png') }"#
        #expect(
            CSSReferences.inStylesheet(css) == [imported("i.css"), url("1.png"), url("2.png"), url("1.png")])
    }

    // MARK: Declaration lists

    @Test("Declaration list (style attribute): url(), image-set(); no @import there")
    func declarations() {
        #expect(
            CSSReferences.inDeclarations("background: url(a.png); cursor: url('c.cur'), auto") == [
                url("a.png"), url("c.cur"),
            ])
        #expect(
            CSSReferences.inDeclarations(#"@import "x.css"; background-image: image-set("b.png" 1x)"#) == [
                url("b.png")
            ])
        #expect(CSSReferences.inDeclarations(#"content: "x.png""#) == [])
    }

    // MARK: Preprocessing and tokenizing

    @Test("§3.3 preprocessing: CR LF, CR and FF are one newline; NUL is U+FFFD")
    func preprocessing() {
        #expect(urls("a { b: url(\"a\\\r\nb.png\") }") == ["ab.png"])
        #expect(urls("a { b: url(\"a\\\rb.png\") }") == ["ab.png"])
        #expect(urls("a { b: url(\"a\\\u{0C}b.png\") }") == ["ab.png"])
        #expect(urls("a { b: url(a\0b.png) }") == ["a\u{FFFD}b.png"])
        #expect(
            CSSReferences.Tokenizer.preprocess("a\r\n\r\rb\u{0C}\0") == ["a", "\n", "\n", "\n", "b", "\n", "\u{FFFD}"])
    }

    @Test("§4.3.1 consume a token: numbers, dimensions, hashes, CDO/CDC, at-keywords, delims")
    func tokenKinds() {
        #expect(
            tokens("1.5e3px -.5% +2 #a1 #1a @media <!-- --> - \\") == [
                .dimension("1.5e3", unit: "px"), .whitespace, .percentage("-.5"), .whitespace, .number("+2"),
                .whitespace, .hash("a1", isID: true), .whitespace, .hash("1a", isID: false), .whitespace,
                .atKeyword("media"), .whitespace, .cdo, .whitespace, .cdc, .whitespace, .delim("-"), .whitespace,
                .ident("\u{FFFD}"),
            ])
        #expect(
            tokens("--x:1e;@ a") == [
                .ident("--x"), .colon, .dimension("1", unit: "e"), .semicolon, .delim("@"), .whitespace, .ident("a"),
            ])
        #expect(tokens("\\\n") == [.delim("\\"), .whitespace])
    }

    @Test("§4.3.4: url( after a non-url ident, or url without (, is not a URL")
    func notURLFunction() {
        #expect(urls("a { b: urls(x.png); c: url x.png; d: my-url(y.png) }") == [])
        #expect(tokens("url(x)") == [.url("x")])
        #expect(tokens("url (x)") == [.ident("url"), .whitespace, .openParen, .ident("x"), .closeParen])
    }

    // MARK: Robustness

    @Test("Pathological input (1 MB): unclosed url(, comments, strings, blocks, escapes; completes")
    func pathologicalInputs() {
        let size = 1 << 20
        #expect(urls(String(repeating: "url(", count: size / 4)) == [])
        #expect(urls(String(repeating: "/*", count: size / 2)) == [])
        #expect(urls("a{b:url(x.png)}" + String(repeating: "/*", count: size / 2)) == ["x.png"])
        #expect(urls(String(repeating: "\"\\", count: size / 2)) == [])
        #expect(urls(String(repeating: "(", count: size) + "url(x.png)") == ["x.png"])
        #expect(urls(String(repeating: "{", count: size) + "@import 'x.css';") == [])
        #expect(urls(String(repeating: "\\", count: size)) == [])
        #expect(urls(String(repeating: "url( ", count: size / 5)) == [])
        #expect(urls(String(repeating: "@import url(", count: size / 12)) == [])
        // Each string runs to the next quote, so every other `image-set(` is the text of a string in one.
        let imageSets = urls(String(repeating: "image-set(\"", count: size / 11))
        #expect(imageSets.count == size / 11 / 2 && imageSets.allSatisfy { $0 == "image-set(" })
        #expect(urls(String(repeating: "url(a) ", count: size / 7)).count == size / 7)
        #expect(urls(String(repeating: "\\0", count: size / 2)) == [])
    }

    @Test("Random bytes, decoded lossily: never crash, and every reference found is non-empty")
    func randomBytes() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        // A byte alphabet that favours CSS syntax, so the tokenizer's paths are all reached.
        let syntax = Array(#"url(\"'()/*{}[];:@import image-set -\ 9e.%#"#.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1 << 20)
        for _ in 0..<(1 << 20) {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let pick = Int(truncatingIfNeeded: state >> 32)
            bytes.append(pick % 2 == 0 ? syntax[(pick >> 1) % syntax.count] : UInt8(truncatingIfNeeded: pick >> 8))
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let found = CSSReferences.inStylesheet(text) + CSSReferences.inDeclarations(text)
        #expect(found.allSatisfy { !$0.url.isEmpty })
        #expect(!text.isEmpty)
    }

    // MARK: Decoding (§3.2)

    @Test("§3.2: a UTF-8 BOM wins over Content-Type and is not part of the text")
    func utf8BOM() {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("a{b:url(café.png)}".utf8)
        let text = CSSReferences.decodeStylesheet(bytes, contentTypeCharset: "iso-8859-1", referrerCharset: nil)
        #expect(text == "a{b:url(café.png)}")
    }

    @Test("§3.2: UTF-16LE and UTF-16BE BOMs; an odd last byte is U+FFFD")
    func utf16BOMs() {
        let le: [UInt8] = [0xFF, 0xFE] + "é😀".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let be: [UInt8] = [0xFE, 0xFF] + "é😀".utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        #expect(CSSReferences.decodeStylesheet(le, contentTypeCharset: "utf-8", referrerCharset: nil) == "é😀")
        #expect(CSSReferences.decodeStylesheet(be, contentTypeCharset: nil, referrerCharset: "utf-8") == "é😀")
        #expect(
            CSSReferences.decodeStylesheet(be + [0x41], contentTypeCharset: nil, referrerCharset: nil) == "é😀\u{FFFD}")
        // A lead surrogate and a byte left at the end are one error (Encoding Standard, UTF-16
        // decoder's end-of-queue step); found by FuzzPageReferences.
        #expect(
            CSSReferences.decodeStylesheet([0x00, 0xD8, 0x41], contentTypeCharset: "utf-16le", referrerCharset: nil)
                == "\u{FFFD}")
    }

    @Test("§3.2: Content-Type charset (Latin-1 is windows-1252): url(café.png) decodes to café.png")
    func contentTypeCharset() {
        let bytes: [UInt8] = Array("a{b:url(caf".utf8) + [0xE9] + Array(".png)}".utf8)
        let text = CSSReferences.decodeStylesheet(bytes, contentTypeCharset: "ISO-8859-1", referrerCharset: "utf-8")
        #expect(CSSReferences.inStylesheet(text) == [url("café.png")])
        #expect(
            CSSReferences.decodeStylesheet([0x80, 0x81, 0x9F], contentTypeCharset: " latin1 ", referrerCharset: nil)
                == "€\u{81}Ÿ")
        #expect(CSSReferences.decodeStylesheet([0xE9], contentTypeCharset: "\"us-ascii\"", referrerCharset: nil) == "é")
    }

    @Test("§3.2: Content-Type charset wins over @charset")
    func contentTypeBeatsCharsetRule() {
        let bytes: [UInt8] = Array(#"@charset "windows-1251";"#.utf8) + [0xC3, 0xA9]
        #expect(CSSReferences.decodeStylesheet(bytes, contentTypeCharset: "utf-8", referrerCharset: nil).hasSuffix("é"))
        #expect(CSSReferences.decodeStylesheet(bytes, contentTypeCharset: nil, referrerCharset: nil).hasSuffix("Г©"))
    }

    @Test("§3.2: @charset at the very start; UTF-16 labels there mean UTF-8; anything else must match exactly")
    func charsetRule() {
        let rule = Array(#"@charset "iso-8859-2";"#.utf8)
        #expect(
            CSSReferences.decodeStylesheet(rule + [0xA3], contentTypeCharset: nil, referrerCharset: nil).hasSuffix("Ł"))
        let utf16 = Array(#"@charset "utf-16";"#.utf8) + [0xC3, 0xA9]
        #expect(
            CSSReferences.decodeStylesheet(utf16, contentTypeCharset: nil, referrerCharset: "windows-1252").hasSuffix(
                "é"))
        // Not at the very start, a single quote, or two spaces: not a @charset rule; the referrer decides.
        for prefix in [#" @charset "iso-8859-2";"#, "@charset 'iso-8859-2';", #"@charset  "iso-8859-2";"#] {
            let text = CSSReferences.decodeStylesheet(
                Array(prefix.utf8) + [0xE9], contentTypeCharset: nil, referrerCharset: "latin1")
            #expect(text.hasSuffix("é"))
        }
        #expect(
            CSSReferences.decodeStylesheet(
                Array(#"@charset "iso-8859-2""#.utf8) + [0xA3], contentTypeCharset: nil, referrerCharset: "cp1252"
            ).hasSuffix("£"))
        // Any ASCII byte but a quote may be in the label; white space around it is trimmed.
        let tab = Array("@charset \"\twindows-1250\n\";".utf8) + [0xC6]
        #expect(CSSReferences.decodeStylesheet(tab, contentTypeCharset: nil, referrerCharset: nil).hasSuffix("Ć"))
    }

    @Test("§3.2: unknown labels fall through: Content-Type, then @charset, then the referrer, then UTF-8")
    func unknownLabelsFallThrough() {
        let rule = Array(#"@charset "bogus";"#.utf8) + [0xE9]
        #expect(
            CSSReferences.decodeStylesheet(rule, contentTypeCharset: "nope", referrerCharset: "windows-1250").hasSuffix(
                "é"))
        let bytes: [UInt8] = [0xC8]
        #expect(
            CSSReferences.decodeStylesheet(bytes, contentTypeCharset: "x-unknown", referrerCharset: "windows-1250")
                == "Č")
        #expect(CSSReferences.decodeStylesheet(bytes, contentTypeCharset: nil, referrerCharset: "cp1251") == "И")
        #expect(
            CSSReferences.decodeStylesheet(bytes, contentTypeCharset: nil, referrerCharset: "klingon") == "\u{FFFD}")
    }

    @Test("§3.2: the fallback is UTF-8, and invalid UTF-8 decodes with U+FFFD")
    func utf8Fallback() {
        #expect(
            CSSReferences.decodeStylesheet(Array("café".utf8), contentTypeCharset: nil, referrerCharset: nil) == "café")
        #expect(
            CSSReferences.decodeStylesheet(
                [0x61, 0xFF, 0x62, 0xE2, 0x82], contentTypeCharset: nil, referrerCharset: nil) == "a\u{FFFD}b\u{FFFD}")
        #expect(CSSReferences.decodeStylesheet([], contentTypeCharset: nil, referrerCharset: nil) == "")
    }
}
