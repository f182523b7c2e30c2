import Testing

@testable import CacheSemantics

// The parsers and writers read a string's bytes where they are (`ASCII.withUTF8`), without the
// copy `String.withUTF8` makes its caller take: the bytes must be the string's UTF-8 whatever
// its form (empty, small enough to be kept inline, on the heap, a substring, not ASCII).
@Suite("A string's bytes read in place")
struct ASCIIBytesTests {
    @Test("every form of string and substring gives its UTF-8 bytes, in order, and the body's result")
    func bytesOfEveryForm() {
        let large = String(repeating: "max-age=60, ", count: 20)
        let strings = ["", "a", "fifteen-bytes!!", "sixteen-bytes!!!", large, "caf\u{E9} \u{1F600} na\u{EF}ve"]
        for string in strings {
            #expect(ASCII.withUTF8(string) { Array($0) } == Array(string.utf8), "\(string)")
            #expect(ASCII.withUTF8(string) { $0.count } == string.utf8.count)
        }
        let substrings = [large.dropFirst(3).prefix(40), large.suffix(5), large.prefix(0), Substring("abc")]
        for substring in substrings {
            #expect(ASCII.withUTF8(substring) { Array($0) } == Array(substring.utf8), "\(substring)")
        }
    }

    @Test("an error the body throws comes out of the call")
    func bodyErrorsPassThrough() {
        struct Refused: Error {}
        #expect(throws: Refused.self) { try ASCII.withUTF8("sixteen-bytes!!!") { _ in throw Refused() } }
    }
}
