#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One object per thread, made on the thread's first use and released when the thread exits:
/// for OpenSSL contexts, which one thread may reuse from call to call but two must never share.
final class PerThread<Value: AnyObject>: @unchecked Sendable {
    private let key: pthread_key_t
    private let make: @Sendable () -> Value

    init(_ make: @escaping @Sendable () -> Value) {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
        }
        self.key = key
        self.make = make
    }

    /// The calling thread's object.
    var current: Value {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<Value>.fromOpaque(existing).takeUnretainedValue()
        }
        let made = make()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }
}
