import CacheSemantics

/// The words of the trace: each event and action named in a few words. Plain descriptions, no
/// I/O: ``ExchangeDriver`` writes them.
extension ExchangeStateMachine {
    /// An event the machine takes, as the trace names it: the method's name and, in
    /// parentheses, what it carries that decided the next action.
    enum Event: CustomStringConvertible {
        case start
        case candidatesRead(count: Int)
        case storedBodyUnavailable
        case joinedAsLeader
        case leaderSettled(stored: Bool)
        case leaderLost
        case leaderHeldBack
        case originResponded(status: Int)
        case originFailed
        /// `nil` when the `304` selects nothing stored.
        case notModifiedApplied(count: Int?)
        case replacementUnavailable
        case fallbackUnavailable
        case storedPartUnavailable
        case abandon

        var description: String {
            switch self {
            case .start: "start"
            case .candidatesRead(let count): "candidatesRead(\(count))"
            case .storedBodyUnavailable: "storedBodyUnavailable"
            case .joinedAsLeader: "joinedAsLeader"
            case .leaderSettled(let stored): "leaderSettled(\(stored ? "stored" : "nothing stored"))"
            case .leaderLost: "leaderLost"
            case .leaderHeldBack: "leaderHeldBack"
            case .originResponded(let status): "originResponded(\(status))"
            case .originFailed: "originFailed"
            case .notModifiedApplied(let count): "notModifiedApplied(\(count.map(String.init) ?? "none"))"
            case .replacementUnavailable: "replacementUnavailable"
            case .fallbackUnavailable: "fallbackUnavailable"
            case .storedPartUnavailable: "storedPartUnavailable"
            case .abandon: "abandon"
            }
        }
    }
}

/// An action as the trace names it.
protocol TracedAction {
    var traceDescription: String { get }
}

extension ExchangeStateMachine.Action: TracedAction {
    var traceDescription: String {
        switch self {
        case .readCandidates: "readCandidates"
        case .serveStored(let answer): answer.traceDescription
        case .answer(let answer): "answer(\(answer.status))"
        case .join: "join"
        case .forward(let request): request.traceDescription
        }
    }
}

extension ExchangeStateMachine.ResponseAction: TracedAction {
    var traceDescription: String {
        switch self {
        case .serveStored(let answer): answer.traceDescription
        case .applyNotModified(let notModified): "applyNotModified(\(notModified.validated.count))"
        case .forward(let request): request.traceDescription
        case .relay(let plan): plan.traceDescription
        }
    }
}

extension ExchangeStateMachine.FailureAction: TracedAction {
    var traceDescription: String {
        switch self {
        case .serveStored(let answer): answer.traceDescription
        case .answer(let answer): "answer(\(answer.status))"
        case .fail: "fail"
        }
    }
}

extension ExchangeStateMachine.StoredAnswer {
    /// `serveStored(hit)`, `serveStored(stale, revalidate in background)`.
    var traceDescription: String {
        "serveStored(\(outcome)\(revalidation == nil ? "" : ", revalidate in background"))"
    }
}

extension ExchangeStateMachine.ForwardedRequest {
    /// `forward(uri-miss)`, `forward(stale, conditional)` (RFC 9211 `fwd` and RFC 9111 §4.3.1).
    var traceDescription: String {
        "forward(\(reason.rawValue)\(isValidation ? ", conditional" : "")\(discard.isEmpty ? "" : ", discard stored part"))"
    }
}

extension ExchangeStateMachine.RelayPlan {
    /// `relay(200, store)`, `relay(204, invalidate 1)`.
    var traceDescription: String {
        var words = ["\(status)"]
        if storage?.head != nil { words.append("store") }
        if !invalidated.isEmpty { words.append("invalidate \(invalidated.count)") }
        if headFreshens != nil || !notModifiedFreshens.isEmpty { words.append("freshen stored") }
        if storedPart != nil { words.append("after stored part") }
        return "relay(\(words.joined(separator: ", ")))"
    }
}
