/// Writes text into a buffer known to be large enough, as `String(unsafeUninitializedCapacity:)`
/// gives one: a header value made of a few parts is written at once, where appending them to a
/// `String` goes through its general path part by part.
package struct TextWriter {
    let buffer: UnsafeMutableBufferPointer<UInt8>
    /// The bytes written so far.
    package private(set) var count = 0

    package init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    package mutating func append(_ literal: StaticString) {
        append(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    package mutating func append(_ text: String) {
        ASCII.withUTF8(text) { append($0) }
    }

    package mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        _ = UnsafeMutableBufferPointer(rebasing: buffer[count...]).initialize(fromContentsOf: bytes)
        count += bytes.count
    }

    /// `number` in decimal: at most 20 bytes.
    package mutating func append(_ number: Int) {
        if number < 0 {
            buffer[count] = UInt8(ascii: "-")
            count += 1
        }
        var magnitude = number.magnitude
        let start = count
        repeat {
            buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
            count += 1
        } while magnitude > 0
        buffer[start..<count].reverse()
    }
}
