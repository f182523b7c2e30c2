#if os(Linux)
// One client connection: its buffers and where it stands. Touched only on its loop's thread,
// except `shared`, which writers on other threads use under its lock.
@_spi(Wire) import HTTPWire
import CacheSystem
import CacheTLS
import Glibc

/// What a connection is doing (RFC 9112 §9: one request at a time, responses in order).
enum ConnectionPhase {
    /// A TLS connection's handshake, before its first request (RFC 8446 §2).
    case handshake
    /// Waiting for, or reading, a request head.
    case head
    /// Reading a request body.
    case body
    /// The handler has the request; its response is being produced.
    case handling
    /// The last response is queued: flush, half-close, drain input briefly, close (RFC 9112 §9.6).
    case closing
    /// Relaying bytes after a CONNECT.
    case tunnel
    /// Speaking HTTP/2 (RFC 9113): streams instead of one request at a time.
    case http2
}

/// How the current response's body goes on the wire.
enum ResponseBodyMode {
    /// No body may follow (HEAD, 1xx, 204, 304, or framing `.none`): writes are dropped.
    case discard
    /// `Content-Length`: this many bytes still to come.
    case length(Int64)
    /// Chunked (RFC 9112 §7.1).
    case chunked
    /// Delimited by closing the connection (HTTP/1.0 clients).
    case untilClose
}

/// The part of a connection that threads other than its loop touch (``Connection/shared``).
struct ConnectionShared {
    /// Body bytes written from other threads and not yet sent.
    var queuedBytes = 0
    /// Commands posted to the loop and not yet applied: later calls from the loop thread
    /// queue behind them so nothing is reordered.
    var inMailbox = 0
    /// The connection is closed.
    var gone = false
}

/// A request's responder and the connection it answers on: the request `sequence` of an
/// HTTP/1.1 connection, or one `stream` of an HTTP/2 one.
struct ResponseTarget {
    let connection: Connection
    let sequence: UInt64
    var stream: HTTP2Stream?

    /// What writers on other threads share with the loop for this answer.
    var shared: Locked<ConnectionShared> { stream?.shared ?? connection.shared }
}

final class Connection {
    let fd: Int32
    let generation: UInt32
    let peerIsLoopback: Bool
    /// The client's address (for access logs).
    let peerAddress: SocketAddress?
    /// Writers on other threads wait on it while too much of their response is queued.
    let shared = Locked(ConnectionShared())
    private let storage: UnsafeMutablePointer<ConnectionState>

    init(fd: Int32, generation: UInt32, peerIsLoopback: Bool, peerAddress: SocketAddress?, parser: RequestHeadParser) {
        self.fd = fd
        self.generation = generation
        self.peerIsLoopback = peerIsLoopback
        self.peerAddress = peerAddress
        storage = .allocate(capacity: 1)
        storage.initialize(to: ConnectionState(parser: parser))
    }

    deinit {
        storage.pointee.releaseBuffers()
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// The connection's mutable state, read and changed in place. Only the loop thread
    /// touches it, so it sits behind a pointer: Swift's dynamic exclusivity checks on class
    /// properties (a tenth of the server's instructions per request) would buy nothing here.
    var state: ConnectionState {
        unsafeAddress { UnsafePointer(storage) }
        unsafeMutableAddress { storage }
    }
}

/// Where a connection stands: its buffers, the request being read, the response being written.
/// How a request body has come so far (loop ms), for its time limits: no byte for the body
/// timeout, or slower on the whole than ``HTTPServer/Configuration/bodyMinimumRate``
/// (``EventLoop/bodyDeadline(_:)``). An HTTP/1.1 connection's body or an HTTP/2 stream's.
struct BodyProgress {
    /// When it began: the head was read.
    let start: Int
    /// When its last byte came (its start until one does).
    private(set) var last: Int
    /// The bytes that came since it began.
    private(set) var bytes = 0

    init(start: Int) {
        self.start = start
        last = start
    }

    mutating func received(_ count: Int, at now: Int) {
        bytes += count
        last = now
    }
}

struct ConnectionState {
    // Input: bytes read and not consumed are input[inputStart..<inputEnd].
    var input: UnsafeMutablePointer<UInt8>?
    var inputCapacity = 0
    var inputStart = 0
    var inputEnd = 0
    /// Edge-triggered readiness: true until a read or write would block.
    var canRead = true
    var canWrite = true
    /// The client sent FIN.
    var inputClosed = false
    /// epoll said the client's side is shut (EPOLLRDHUP): a short read then leaves the end still
    /// to be read, so reading goes on until it is (no further edge would bring it).
    var hungUp = false

    var phase = ConnectionPhase.head
    /// When the current phase times out (monotonic ms).
    var deadline = 0
    /// How the request body being read has come, for its time limits
    /// (``EventLoop/bodyDeadline(_:)``).
    var bodyProgress = BodyProgress(start: 0)
    /// Since when sending has been blocked without progress (0: not blocked).
    var writeBlockedSince = 0

    // The request being read.
    var parser: RequestHeadParser
    var request: ServerRequest?
    var bodyRemaining: Int64 = 0
    var chunkedDecoder: ChunkedDecoder?
    var body: [UInt8] = []
    var keepAlive = true
    /// The request being answered came whole and is the client's last: it asked to close
    /// (`Connection: close`, or HTTP/1.0 without keep-alive), so it sends nothing more on the
    /// connection (RFC 9112 §9.6), and closing needs no stage for bytes still on their way.
    var clientSentLast = false
    var minorVersion = 1
    var requestIsHead = false
    /// Counts requests handed to the handler; a responder answers only while it matches.
    var sequence: UInt64 = 0

    // The response being written.
    var responseStarted = false
    var responseBody = ResponseBodyMode.discard
    var output = OutputQueue()
    var writeShut = false
    var lingerBytes = 0

    var tunnel: Tunnel?
    /// The HTTP/2 session, once the connection speaks HTTP/2.
    var h2: HTTP2Session?
    /// TLS on the connection: every byte read and written goes through it; nil for plain HTTP.
    var tls: TLSConnection?
    /// A TLS read waits for the socket to be writable (`canRead` comes back with `EPOLLOUT`),
    /// a TLS write for it to be readable (`canWrite` comes back with `EPOLLIN`).
    var readWaitsForWrite = false
    var writeWaitsForRead = false
    /// The first byte from the client was looked at before the handshake (plain HTTP to the TLS port).
    var firstByteChecked = false
    /// Queued on the loop's list of connections to drive.
    var isDirty = false
    var closed = false

    init(parser: RequestHeadParser) { self.parser = parser }

    var bufferedInput: Int { inputEnd - inputStart }

    /// Room for reading at `input + inputEnd`, compacting or growing the buffer up to `limit`.
    mutating func prepareInput(limit: Int) -> Int {
        if inputStart == inputEnd {
            inputStart = 0
            inputEnd = 0
        }
        if inputEnd == inputCapacity {
            if inputStart > 0 {
                memmove(input!, input! + inputStart, inputEnd - inputStart)
                inputEnd -= inputStart
                inputStart = 0
            } else if inputCapacity < limit {
                let newCapacity = min(limit, max(4096, inputCapacity * 2))
                let newInput = ByteBuffer.allocate(newCapacity)
                if let input {
                    newInput.update(from: input, count: inputEnd)
                    ByteBuffer.free(input)
                }
                input = newInput
                inputCapacity = newCapacity
            }
        }
        return inputCapacity - inputEnd
    }

    /// Gives back the input buffer once nothing is in it: an idle keep-alive connection then
    /// holds no buffer.
    mutating func shrinkInputIfIdle() {
        if inputStart == inputEnd && input != nil {
            ByteBuffer.free(input)
            input = nil
            inputCapacity = 0
            inputStart = 0
            inputEnd = 0
        }
    }

    mutating func releaseBuffers() {
        ByteBuffer.free(input)
        input = nil
        inputCapacity = 0
        inputStart = 0
        inputEnd = 0
        output.release()
        h2?.closeAll()
        h2 = nil
        request = nil
        body = []
        chunkedDecoder = nil
    }
}

/// The upstream side of a CONNECT tunnel; the client side is the connection itself
/// (its input buffer carries client→upstream bytes, its output queue upstream→client bytes).
final class Tunnel {
    let fd: Int32
    var canRead = true
    var canWrite = true
    /// epoll said the upstream's side is shut (EPOLLRDHUP), as ``ConnectionState/hungUp``.
    var hungUp = false
    var inputClosed = false
    var writeShut = false

    init(fd: Int32) { self.fd = fd }
}
#endif
