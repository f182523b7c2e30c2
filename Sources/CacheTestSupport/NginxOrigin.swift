import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// nginx (Debian's `nginx-light`, installed by `scripts/setup --tests`) serving static files
/// over TLS on 127.0.0.1: an https origin we did not write, for the client and the proxy to be
/// checked against. One process (`master_process off`), so it runs as the test's user and reads
/// the test's files; its access log counts the requests it answered.
///
/// Paths under `/fresh/` carry `Cache-Control: max-age=600`, paths under `/revalidate/`
/// `Cache-Control: no-cache`; every file gets nginx's own `ETag` and `Last-Modified`, so a
/// conditional request is answered `304` by nginx's rules, not ours. A `PUT` under `/upload/`
/// stores its body as that file (nginx's dav module), so a request body can be read back; files
/// under `/trailers/` come with a trailer field, `X-Checked: yes`.
///
/// With `http2`, the TLS listener offers `h2` with ALPN, and a second port speaks cleartext
/// HTTP/2 with prior knowledge (RFC 9113 §3.3): an HTTP/2 server we did not write.
public final class NginxOrigin {
    /// Where the tests expect nginx.
    public static let command = "/usr/sbin/nginx"

    /// Its TLS port on 127.0.0.1.
    public let port: UInt16
    /// With `http2`: its cleartext HTTP/2 port on 127.0.0.1 (the TLS port + 1); else nil.
    public let cleartextHTTP2Port: UInt16?
    private let directory: TemporaryDirectory
    private let process: ChildProcess

    /// Why nginx could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts nginx with `leaf`'s certificate, serving `files` (path → body); with `http2`,
    /// HTTP/2 too (see above).
    /// - Returns: nil, after saying so, when nginx is not installed.
    public static func start(
        tls leaf: TestCertificates.Leaf, files: [String: [UInt8]], http2: Bool = false
    ) throws(Failure) -> NginxOrigin? {
        guard FileManager.default.isExecutableFile(atPath: command) else {
            print("skipped: \(command) is missing (scripts/setup --tests installs nginx-light)")
            return nil
        }
        var lastError = ""
        // A port another process takes between our choice and nginx's bind is chosen again.
        for _ in 0..<10 {
            let port = UInt16.random(in: 30_000..<40_000)
            do {
                return try NginxOrigin(port: port, leaf: leaf, files: files, http2: http2)
            } catch {
                lastError = error.description
            }
        }
        throw Failure(description: lastError)
    }

    private init(port: UInt16, leaf: TestCertificates.Leaf, files: [String: [UInt8]], http2: Bool) throws(Failure) {
        self.port = port
        cleartextHTTP2Port = http2 ? port + 1 : nil
        directory = TemporaryDirectory("nginx-origin")
        let root = directory.path + "/www"
        for (path, body) in files {
            let file = root + path
            try? FileManager.default.createDirectory(
                atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: file, contents: Data(body)) else {
                throw Failure(description: "cannot write \(file)")
            }
        }
        let temporary = directory.path + "/temp"
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(directory.path)/nginx.pid;
            error_log \(directory.path)/error.log;
            events { worker_connections 256; }
            http {
                access_log \(directory.path)/access.log;
                client_body_temp_path \(temporary)/body;
                proxy_temp_path \(temporary)/proxy;
                fastcgi_temp_path \(temporary)/fastcgi;
                uwsgi_temp_path \(temporary)/uwsgi;
                scgi_temp_path \(temporary)/scgi;
                default_type application/octet-stream;
                server {
                    listen 127.0.0.1:\(port) ssl\(http2 ? " http2" : "");
                    \(cleartextHTTP2Port.map { "listen 127.0.0.1:\($0) http2;" } ?? "")
                    server_name localhost;
                    ssl_certificate \(leaf.certificateFile);
                    ssl_certificate_key \(leaf.keyFile);
                    ssl_protocols TLSv1.2 TLSv1.3;
                    root \(root);
                    location /fresh/ { add_header Cache-Control "max-age=600"; }
                    location /revalidate/ { add_header Cache-Control "no-cache"; }
                    location /upload/ { dav_methods PUT; create_full_put_path on; }
                    location /trailers/ { add_trailer X-Checked "yes"; }
                }
            }
            """
        try? FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let file = directory.path + "/nginx.conf"
        guard FileManager.default.createFile(atPath: file, contents: Data(configuration.utf8)) else {
            throw Failure(description: "cannot write \(file)")
        }
        process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: Self.command)
        process.arguments = ["-c", file, "-p", directory.path, "-e", directory.path + "/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot start \(Self.command): \(error)")
        }
        // Listening once it has written its pid file (nginx does after binding every port) and
        // a TCP connection succeeds (10 s at most); exited: it could not bind. A connection alone
        // proves nothing: another listener of this process may hold the port (the kernel picks
        // its ports from the same range), and nginx, failing to bind it, exits a moment later.
        for _ in 0..<200 {
            guard process.isRunning else { break }
            if FileManager.default.fileExists(atPath: directory.path + "/nginx.pid"), Self.accepts(port) { return }
            usleep(50_000)
        }
        stop()
        let log = (try? String(contentsOfFile: directory.path + "/error.log", encoding: .utf8)) ?? ""
        throw Failure(description: "nginx did not listen on 127.0.0.1:\(port): \(log.suffix(500))")
    }

    /// The requests nginx answered so far, one access-log line each.
    ///
    /// nginx logs a request after it sent the response's last byte, so a client holding the
    /// response may look before the line is written: to count what a client received, use
    /// ``requests(atLeast:)``.
    public var requests: [String] {
        let log = (try? String(contentsOfFile: directory.path + "/access.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map(String.init)
    }

    /// The access log once it holds at least `count` lines, or as it is after 5 s.
    public func requests(atLeast count: Int) -> [String] {
        for _ in 0..<500 {
            let lines = requests
            if lines.count >= count { return lines }
            usleep(10_000)
        }
        return requests
    }

    /// The URL of `path` on this origin, by the name its certificate covers.
    public func url(_ path: String) -> String {
        "https://localhost:\(port)\(path)"
    }

    /// Kills nginx and waits for it.
    public func stop() {
        process.send(signal: SIGKILL)
        process.waitUntilExit()
    }

    private static func accepts(_ port: UInt16) -> Bool {
        guard case .success(let fd) = Socket.connected(host: "127.0.0.1", port: port, timeout: 1) else { return false }
        close(fd)
        return true
    }
}
