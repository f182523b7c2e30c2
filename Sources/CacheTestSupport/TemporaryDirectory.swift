import Foundation

/// A fresh directory under the system's temporary directory, removed when released.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's path.
    public let path: String

    /// Creates the directory (0700, whatever the umask: a cache directory in it must lie in
    /// a directory nobody else may write); `name` appears in its path for easier debugging.
    public init(_ name: String = "httpcache-test") {
        path = NSTemporaryDirectory() + "/\(name)-\(UInt64.random(in: 0...UInt64.max))"
        try? FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
