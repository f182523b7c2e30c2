import CacheSystem
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Whole writes and the environment")
struct FileDescriptorTests {
    @Test("writeAll writes every byte, more than a pipe takes at once, while a reader drains it")
    func writesEverything() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let readEnd = ends[0]
        let received = Locked<[UInt8]>([])
        let reader = try SystemThread.joinable(name: "drain") {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                received.withLock { $0 += buffer[..<count] }
            }
        }
        let failure = bytes.withUnsafeBytes { FileDescriptor.writeAll(ends[1], $0) }
        close(ends[1])
        #expect(failure == nil)
        reader.join()
        #expect(received.withLock { $0 } == bytes)
    }

    @Test("a write that fails returns its errno")
    func failureIsErrno() {
        let failure = [UInt8]("x".utf8).withUnsafeBytes { FileDescriptor.writeAll(-1, $0) }
        #expect(failure == EBADF)
    }

    @Test("environment reads a variable, nil when unset")
    func environment() {
        setenv("HTTPCACHE_FILE_DESCRIPTOR_TEST", "on", 1)
        #expect(FileDescriptor.environment("HTTPCACHE_FILE_DESCRIPTOR_TEST") == "on")
        unsetenv("HTTPCACHE_FILE_DESCRIPTOR_TEST")
        #expect(FileDescriptor.environment("HTTPCACHE_FILE_DESCRIPTOR_TEST") == nil)
    }
}
