#if os(Linux)
import Foundation
import Glibc

/// The service manager's notification protocol (systemd's `sd_notify(3)`), written by hand so
/// that no libsystemd is needed: `KEY=VALUE` lines in one datagram to the unix socket named by
/// `$NOTIFY_SOCKET` (a path, or an abstract name when it starts with `@`). Without the
/// variable every call does nothing.
enum ServiceManager {
    /// The socket's address from `$NOTIFY_SOCKET`; nil when unset or unusable.
    static let socketName: String? = {
        guard let name = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], name.count > 1,
            name.hasPrefix("/") || name.hasPrefix("@")
        else { return nil }
        return name
    }()

    /// Sends `lines` (such as `["READY=1", "STATUS=serving"]`) in one datagram, waiting at most
    /// a second for room in the receiver's queue (never call it on an event loop).
    /// - Returns: whether the datagram went out (false without `$NOTIFY_SOCKET`).
    @discardableResult
    static func notify(_ lines: [String]) -> Bool {
        guard let name = socketName else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(name.utf8)
        // An abstract name (`@name`) is `\0name`, its length counted exactly, with no terminator.
        if path[0] == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.enumerated() { bytes[index] = byte }
        }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (path[0] == 0 ? 0 : 1)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let message = Array((lines.joined(separator: "\n") + "\n").utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes { bytes in
                    sendto(
                        descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), socketAddress,
                        socklen_t(length))
                }
            }
        }
        return sent == message.count
    }

    /// `MONOTONIC_USEC=…`: CLOCK_MONOTONIC now in microseconds, which systemd wants with
    /// `RELOADING=1` (`Type=notify-reload`).
    static var monotonicMicroseconds: String {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return "MONOTONIC_USEC=\(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000)"
    }

    /// Seconds between watchdog keep-alives: half of `$WATCHDOG_USEC` when the watchdog is on
    /// for this process (`$WATCHDOG_PID` unset or ours); nil otherwise.
    static var watchdogInterval: Double? {
        let environment = ProcessInfo.processInfo.environment
        guard socketName != nil, let text = environment["WATCHDOG_USEC"], let microseconds = Double(text),
            microseconds > 0
        else { return nil }
        if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
        return microseconds / 2_000_000
    }
}
#endif
