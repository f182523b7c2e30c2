import CacheSystem
import Foundation

/// A JSON value whose objects keep their keys in the order written, so `--json` output reads
/// naturally (`status` first) and is the same from run to run.
enum JSONValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int64) { self = .integer(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    /// An integer.
    static func int(_ value: some BinaryInteger) -> JSONValue { .integer(Int64(value)) }

    /// `value`, or `null` when it is `nil`.
    static func optional(_ value: JSONValue?) -> JSONValue { value ?? .null }

    /// The value as JSON text on one line (RFC 8259).
    var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .string(let value): JSONString.append(value, to: &output)
        case .integer(let value): output += String(value)
        case .number(let value):
            // JSON has no NaN or infinity.
            output += value.isFinite ? String(value) : "null"
        case .bool(let value): output += value ? "true" : "false"
        case .null: output += "null"
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output += "," }
                JSONString.append(key, to: &output)
                output += ":"
                value.write(to: &output)
            }
            output += "}"
        }
    }
}
