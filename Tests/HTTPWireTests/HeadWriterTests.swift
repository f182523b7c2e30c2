import CacheSemantics
@_spi(Wire) import HTTPWire
import Testing

/// What HTTPWire writes, read back by HTTPWire's own parsers: the one codec agrees with itself.
@Suite("HeadWriter and ChunkedEncoder (RFC 9112 §3, §4, §5, §7.1)")
struct HeadWriterTests {
    @Test("A request head written is read back as written (RFC 9112 §3, §5)")
    func requestHeadRoundTrip() {
        var head: [UInt8] = []
        HeadWriter.appendRequestLine(method: "PURGE", target: "http://a.test/x?y", to: &head)
        HeadWriter.appendField(name: "Host", value: "a.test", to: &head)
        HeadWriter.appendField(name: "X-Empty", value: "", to: &head)
        HeadWriter.appendEnd(to: &head)
        #expect(
            String(decoding: head, as: UTF8.self)
                == "PURGE http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\nX-Empty:\r\n\r\n")
        var parser = RequestHeadParser(maxHeaderBytes: 1024, maxFieldCount: 10, maxBodyBytes: 0)
        head.withUnsafeBufferPointer { buffer in
            guard case .complete = parser.parse(buffer.baseAddress!, count: buffer.count) else {
                Issue.record("the head written is not read as complete")
                return
            }
            let parsed = parser.parsedHead(buffer.baseAddress!)
            #expect(parsed.method == "PURGE")
            #expect(parsed.target == "http://a.test/x?y")
            #expect(
                Array(parsed.fields) == [
                    HeaderField(name: "Host", value: "a.test"), HeaderField(name: "X-Empty", value: ""),
                ])
        }
    }

    @Test("A status line carries RFC 9110 §15's reason phrase, or only its SP for a code without one (RFC 9112 §4)")
    func statusLines() {
        func line(_ status: Int, _ reason: String? = nil) -> String {
            var bytes: [UInt8] = []
            HeadWriter.appendStatusLine(status: status, reason: reason, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(line(304) == "HTTP/1.1 304 Not Modified\r\n")
        #expect(line(413) == "HTTP/1.1 413 Content Too Large\r\n")
        #expect(line(599) == "HTTP/1.1 599 \r\n")
        #expect(line(200, "Fine") == "HTTP/1.1 200 Fine\r\n")
        #expect(reasonPhrase(418) == nil)  // §15.5.19: unused
    }

    @Test("A response written with a chunked body is framed back to the same body (RFC 9112 §7.1)")
    func chunkedRoundTrip() {
        var bytes: [UInt8] = []
        HeadWriter.appendStatusLine(status: 200, to: &bytes)
        HeadWriter.appendField(name: "Transfer-Encoding", value: "chunked", to: &bytes)
        HeadWriter.appendEnd(to: &bytes)
        let pieces = [Array(repeating: UInt8(ascii: "a"), count: 300), [], Array("hello".utf8)]
        for piece in pieces { ChunkedEncoder.appendChunk(piece, to: &bytes) }
        ChunkedEncoder.appendEnd(to: &bytes)
        let framed = Framing(bytes, ends: [bytes.count], method: "GET", closed: false, limits: ResponseFramer.Limits())
        #expect(framed.head?.status == 200)
        #expect(framed.head?.reason == "OK")
        #expect(framed.body == String(decoding: pieces.joined(), as: UTF8.self))
        #expect(framed.isComplete)
        #expect(framed.consumed == bytes.count)
    }
}
