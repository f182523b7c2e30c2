import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where an option's value in effect comes from (`httpcache serve --check-config`).
enum OptionSource: Sendable, Equatable {
    case flag
    case file(path: String, line: Int)
    case environment(String)
    case `default`

    var description: String {
        switch self {
        case .flag: return "command line"
        case .file(let path, let line): return "\(path):\(line)"
        case .environment(let name): return "$\(name)"
        case .default: return "default"
        }
    }
}

extension ConfigFile {
    /// Reads and parses the file at `path`.
    /// - Throws: a usage ``Failure`` of `command`: `PATH:LINE: what is wrong; what to write`,
    ///   or that the file cannot be read.
    static func load(_ path: String, command: String) throws(Failure) -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .usage(command, "cannot read the configuration file \(path): \(errnoText()); name a readable file")
        }
        do {
            return try ConfigFile(parsing: Array(data))
        } catch {
            throw .usage(command, "\(path):\(error.line): \(error.message)")
        }
    }

    /// The settings as `specs`' options, keyed by canonical name (`origin` is `--origin`): each
    /// value option's values, each flag set to `true`, and the line each comes from.
    /// - Throws: a usage ``Failure`` `PATH:LINE: …` for a key that is no option (with the
    ///   nearest one's name), `config` itself, or a value of the wrong kind.
    func options(_ specs: [OptionSpec], path: String, command: String) throws(Failure) -> (
        values: [String: [String]], flags: Set<String>, lines: [String: Int]
    ) {
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var lines: [String: Int] = [:]
        for setting in settings {
            func problem(_ message: String) -> Failure { .usage(command, "\(path):\(setting.line): \(message)") }
            let key = setting.key
            guard let spec = specs.first(where: { $0.names.contains("--" + key) }),
                !ServeCommand.commandLineOnly.contains(spec.names[0])
            else {
                if ServeCommand.commandLineOnly.contains("--" + key) {
                    throw problem("\(key) is given on the command line only, not in a configuration file; remove it")
                }
                let names = specs.compactMap { spec in
                    spec.names.first { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) }
                }
                let hint = Self.nearest(to: key, among: names).map { "did you mean \($0)? " } ?? ""
                throw problem("unknown key \(key); \(hint)keys are serve's long options without --")
            }
            let canonical = spec.names[0]
            lines[canonical] = setting.line
            switch (spec.takesValue, setting.value) {
            case (false, .boolean(let on)):
                if on { flags.insert(canonical) }
            case (false, let value):
                throw problem("\(key) is a switch, not \(value.kind): write \(key) = true (or false)")
            case (true, .string(let text)):
                values[canonical] = [text]
            case (true, .integer(let number)):
                values[canonical] = [String(number)]
            case (true, .strings(let texts)) where spec.repeats:
                values[canonical] = texts
            case (true, .strings):
                throw problem("\(key) takes one value, not an array: write \(key) = \"...\"")
            case (true, .boolean):
                throw problem("\(key) takes a value, not true or false: write \(key) = \"...\"")
            }
        }
        return (values, flags, lines)
    }

    /// One line when the file holds `admin-token` and others may read it; nil otherwise.
    func secretWarning(path: String) -> String? {
        guard settings.contains(where: { $0.key == "admin-token" }) else { return nil }
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & 0o007 != 0 else { return nil }
        return
            "warning: \(path) holds admin-token and others can read it (mode \(String(status.st_mode & 0o777, radix: 8))); "
            + "run chmod o-rwx \(path)"
    }

    /// The name in `names` closest to `key` (at most a third of its letters apart), for "did you mean".
    static func nearest(to key: String, among names: [String]) -> String? {
        let scored = names.map { ($0, editDistance(Array(key.utf8), Array($0.utf8))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, key.utf8.count / 3) else { return nil }
        return best.0
    }

    /// Levenshtein distance between two byte strings.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var row = [i + 1]
            for (j, y) in b.enumerated() {
                row.append(min(previous[j + 1] + 1, row[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = row
        }
        return previous[b.count]
    }
}

extension ParsedArguments {
    /// These arguments over the options `file` gives: an option on the command line replaces
    /// the file's (all its values, for one given several times); a flag set in either is set.
    func overlaying(
        _ file: (values: [String: [String]], flags: Set<String>, lines: [String: Int]), path: String
    ) -> (arguments: ParsedArguments, sources: [String: OptionSource]) {
        var merged = self
        var sources: [String: OptionSource] = [:]
        for option in values.keys { sources[option] = .flag }
        for option in flags { sources[option] = .flag }
        for (option, given) in file.values where merged.values[option] == nil { merged.values[option] = given }
        merged.flags.formUnion(file.flags)
        // A switch the file sets to false is still the file's word.
        for (option, line) in file.lines where sources[option] == nil {
            sources[option] = .file(path: path, line: line)
        }
        return (merged, sources)
    }
}
