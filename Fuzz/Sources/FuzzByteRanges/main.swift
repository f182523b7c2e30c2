import CacheSemantics
import FuzzSupport

/// Range and Content-Range: satisfiable ranges stay inside the representation, and parsed
/// values print to text that parses back equal.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    if let request = ByteRangeRequest(text) {
        precondition(ByteRangeRequest(request.fieldValue) == request)
        for length: Int64 in [0, 1, 100, 1 << 40] {
            for range in request.satisfiableRanges(length: length) {
                precondition(range.lowerBound >= 0 && range.upperBound < length)
            }
        }
    }
    if let contentRange = ContentRange(text) {
        precondition(ContentRange(contentRange.fieldValue) == contentRange)
        if let range = contentRange.range, let length = contentRange.completeLength {
            precondition(range.upperBound < length)
        }
    }
    return 0
}
