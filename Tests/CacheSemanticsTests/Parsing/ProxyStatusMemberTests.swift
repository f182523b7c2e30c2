import CacheSemantics
import Testing

@Suite("RFC 9209 §2 Proxy-Status members")
struct ProxyStatusMemberTests {
    @Test("RFC 9209 §2: the intermediary as a Token with its parameters; a name that is not a Token as a String")
    func serialization() throws {
        #expect(
            ProxyStatusMember(proxy: "edge-1", error: .connectionRefused).fieldValue
                == "edge-1; error=connection_refused")
        let quoted = ProxyStatusMember(proxy: "1edge", error: .httpRequestError, details: "say \"no\"", statusCode: 431)
        #expect(quoted.fieldValue == #""1edge"; error=http_request_error; status-code=431; details="say \"no\"""#)
        let members = try #require(StructuredFields.parseList(quoted.fieldValue))
        #expect(members.count == 1)
    }

    @Test("RFC 9209 §2: a member is appended after those already there, which are kept (closest to the user last)")
    func appended() throws {
        let status = ProxyStatusMember(proxy: "edge", receivedStatus: 503)
        #expect(status.appended(to: nil) == "edge; received-status=503")
        #expect(status.appended(to: " ") == "edge; received-status=503")
        let both = status.appended(to: "origin-lb; error=connection_timeout")
        #expect(both == "origin-lb; error=connection_timeout, edge; received-status=503")
        #expect(try #require(StructuredFields.parseList(both)).count == 2)
    }

    @Test("RFC 9209 §2.3: each error type is its registered Token", arguments: ProxyStatusMember.ErrorType.allCases)
    func errorTypesAreTokens(error: ProxyStatusMember.ErrorType) {
        #expect(StructuredFields.isToken(error.rawValue))
        #expect(error.rawValue.allSatisfy { $0.isLowercase || $0 == "_" })
    }
}
