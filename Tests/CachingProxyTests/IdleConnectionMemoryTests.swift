#if os(Linux)
import Glibc
@_spi(Wire) import HTTPWire
import Testing

@testable import CachingProxy

@Suite("Proxy server: an idle keep-alive connection holds no buffers")
struct IdleConnectionMemoryTests {
    @Test("the output queue gives its buffer back once everything queued is sent")
    func outputBufferGivenBack() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { for fd in fds { close(fd) } }
        var queue = OutputQueue()
        queue.append("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" as StaticString)
        queue.append([UInt8]("hello".utf8), accounted: false)
        #expect(queue.holdsBuffer)
        let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: 64)
        defer { vectors.deallocate() }
        var accountedSent = 0
        guard case .done = queue.flush(fds[0], vectors, accountedSent: &accountedSent) else {
            Issue.record("the queue was not flushed whole")
            return
        }
        #expect(queue.isEmpty)
        #expect(!queue.holdsBuffer)
        var received = [UInt8](repeating: 0, count: 100)
        let count = read(fds[1], &received, received.count)
        #expect(String(decoding: received.prefix(max(0, count)), as: UTF8.self).hasSuffix("\r\n\r\nhello"))
    }

    @Test("a busy connection's queue keeps its buffer through flushes until it is told not to")
    func keptOutputBuffer() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { for fd in fds { close(fd) } }
        let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: 64)
        defer { vectors.deallocate() }
        var queue = OutputQueue()
        queue.keepsBuffer = true
        var received = [UInt8](repeating: 0, count: 100)
        for word in ["first", "second"] {
            queue.append(word)
            var accountedSent = 0
            guard case .done = queue.flush(fds[0], vectors, accountedSent: &accountedSent) else {
                Issue.record("the queue was not flushed whole")
                return
            }
            #expect(queue.isEmpty)
            #expect(queue.holdsBuffer, "the kept buffer was given back")
            let count = read(fds[1], &received, received.count)
            #expect(String(decoding: received.prefix(max(0, count)), as: UTF8.self) == word)
        }
        queue.keepsBuffer = false
        #expect(!queue.holdsBuffer, "the empty queue kept its buffer once no longer told to")
        // Not kept while bytes wait: they are given back once sent.
        queue.append("third")
        queue.keepsBuffer = true
        queue.keepsBuffer = false
        #expect(queue.holdsBuffer && queue.count == 5)
        var accountedSent = 0
        _ = queue.flush(fds[0], vectors, accountedSent: &accountedSent)
        #expect(!queue.holdsBuffer)
    }

    @Test("the input buffer is given back once nothing is left in it")
    func inputBufferGivenBack() {
        var state = ConnectionState(parser: RequestHeadParser(maxHeaderBytes: 1024, maxFieldCount: 10, maxBodyBytes: 0))
        #expect(state.prepareInput(limit: 16_384) == 4096)
        state.inputEnd = 10  // ten bytes read ...
        state.shrinkInputIfIdle()
        #expect(state.input != nil)  // ... and not consumed: kept
        state.inputStart = 10  // consumed
        state.shrinkInputIfIdle()
        #expect(state.input == nil)
        #expect(state.inputCapacity == 0)
    }
}
#endif
