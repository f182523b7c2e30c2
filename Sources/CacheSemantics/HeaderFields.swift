/// One header field line: a name and its value as received.
public struct HeaderField: Hashable, Sendable {
    /// The field name with its original spelling; compare with ``HeaderFields`` lookups,
    /// which ignore case (RFC 9110 §5.1).
    public var name: String {
        didSet { lowercasedName = ASCII.lowercased(name) }
    }
    /// The field value, without leading or trailing white space.
    public var value: String
    /// `name` in lower case, kept so that lookups compare without folding case each time.
    @usableFromInline
    package private(set) var lowercasedName: String

    /// Creates a field line.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
        lowercasedName = ASCII.lowercased(name)
    }

    /// A field line whose name's lower-case form is known (a constant name on a hot path).
    @inlinable
    package init(name: String, lowercasedName: String, value: String) {
        assert(lowercasedName == ASCII.lowercased(name))
        self.name = name
        self.value = value
        self.lowercasedName = lowercasedName
    }

    /// Whether the field's lowered name is `key` (already lowered), lengths first (``ASCII/equal(_:_:)``).
    @inlinable
    package func isNamed(_ key: String) -> Bool { ASCII.equal(lowercasedName, key) }
}

/// An ordered collection of header fields: names compared case-insensitively, repeated
/// field lines kept in the order received (RFC 9110 §5.2, §5.3).
///
/// ```swift
/// var fields: HeaderFields = ["Cache-Control": "max-age=60", "Vary": "Accept"]
/// fields.append(name: "vary", value: "Accept-Encoding")
/// fields["Vary"]  // "Accept, Accept-Encoding" (list fields combined, §5.3)
/// ```
public struct HeaderFields: Hashable, Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral,
    ExpressibleByArrayLiteral, CustomStringConvertible
{
    @usableFromInline
    var storage: [HeaderField]

    /// An empty field section.
    public init() { storage = [] }

    /// Field lines in order; repeated names are kept.
    public init(_ fields: some Sequence<HeaderField>) { storage = Array(fields) }

    /// Field lines from `(name, value)` pairs, in order.
    public init(_ pairs: some Sequence<(String, String)>) {
        storage = pairs.map { HeaderField(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }
    public init(arrayLiteral elements: HeaderField...) { self.init(elements) }

    /// Runs `body` on the field lines in place, in order: a writer on the hot path reads each
    /// line without copying its strings.
    @inlinable
    package func withLines<R>(_ body: (UnsafeBufferPointer<HeaderField>) throws -> R) rethrows -> R {
        try storage.withUnsafeBufferPointer(body)
    }

    // Inlinable: other modules iterate the lines without a call (and its copies) per line.
    @inlinable public var startIndex: Int { storage.startIndex }
    @inlinable public var endIndex: Int { storage.endIndex }
    @inlinable public subscript(position: Int) -> HeaderField { storage[position] }
    // A step is plain arithmetic, as in `Array`. The defaults check the index against a
    // `Range` of the bounds first, which a debug build does in the standard library's
    // unspecialized code, looking up `Range`'s type metadata at every step: under
    // ThreadSanitizer the Swift runtime takes a process-wide lock for each such lookup, and
    // the fields of every request and response, walked several times each, kept the threads
    // of a busy test process queued on that lock.
    @inlinable public func index(after position: Int) -> Int { position + 1 }
    @inlinable public func index(before position: Int) -> Int { position - 1 }

    /// The combined value of every line named `name`, joined with ", " as RFC 9110 §5.3
    /// allows for list-based fields; `nil` when absent. Setting replaces all such lines
    /// with one (or removes them when set to `nil`).
    ///
    /// Do not use the combined form for `Set-Cookie` (RFC 9110 §5.3); use `values(named:)`.
    public subscript(name: String) -> String? {
        get { combinedValue { ASCII.isLowercased($0.lowercasedName, of: name) } }
        set { self[HeaderField.Name(name)] = newValue }
    }

    /// The combined value of every line named `name` (a constant such as `.cacheControl`), joined
    /// with ", " as RFC 9110 §5.3 allows for list-based fields; `nil` when absent. Setting replaces
    /// all such lines with one (or removes them when set to `nil`).
    public subscript(name: HeaderField.Name) -> String? {
        get { combinedValue(lowercasedName: name.lowercasedName) }
        set {
            let key = name.lowercasedName
            guard let newValue else {
                removeLines { $0.isNamed(key) }
                return
            }
            guard let first = storage.firstIndex(where: { $0.isNamed(key) }) else {
                storage.append(HeaderField(name: name, value: newValue))
                return
            }
            storage[first].value = newValue
            var index = storage.index(after: first)
            while index < storage.endIndex {
                if storage[index].isNamed(key) {
                    storage.remove(at: index)
                } else {
                    index += 1
                }
            }
        }
    }

    /// The combined value of the lines whose lowered name is `key` (already lowered).
    @usableFromInline
    func combinedValue(lowercasedName key: String) -> String? {
        combinedValue { $0.isNamed(key) }
    }

    /// The combined value of the lines that `matches` (RFC 9110 §5.3).
    @inline(__always)
    private func combinedValue(where matches: (HeaderField) -> Bool) -> String? {
        var result: String?
        for index in storage.indices where matches(storage[index]) {
            let value = storage[index].value
            if let existing = result {
                result = existing.isEmpty ? value : value.isEmpty ? existing : existing + ", " + value
            } else {
                result = value
            }
        }
        return result
    }

    /// The value of each line named `name`, in order.
    public func values(named name: String) -> [String] {
        storage.compactMap { ASCII.isLowercased($0.lowercasedName, of: name) ? $0.value : nil }
    }

    /// The value of each line named `name` (a constant such as `.setCookie`), in order.
    public func values(named name: HeaderField.Name) -> [String] {
        let key = name.lowercasedName
        return storage.compactMap { $0.isNamed(key) ? $0.value : nil }
    }

    /// The members of the list-based field `name` across all its lines (RFC 9110 §5.6.1):
    /// split at commas outside quoted strings, trimmed, empty members dropped.
    public func listMembers(named name: String) -> [Substring] {
        listMembers { ASCII.isLowercased($0.lowercasedName, of: name) }
    }

    /// The members of the list-based field `name` (a constant such as `.vary`) across all its
    /// lines (RFC 9110 §5.6.1): split at commas outside quoted strings, trimmed, empty members dropped.
    public func listMembers(named name: HeaderField.Name) -> [Substring] {
        let key = name.lowercasedName
        return listMembers { $0.isNamed(key) }
    }

    /// Whether a line of the list-based field `name` has `member` among its members (RFC 9110
    /// §5.6.1), case ignored: read in the lines' bytes, nothing collected.
    package func listsMember(_ member: String, named name: HeaderField.Name) -> Bool {
        let key = name.lowercasedName
        return ASCII.withUTF8(member) { wanted in
            storage.contains { field in
                field.isNamed(key)
                    && !ASCII.withUTF8(field.value) { value in
                        ASCII.forEachListMember(value) { range in
                            !ASCII.equalsIgnoringCase(UnsafeBufferPointer(rebasing: value[range]), wanted)
                        }
                    }
            }
        }
    }

    /// The list members (RFC 9110 §5.6.1) of the lines that `matches`.
    @inline(__always)
    private func listMembers(where matches: (HeaderField) -> Bool) -> [Substring] {
        var members: [Substring] = []
        for index in storage.indices where matches(storage[index]) {
            ASCII.splitList(Substring(storage[index].value), into: &members)
        }
        return members
    }

    /// Whether `self` and `other` have the same lines among those whose lower-cased name
    /// `matches`: as many, with equal values, in the same order (names are not compared).
    package func hasSameLines(as other: HeaderFields, where matches: (String) -> Bool) -> Bool {
        var (mine, theirs) = (storage.startIndex, other.storage.startIndex)
        while true {
            while mine < storage.endIndex, !matches(storage[mine].lowercasedName) { mine += 1 }
            while theirs < other.storage.endIndex, !matches(other.storage[theirs].lowercasedName) { theirs += 1 }
            guard mine < storage.endIndex, theirs < other.storage.endIndex else {
                return mine == storage.endIndex && theirs == other.storage.endIndex
            }
            guard storage[mine].value == other.storage[theirs].value else { return false }
            mine += 1
            theirs += 1
        }
    }

    /// Whether at least one line is named `name`.
    public func contains(_ name: String) -> Bool {
        storage.contains { ASCII.isLowercased($0.lowercasedName, of: name) }
    }

    /// Whether at least one line is named `name` (a constant such as `.authorization`).
    public func contains(_ name: HeaderField.Name) -> Bool {
        let key = name.lowercasedName
        return storage.contains { $0.isNamed(key) }
    }

    /// Adds `field` at the end, keeping existing lines of the same name.
    @inlinable
    package mutating func append(_ field: HeaderField) { storage.append(field) }

    /// Makes room for `count` lines in all (the copy a shared section makes on its first append
    /// then happens once, at this size).
    @inlinable
    package mutating func reserveCapacity(_ count: Int) { storage.reserveCapacity(count) }

    /// Adds a line at the end, keeping existing lines of the same name.
    public mutating func append(name: String, value: String) {
        storage.append(HeaderField(name: name, value: value))
    }

    /// Adds a line named `name` (a constant such as `.date`) at the end, keeping existing lines of
    /// the same name.
    public mutating func append(name: HeaderField.Name, value: String) {
        storage.append(HeaderField(name: name, value: value))
    }

    /// Removes the lines that `matches`, and leaves the lines untouched when none does: a
    /// section shares its lines with the stored head it was copied from, and `removeAll(where:)`
    /// copied them all (a retain of each string) even when it removed nothing.
    @inline(__always)
    private mutating func removeLines(where matches: (HeaderField) -> Bool) {
        guard storage.contains(where: matches) else { return }
        storage.removeAll(where: matches)
    }

    /// Removes the lines that `matches` and returns them, in order, asking `matches` once a
    /// line (a `filter` for them and then their removal asked it of every line twice, and
    /// copied the lines that stay even when none went).
    package mutating func extractLines(where matches: (HeaderField) -> Bool) -> [HeaderField] {
        guard let first = storage.firstIndex(where: matches) else { return [] }
        var removed = [storage[first]]
        var kept = Array(storage[..<first])
        kept.reserveCapacity(storage.count - 1)
        for field in storage[(first + 1)...] {
            if matches(field) { removed.append(field) } else { kept.append(field) }
        }
        storage = kept
        return removed
    }

    /// Removes every line named `name`.
    public mutating func removeAll(named name: String) {
        removeLines { ASCII.isLowercased($0.lowercasedName, of: name) }
    }

    /// Removes every line named `name` (a constant such as `.age`).
    public mutating func removeAll(named name: HeaderField.Name) {
        let key = name.lowercasedName
        removeLines { $0.isNamed(key) }
    }

    /// Removes every line whose name is in `names` (compared ignoring case).
    public mutating func removeAll(namedAnyOf names: some Collection<String>) {
        guard !names.isEmpty else { return }
        let keys = names.map(ASCII.lowercased)
        removeAll(lowercasedNamesIn: keys)
    }

    /// Removes every line whose lowercased name is in `names` (names already lowercased). A few
    /// names are compared in turn, many looked up in a set: a response's excluded names (a
    /// dozen, more when `Connection` lists many) cost no hashing of every name.
    package mutating func removeAll(lowercasedNamesIn names: [String]) {
        guard !names.isEmpty else { return }
        if names.count <= 16 {
            removeLines { ASCII.contains(names, $0.lowercasedName) }
        } else {
            let keys = Set(names)
            removeLines { keys.contains($0.lowercasedName) }
        }
    }

    /// Removes every line whose name is one of `names` (constants such as `[.range, .ifRange]`).
    public mutating func removeAll(namedAnyOf names: some Sequence<HeaderField.Name>) {
        removeLines { field in names.contains { field.isNamed($0.lowercasedName) } }
    }

    /// The fields as `Name: value` lines, for logs and `explain`.
    public var description: String {
        storage.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}
