import Foundation

/// A fresh directory under the system's temporary directory, removed when released.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's path.
    public let path: String

    /// Creates the directory; `name` appears in its path for easier debugging.
    public init(_ name: String = "httpcache-test") {
        path = NSTemporaryDirectory() + "/\(name)-\(UInt64.random(in: 0...UInt64.max))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
