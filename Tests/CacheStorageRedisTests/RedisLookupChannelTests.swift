import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorageRedis

#if canImport(Glibc)
import Glibc
#endif

/// An event loop's lookup channel (``RedisLookupChannel``), driven here as a loop drives it
/// (`poll` on its socket, ``LookupChannel/expire()``): lookups pipelined on one connection to a
/// real Redis, each resumed with its records and inline body in hand; and against a server that
/// answers wrongly (a cut or garbled reply, a reply too many, none at all), each lookup resumed
/// with an error, never with another key's records.
@Suite("RedisStore: lookups pipelined on an event loop's own connection")
struct RedisLookupChannelTests {
    private static func configuration(_ url: String, timeout: Double) throws -> RedisConfiguration {
        var configuration = try RedisConfiguration(url: url)
        configuration.keyPrefix = "channel-\(UInt64.random(in: 0...UInt64.max)):"
        configuration.commandTimeout = timeout
        configuration.connectTimeout = 5
        return configuration
    }

    /// Stores `body` under `key` (its URL too), fresh for 300 s.
    @discardableResult
    static func write(_ store: RedisStore, _ key: String, _ body: [UInt8]) throws -> StoredEntry {
        let now = Timestamp(secondsSince1970: Date().timeIntervalSince1970)
        let facts = StoredResponseFacts(
            status: 200, requestTime: now, responseTime: now, date: now, freshnessLifetime: 300,
            lifetimeSource: .maxAge)
        let writer = try store.makeWriter(
            for: EntryHead(primaryKey: key, url: key, status: 200, fields: [:], facts: facts.serialized()))
        try writer.append(body)
        return try writer.commit()
    }

    private static func body(_ index: Int) -> [UInt8] {
        (0..<(100 + index * 997)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ index) }
    }

    /// What is wrong with what `store` answers for `key` (inside its lookup's `done`): not the
    /// one entry with `body`, or an entry when `body` is `nil` (none stored); `nil` when right.
    static func check(_ store: RedisStore, _ key: String, body: [UInt8]?) -> String? {
        do {
            let entries = try store.variants(of: key)
            guard let body else { return entries.isEmpty ? nil : "\(key): \(entries.count) entries, none stored" }
            guard entries.count == 1, entries[0].head.primaryKey == key else {
                return "\(key): \(entries.map(\.head.primaryKey))"
            }
            return try store.openBody(for: entries[0]).readAll() == body ? nil : "\(key): another body"
        } catch {
            return "\(key): \(error)"
        }
    }

    /// Drives `channel` as a loop would until `finished` or `seconds` passed.
    static func drive(_ channel: any LookupChannel, seconds: Double = 10, until finished: () -> Bool) {
        let deadline = MonotonicClock.seconds() + seconds
        while !finished() && MonotonicClock.seconds() < deadline {
            if channel.descriptor >= 0 {
                var events = Int16(POLLIN)
                if channel.wantsToWrite { events |= Int16(POLLOUT) }
                var entry = pollfd(fd: channel.descriptor, events: events, revents: 0)
                if poll(&entry, 1, 5) > 0 { channel.descriptorReady() }
            } else {
                usleep(1_000)
            }
            channel.expire()
        }
    }

    @Test(
        "60 lookups queued in one pass go out in one write; each resumed with its own records and body, each asking again six times while the others are in flight"
    )
    func pipelinedLookups() async throws {
        try await offPool {
            let server = try RedisServer.shared()
            let store = RedisStore(try Self.configuration(server.url, timeout: 30))
            let keys = (0..<60).map { "https://example.com/pipelined/\($0)" }
            for (index, key) in keys.enumerated() where index % 6 != 5 { try Self.write(store, key, Self.body(index)) }
            let channel = try #require(store.makeLookupChannel())
            let before = store.metrics
            var answered: [Int] = []
            var wrong: [String] = []
            var roundTripsOfFirstPass = 0
            var closing = false
            func lookUp(_ index: Int) {
                let key = keys[index]
                let queued = channel.lookUp(key) {
                    answered.append(index)
                    if answered.count == keys.count { roundTripsOfFirstPass = store.metrics.roundTrips }
                    // Answered from the reply: neither read makes a round trip of its own.
                    if let problem = Self.check(store, key, body: index % 6 == 5 ? nil : Self.body(index)) {
                        wrong.append(problem)
                    }
                    // Again, queued behind the lookups still in flight.
                    if !closing && answered.filter({ $0 == index }).count < 6 { lookUp(index) }
                }
                #expect(queued)
            }
            for index in keys.indices { lookUp(index) }
            #expect(channel.wantsToWrite)
            // 360 lookups and their reads, on a machine a whole test suite may be keeping busy.
            Self.drive(channel, seconds: 60) { answered.count == 6 * keys.count }
            #expect(Array(answered.prefix(keys.count)) == Array(keys.indices), "answered out of order")
            #expect(answered.count == 6 * keys.count)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            let after = store.metrics
            #expect(roundTripsOfFirstPass - before.roundTrips == 1)
            #expect(after.lookupsOnLoops - before.lookupsOnLoops == 6 * keys.count)
            #expect(after.roundTrips - before.roundTrips < 6 * keys.count)
            #expect(after.errors == before.errors)
            // Closing resumes what is still parked (as failed), which must not ask again here.
            closing = true
            channel.close()
            #expect(channel.descriptor == -1)
        }
    }

    /// What the fake server does with the connection once the lookups arrived.
    enum Misbehaviour: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// Half a reply, then the connection closes.
        case cut
        /// A reply with a byte no RESP type starts with.
        case garbled
        /// Three replies for two lookups: the third is no lookup's.
        case oneTooMany
        /// The replies, after the timeout.
        case late
        /// Nothing, for longer than the channel waits before it takes the server to hang.
        case silent

        var testDescription: String { rawValue }

        var reply: String {
            switch self {
            case .cut: "*2\r\n$3\r\nab"
            case .garbled: "*2\r\n$1\r\na\r\n?junk\r\n"
            case .oneTooMany, .late: "*0\r\n*0\r\n*0\r\n".dropLast(self == .late ? 4 : 0).description
            case .silent: ""
            }
        }

        /// Seconds before the reply, and after it before the connection closes.
        var pause: (before: Double, after: Double) {
            switch self {
            case .late: (0.5, 1.5)
            case .silent: (0, 2.5)
            default: (0, 0)
            }
        }

        /// The failures counted (`RedisMetrics.errorsByKind`).
        var counted: [String: Int] {
            switch self {
            case .cut: ["connection": 1]
            case .garbled, .oneTooMany: ["protocol": 1]
            case .late: ["timeout": 2]
            case .silent: ["timeout": 3]
            }
        }
    }

    @Test(
        "a reply cut, garbled, one too many, late or never: the lookups resume with an error (a miss), the connection closes unless only late",
        arguments: Misbehaviour.allCases)
    func misbehavingServer(_ misbehaviour: Misbehaviour) async throws {
        try await offPool {
            let (listener, port) = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 4)
            defer { close(listener) }
            let reply = Array(misbehaviour.reply.utf8)
            let served = try SystemThread.joinable {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(fd, &buffer, buffer.count, 0)
                usleep(UInt32(misbehaviour.pause.before * 1e6))
                if !reply.isEmpty { _ = send(fd, reply, reply.count, Int32(MSG_NOSIGNAL)) }
                usleep(UInt32(misbehaviour.pause.after * 1e6))
                close(fd)
            }
            defer { served.join() }
            let store = RedisStore(try Self.configuration("redis://127.0.0.1:\(port)", timeout: 0.1))
            let channel = try #require(store.makeLookupChannel())
            let started = MonotonicClock.seconds()
            var outcomes: [String] = []
            for key in ["https://example.com/a", "https://example.com/b"] {
                #expect(
                    channel.lookUp(key) {
                        do throws(StorageError) {
                            outcomes.append("\(try store.variants(of: key).count) entries")
                        } catch {
                            outcomes.append(error.kind == .readFailed ? "failed" : "\(error)")
                        }
                    })
            }
            Self.drive(channel) { outcomes.count == 2 }
            // Both lookups of `oneTooMany` have their (empty) replies before the third arrives.
            let expected = misbehaviour == .oneTooMany ? ["0 entries", "0 entries"] : ["failed", "failed"]
            #expect(outcomes == expected)
            #expect(MonotonicClock.seconds() - started < 0.45, "the lookups waited for the server")
            switch misbehaviour {
            case .late:
                // The replies come: dropped, and the connection is kept for the lookups that follow.
                Self.drive(channel, seconds: 0.6) { false }
                #expect(channel.descriptor >= 0)
            case .silent:
                // Kept past the timeouts, closed once the first lookup waited for a second more.
                #expect(channel.descriptor >= 0)
                Self.drive(channel, seconds: 3) { channel.descriptor == -1 }
                #expect(MonotonicClock.seconds() - started < 2.4, "closed by the server, not by the channel")
                #expect(channel.descriptor == -1)
            default:
                #expect(channel.descriptor == -1)
            }
            #expect(outcomes.count == 2)
            #expect(store.metrics.errorsByKind == misbehaviour.counted)
        }
    }
}
