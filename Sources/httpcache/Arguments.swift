/// One option a subcommand accepts.
struct OptionSpec: Sendable {
    /// Every spelling, e.g. `["-H", "--header"]`; the first is the canonical name results are
    /// keyed by.
    var names: [String]
    /// Whether the option takes a value (`-H 'Name: value'`) or is a flag (`-i`).
    var takesValue: Bool
    /// Whether every value given counts (`--tls-cert A --tls-cert B`), rather than the last; a
    /// configuration file gives them as an array.
    var repeats = false

    /// A flag such as `-i` or `--json`.
    static func flag(_ names: String...) -> OptionSpec { OptionSpec(names: names, takesValue: false) }
    /// An option with a value such as `-o FILE`.
    static func value(_ names: String...) -> OptionSpec { OptionSpec(names: names, takesValue: true) }
    /// An option given once per value, such as `--tls-cert FILE`.
    static func values(_ names: String...) -> OptionSpec { OptionSpec(names: names, takesValue: true, repeats: true) }
}

/// A subcommand's arguments, parsed by hand: options (in any order, before or after the
/// positional arguments), their values and the positional arguments.
///
/// Accepted forms: `-o FILE`, `-oFILE` (single-letter options), `--output FILE`,
/// `--output=FILE`; `--` ends the options. `-h` and `--help` are recognised everywhere.
struct ParsedArguments: Sendable {
    /// The subcommand, for messages.
    var command: String
    /// Values of options that take one, by canonical name, in the order given.
    var values: [String: [String]] = [:]
    /// The flags given, by canonical name.
    var flags: Set<String> = []
    /// The arguments that are not options.
    var positionals: [String] = []
    /// Whether `-h` or `--help` was given.
    var wantsHelp = false

    /// Parses `arguments` (those after the subcommand's name) against `specs`.
    ///
    /// - Throws: ``Failure`` with ``ExitCode/usage`` for an unknown option, a missing value or a
    ///   value given to a flag.
    init(command: String, arguments: [String], specs: [OptionSpec]) throws(Failure) {
        self.command = command
        var index = 0
        var optionsEnded = false
        func spec(named name: String) -> OptionSpec? { specs.first { $0.names.contains(name) } }
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                wantsHelp = true
                continue
            }
            var name = argument
            var attached: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                attached = String(argument[argument.index(after: equals)...])
            } else if !argument.hasPrefix("--"), argument.count > 2, spec(named: argument) == nil {
                // -XPOST, -oFILE: a single-letter option with its value attached.
                name = String(argument.prefix(2))
                attached = String(argument.dropFirst(2))
            }
            guard let option = spec(named: name) else {
                throw .usage(command, "unknown option '\(argument)'")
            }
            let canonical = option.names[0]
            if option.takesValue {
                if let attached {
                    values[canonical, default: []].append(attached)
                } else {
                    guard index < arguments.count else { throw .usage(command, "\(name) needs a value") }
                    values[canonical, default: []].append(arguments[index])
                    index += 1
                }
            } else {
                guard attached == nil else { throw .usage(command, "\(name) takes no value") }
                flags.insert(canonical)
            }
        }
    }

    /// Whether the flag `name` (canonical) was given.
    func has(_ name: String) -> Bool { flags.contains(name) }

    /// The last value given to the option `name` (canonical), if any.
    func value(_ name: String) -> String? { values[name]?.last }

    /// Every value given to the option `name` (canonical), in order.
    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// The positional arguments, checked to number between `minimum` and `maximum`.
    ///
    /// - Parameter what: How to name them in a message, e.g. `"URL"`.
    func positionals(_ what: String, minimum: Int, maximum: Int) throws(Failure) -> [String] {
        if positionals.count < minimum { throw .usage(command, "missing \(what)") }
        if positionals.count > maximum {
            let extra = positionals.dropFirst(maximum).map { "'\($0)'" }.joined(separator: " ")
            throw .usage(command, "unexpected argument \(extra)")
        }
        return positionals
    }
}
