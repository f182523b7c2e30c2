import CacheTestSupport
import Foundation
import Testing

/// The cooperative pool has one thread per core and every async test of a run shares it: the
/// helpers that block refuse to run there (``requireOffPool(_:)``), so a test that would stall
/// the run fails at once, naming the call.
@Suite("Test support: blocking work is refused on the cooperative pool")
struct BlockingWorkTests {
    @Test("requireOffPool throws on the pool, saying what blocked and what to do; offPool and a thread of its own pass")
    func requireOffPoolRefusesOnlyThePool() async throws {
        let error = #expect(throws: BlockingCallOnPool.self) { try requireOffPool("RedisServer.start()") }
        #expect(error?.description.hasPrefix("RedisServer.start() blocks its thread") == true)
        #expect(error?.description.contains("`try await offPool { ... }`") == true)

        try await offPool { try requireOffPool("in offPool") }
        // Still on the executor's thread after a suspension inside offPool.
        try await offPool { () async throws in
            try await Task.sleep(for: .milliseconds(1))
            try requireOffPool("in offPool, after a suspension")
        }
        // A thread that runs no task (an origin's connection thread) may block.
        let allowed = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: (try? requireOffPool("on a thread")) != nil) }.start()
        }
        #expect(allowed)
    }
}

/// A pipe for a child's output is close-on-exec at both ends from the moment it exists: a child
/// another thread launches meanwhile cannot inherit it (and keep its reader from ever seeing the
/// end), while the child it is for gets it as its standard output, a `dup2`'d copy.
@Suite("Test support: pipes for children")
struct ChildPipeTests {
    @Test func aChildsPipeIsCloseOnExecAndStillCarriesItsOutput() async throws {
        try await offPool {
            let output = Pipe.forChild()
            for end in [output.fileHandleForReading, output.fileHandleForWriting] {
                #expect(fcntl(end.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0, "descriptor \(end.fileDescriptor)")
            }
            let child = Process()
            child.executableURL = URL(fileURLWithPath: "/bin/echo")
            child.arguments = ["through the pipe"]
            child.standardOutput = output
            try child.runSerialized()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            child.waitUntilExit()
            #expect(text == "through the pipe\n")
        }
    }
}
