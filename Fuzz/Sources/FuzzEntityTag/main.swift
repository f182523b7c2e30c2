import CacheSemantics
import FuzzSupport

/// Entity tags and If-None-Match lists: a parsed tag prints to text that parses back equal.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    if let tag = EntityTag(text) {
        precondition(EntityTag(tag.description) == tag)
        precondition(tag.weakMatches(tag) && tag.strongMatches(tag) == !tag.isWeak)
    }
    if let list = EntityTagList(fields: ["If-None-Match": text], name: "If-None-Match") {
        precondition(EntityTagList(fields: ["If-None-Match": list.fieldValue], name: "If-None-Match") == list)
    }
    return 0
}
