#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed, with the `errno` it left: what socket, file and thread
/// plumbing throws, for its callers to put in words of their own.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call that failed, with what it was called on, e.g. `bind(127.0.0.1:8080)`.
    public var operation: String
    /// The `errno` value (or the error number the call returned, as `pthread_create` does).
    public var code: Int32

    /// - Parameters:
    ///   - operation: The call that failed, e.g. `listen(127.0.0.1:8080)`.
    ///   - code: Its error number; read `errno` before any other call can change it.
    public init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    /// The system's text for ``code``, e.g. `Address already in use`.
    public var reason: String { errnoText(code) }

    /// `bind(127.0.0.1:8080) failed: Address already in use (errno 98)`.
    public var description: String { "\(operation) failed: \(reason) (errno \(code))" }
}

/// The system's text for an `errno` value (`strerror`), e.g. `No such file or directory`.
///
/// - Parameter code: The error number; by default `errno` as it is at the call.
public func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
