import CacheSystem
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("errno texts: the system's words, once")
struct SystemErrorTests {
    @Test("errnoText is strerror's text")
    func errnoTextIsTheSystemsText() {
        #expect(errnoText(ENOENT) == "No such file or directory")
        #expect(errnoText(EADDRINUSE) == "Address already in use")
    }

    @Test("errnoText() reads errno as it is at the call")
    func defaultIsErrno() {
        errno = EACCES
        #expect(errnoText() == "Permission denied")
    }

    @Test("a SystemError names the call, the reason and the number")
    func description() {
        let error = SystemError("bind(127.0.0.1:8080)", code: EADDRINUSE)
        #expect(error.reason == "Address already in use")
        #expect(error.description == "bind(127.0.0.1:8080) failed: Address already in use (errno \(EADDRINUSE))")
    }
}
