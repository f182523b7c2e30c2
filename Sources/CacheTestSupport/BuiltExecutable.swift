import Foundation

/// An executable product built next to the test bundle (`StorageStress`, `httpcache`), for
/// tests that run real processes.
public enum BuiltExecutable {
    /// The path of the executable `name`, searched upwards from the running test bundle.
    public static func path(_ name: String) throws -> String {
        var starts: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            starts.append(URL(fileURLWithPath: exe))
        }
        if let main = Bundle.main.executableURL { starts.append(main) }
        starts.append(Bundle.main.bundleURL)
        if let first = CommandLine.arguments.first { starts.append(URL(fileURLWithPath: first)) }
        var tried: [String] = []
        for start in starts {
            // Linux: <bin>/Package.xctest; macOS: <bin>/Package.xctest/Contents/MacOS/Package.
            var directory = start.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent(name)
                tried.append(candidate.path)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw Missing(name: name, tried: tried)
    }

    /// The executable was not built.
    public struct Missing: Error, CustomStringConvertible {
        /// The executable's name.
        public var name: String
        /// Where it was looked for.
        public var tried: [String]

        public var description: String {
            "the \(name) executable was not found next to the test bundle (looked for "
                + "\(tried.joined(separator: ", "))); build it with `swift build --build-tests` before "
                + "`swift test --skip-build`"
        }
    }
}
