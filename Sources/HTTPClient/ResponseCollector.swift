#if os(Linux)
@_spi(Wire) import HTTPWire

/// A receiver that keeps what it gets, and stops at the head, or once it has
/// `stopAfterBodyBytes` bytes, when asked (for the fuzzer, `purge` and the tests).
package final class ResponseCollector: UpstreamReceiver {
    package private(set) var heads: [UpstreamResponseHead] = []
    package private(set) var body: [UInt8] = []
    private let stopAtHead: Bool
    private let stopAfterBodyBytes: Int?

    package init(stopAtHead: Bool = false, stopAfterBodyBytes: Int? = nil) {
        self.stopAtHead = stopAtHead
        self.stopAfterBodyBytes = stopAfterBodyBytes
    }

    package func receive(head: UpstreamResponseHead) -> Bool {
        heads.append(head)
        return !stopAtHead
    }

    package func receive(body: UnsafeRawBufferPointer) -> Bool {
        self.body += body
        return self.body.count < stopAfterBodyBytes ?? .max
    }
}
#endif
