import CacheSystem
import CacheTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS client connection to a loopback server through the blocking layer, as a client
/// thread uses it: connect, handshake, send, read (CacheTLS's tests, and the proxy's TLS
/// listener's).
public final class TLSClientSocket {
    public let fd: Int32
    public let tls: TLSConnection

    public struct ConnectError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Connects to 127.0.0.1:`port` and does the handshake, asking for `host`.
    /// - Throws: ``TLSError`` when the handshake fails, ``ConnectError`` when the connect does.
    public init(port: UInt16, host: String = "127.0.0.1", context: TLSClientContext) throws {
        let fd: Int32
        switch Socket.connected(host: "127.0.0.1", port: port, timeout: 10, blocking: false) {
        case .success(let connected): fd = connected
        case .failure(let failure): throw ConnectError(description: "connect to port \(port): \(failure)")
        }
        // The properties are set only once the handshake is done: a fully initialized object
        // that throws is still deinitialized, and its deinit would close `fd` a second time,
        // by then perhaps another thread's file (a key file read half-way, in one CI run).
        do {
            let tls = try context.connection(fd: fd, host: host, port: port)
            try tls.handshake(timeout: 20)
            self.fd = fd
            self.tls = tls
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// Sends `text` whole; false when sending failed.
    public func send(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { tls.send($0, stallTimeout: 20) } == nil
    }

    /// Reads until the connection ends: the bytes, and how it ended.
    public func readToEnd() -> (bytes: [UInt8], end: TLSConnection.Received) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let result = buffer.withUnsafeMutableBytes { tls.receive(into: $0, stallTimeout: 20) }
            guard case .bytes(let count) = result else {
                return (received, result)
            }
            received += buffer[0..<count]
        }
    }

    /// The next response with a `Content-Length` body (its head read a byte at a time, so what
    /// follows stays for the next call), as text; nil when the connection ended first.
    public func response() -> String? {
        var head = ""
        while !head.hasSuffix("\r\n\r\n") {
            guard let byte = read(exactly: 1) else { return nil }
            head += byte
        }
        let length =
            head.split(separator: "\r\n").lazy.compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].filter { $0 != " " && $0 != "\t" })
            }.first ?? 0
        guard length > 0 else { return head }
        return read(exactly: length).map { head + $0 }
    }

    /// Reads exactly `count` bytes (never more), or nil when the connection ended first.
    public func read(exactly count: Int) -> String? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: count)
        while received.count < count {
            let result = buffer.withUnsafeMutableBytes {
                tls.receive(
                    into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<(count - received.count)]), stallTimeout: 20)
            }
            guard case .bytes(let got) = result else { return nil }
            received += buffer[0..<got]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Waits up to `milliseconds` for the server to send something (or close).
    public func waitReadable(milliseconds: Int32) -> Bool {
        if tls.hasBufferedBytes { return true }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, milliseconds) > 0
    }
}
