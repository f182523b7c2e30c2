extension HeaderFields {
    /// A compact binary form of the fields, in order, for stores.
    public func serialized() -> [UInt8] {
        // Sized first: grown as it was written, the array was copied three or four times. The
        // lines read where they are: a copy of each costs a retain and a release of each string.
        storage.withUnsafeBufferPointer { lines in
            var size = ByteWriter.varintSize(UInt64(lines.count))
            for index in lines.indices {
                let (name, value) = (lines[index].name.utf8.count, lines[index].value.utf8.count)
                size += ByteWriter.varintSize(UInt64(name)) + name + ByteWriter.varintSize(UInt64(value)) + value
            }
            var writer = ByteWriter(capacity: size)
            writer.varint(UInt64(lines.count))
            for index in lines.indices {
                writer.string(lines[index].name)
                writer.string(lines[index].value)
            }
            return writer.bytes
        }
    }

    /// Reads bytes written by ``serialized()``; `nil` when they are truncated or malformed.
    public init?(serialized bytes: some Collection<UInt8>) {
        var reader = ByteReader(Array(bytes))
        guard let count = reader.varint(), count <= UInt64(bytes.count) else { return nil }
        var fields: [HeaderField] = []
        fields.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let name = reader.string(), let value = reader.string() else { return nil }
            fields.append(HeaderField(name: name, value: value))
        }
        guard reader.atEnd else { return nil }
        self.init(fields)
    }
}
