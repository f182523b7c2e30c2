import Testing

@testable import httpcache

/// `serve --config FILE`'s TOML subset (TOML v1.0.0 where it overlaps): what it reads, what it
/// refuses (with the line and what to write), and that no bytes crash it.
@Suite struct ConfigFileTests {
    func parse(_ text: String) throws(ConfigFile.Problem) -> [ConfigFile.Setting] {
        try ConfigFile(parsing: Array(text.utf8)).settings
    }

    func problem(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> ConfigFile.Problem? {
        do {
            _ = try parse(text)
            Issue.record("parsed: \(text)", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    @Test("Every kind of value the subset has, comments and blank lines between")
    func valuesOfEachKind() throws {
        let settings = try parse(
            """
            # a comment line
              origin = "http://127.0.0.1:8081/a\\"b\\\\c\\u00e9\\t"   # after the value
            cache-dir='C:\\literal\\'

            loops = 1_000
            max-body = -4
            no-http2 = true
            forward = false
            tls-cert = [
                "a.pem",  # the first
                'b.pem',
            ]
            allow-destination = []
            """)
        #expect(
            settings.map(\.value) == [
                .string("http://127.0.0.1:8081/a\"b\\c\u{e9}\t"), .string("C:\\literal\\"), .integer(1000),
                .integer(-4), .boolean(true), .boolean(false), .strings(["a.pem", "b.pem"]), .strings([]),
            ])
        #expect(settings.map(\.line) == [2, 3, 5, 6, 7, 8, 9, 13])
        #expect(
            settings.map(\.key) == [
                "origin", "cache-dir", "loops", "max-body", "no-http2", "forward", "tls-cert", "allow-destination",
            ])
    }

    @Test("CRLF line ends, a byte order mark and a last line without a newline are read")
    func lineEndsAndByteOrderMark() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("a = 1 # one\r\nb = \"two\"\r\n\r\nc = true".utf8)
        let settings = try ConfigFile(parsing: bytes).settings
        #expect(settings.map(\.key) == ["a", "b", "c"])
        #expect(settings.map(\.line) == [1, 2, 4])
    }

    @Test(
        "What the subset refuses, each on its line, saying what to write instead",
        arguments: [
            ("[server]\nlisten = \"a\"", 1, "tables ([name]) are not supported"),
            ("a = 1\nserver.listen = \"a\"", 2, "dotted keys are not supported"),
            ("listen = \"a\"\n\nlisten = \"b\"", 3, "listen is set twice (first on line 1)"),
            ("origin = \"http://x\n", 1, "a string is not closed"),
            ("origin = \"\"\"x\"\"\"", 1, "multi-line strings are not supported"),
            ("name = \"a\\qb\"", 1, "unknown escape"),
            ("name = \"\\u12\"", 1, "needs 4 hex digits"),
            ("name = \"\\uD800\"", 1, "needs 4 hex digits"),
            ("tls-cert = [\"a\",\n\"b\"\n", 3, "the array of tls-cert is not closed"),
            ("tls-cert = [1, 2]", 1, "holds strings only"),
            ("tls-cert = [\"a\" \"b\"]", 1, "expected , or ]"),
            ("listen = 127.0.0.1:80", 1, "listen = \"127.0.0.1:80\""),
            ("idle-timeout = 1.5", 1, "numbers are integers"),
            ("loops = 01", 1, "is not a value"),
            ("loops = 99999999999999999999", 1, "is not a value"),
            ("name = {}", 1, "inline tables are not supported"),
            ("name =", 1, "name has no value"),
            ("name \"x\"", 1, "expected = after name"),
            ("= 4", 1, "expected a key"),
            ("a = 1 b = 2", 1, "unexpected 'b' after the value"),
            ("a = 1\n\nname = \"x\u{7}\"", 3, "control character"),
        ])
    func refused(text: String, line: Int, says: String) throws {
        let refusal = try #require(problem(text))
        #expect(refusal.line == line, "\(refusal)")
        #expect(refusal.message.contains(says), "\(refusal.message)")
        #expect(!refusal.message.contains("\n"))
    }

    @Test("Bytes that are not UTF-8 in a string or a comment are refused on their line")
    func notUTF8() throws {
        for bytes in [
            Array("a = 1\nname = \"".utf8) + [0xC3, 0x28] + Array("\"".utf8), Array("a = 1\n# ".utf8) + [0xFF],
        ] {
            let problem = try #require(throws: ConfigFile.Problem.self) { try ConfigFile(parsing: bytes) }
            #expect(problem.line == 2 && problem.message.contains("UTF-8"), "\(problem)")
        }
    }

    @Test("A value written back (for --check-config) reads as the same value, whatever its characters")
    func writtenValuesReadBack() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Unicode.Scalar] = [
            "a", "\"", "\\", "\n", "\t", "\r", "\u{0}", "\u{1F}", "\u{7F}", "é", "#", "'", "=", "[", " ",
        ]
        for _ in 0..<500 {
            let text = String(
                String.UnicodeScalarView(
                    (0..<Int.random(in: 0...12, using: &generator)).map { _ in
                        alphabet.randomElement(using: &generator)!
                    }))
            for value in [
                ConfigFile.Value.string(text), .strings([text, "x"]), .integer(Int64.random(in: .min ... .max)),
            ] {
                let settings = try parse("key = \(value.written)\n")
                #expect(settings.map(\.value) == [value], "\(value.written)")
            }
        }
    }

    @Test(
        "Random bytes and random cuts of a valid file: a setting list or a problem on a line of the file, never a crash"
    )
    func anyBytes() {
        var generator = SystemRandomNumberGenerator()
        let valid = Array(
            "# c\norigin = \"http://a\"\ntls-cert = [\n \"a\", # x\n 'b'\n]\nloops = 4\nno-http2 = true\n".utf8)
        let interesting = Array("\"'[]=#,\\\n\r\t .-_aZ09u{".utf8) + [0, 0x7F, 0xC3, 0xFF, 0xEF, 0xBB, 0xBF]
        for round in 0..<5000 {
            var bytes: [UInt8]
            switch round % 3 {
            case 0:
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            case 1:
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    interesting.randomElement(using: &generator)!
                }
            default:
                bytes = valid
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    let at = Int.random(in: 0..<bytes.count, using: &generator)
                    if Bool.random(using: &generator) {
                        bytes[at] = interesting.randomElement(using: &generator)!
                    } else {
                        bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...8, using: &generator)))
                    }
                    if bytes.isEmpty { break }
                }
            }
            let lines = bytes.filter { $0 == 0x0A }.count + 1
            do {
                _ = try ConfigFile(parsing: bytes)
            } catch {
                #expect((1...lines).contains(error.line), "line \(error.line) of \(lines): \(bytes)")
                #expect(!error.message.isEmpty && !error.message.contains("\n"), "\(bytes)")
            }
        }
    }

    // MARK: Onto serve's options

    func options(_ text: String) throws -> (values: [String: [String]], flags: Set<String>, lines: [String: Int]) {
        try ConfigFile(parsing: Array(text.utf8)).options(ServeCommand.specs, path: "/etc/h.conf", command: "serve")
    }

    func failure(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        do {
            _ = try options(text)
        } catch let failure as Failure {
            #expect(failure.code == .usage, sourceLocation: sourceLocation)
            return failure.message
        }
        Issue.record("accepted: \(text)", sourceLocation: sourceLocation)
        return ""
    }

    @Test(
        "Keys are the long options without --: values, numbers as their digits, switches, arrays for options given several times"
    )
    func keysAreOptions() throws {
        let mapped = try options(
            "origin = \"http://a\"\nloops = 4\nno-http2 = true\nforward = false\ntls-cert = [\"a\", \"b\"]\nredis-timeout = 50"
        )
        #expect(
            mapped.values == [
                "--origin": ["http://a"], "--loops": ["4"], "--tls-cert": ["a", "b"], "--redis-timeout": ["50"],
            ])
        #expect(mapped.flags == ["--no-http2"])
        #expect(mapped.lines["--forward"] == 4 && mapped.lines["--redis-timeout"] == 6)
    }

    @Test(
        "A key that is no option, or a value of the wrong kind: one line with the file, the line and what to write",
        arguments: [
            ("loops = 1\norign = \"x\"", "/etc/h.conf:2: unknown key orign; did you mean origin?"),
            ("tls-certs = [\"a\"]", "did you mean tls-cert?"),
            ("zzzzzzzz = 1", "unknown key zzzzzzzz; keys are"),
            ("no-http2 = \"yes\"", "no-http2 is a switch, not a string: write no-http2 = true (or false)"),
            ("forward = 1", "forward is a switch, not an integer"),
            ("origin = [\"http://a\"]", "origin takes one value, not an array: write origin = \"...\""),
            ("memory = true", "memory takes a value, not true or false"),
            ("config = \"other.conf\"", "config is given on the command line only"),
            ("check-config = \"other.conf\"", "check-config is given on the command line only"),
        ])
    func wrongKeysAndKinds(text: String, says: String) throws {
        let message = try failure(text)
        #expect(message.hasPrefix("serve: /etc/h.conf:"), "\(message)")
        #expect(message.contains(says), "\(message)")
    }

    @Test("The command line replaces the file's option, every value of a repeated one; switches add up")
    func commandLineOverFile() throws {
        let file = try options(
            "origin = \"http://file\"\ntls-cert = [\"f1\", \"f2\"]\nloops = 2\nmemory-only = true\nno-http2 = false")
        let commandLine = try ParsedArguments(
            command: "serve", arguments: ["--origin", "http://flag", "--tls-cert", "c1", "--no-http2"],
            specs: ServeCommand.specs)
        let (merged, sources) = commandLine.overlaying(file, path: "h.conf")
        #expect(merged.value("--origin") == "http://flag")
        #expect(merged.all("--tls-cert") == ["c1"])
        #expect(merged.value("--loops") == "2")
        #expect(merged.flags == ["--no-http2", "--memory-only"])
        #expect(sources["--origin"] == .flag && sources["--no-http2"] == .flag)
        #expect(sources["--loops"] == .file(path: "h.conf", line: 3))
        #expect(sources["--memory-only"] == .file(path: "h.conf", line: 4))
        #expect(sources["--max-body"] == nil)
    }

    @Test("did you mean: the nearest option name within a third of the key's length")
    func nearestName() {
        #expect(ConfigFile.nearest(to: "idle-timout", among: ["idle-timeout", "header-timeout"]) == "idle-timeout")
        #expect(ConfigFile.nearest(to: "xyz", among: ["idle-timeout"]) == nil)
        #expect(ConfigFile.editDistance(Array("kitten".utf8), Array("sitting".utf8)) == 3)
    }
}
