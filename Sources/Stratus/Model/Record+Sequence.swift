/// The fields of a record as key-value pairs, as CloudKit's `CKRecordKeyValueIterator`: each
/// key of ``Record/allKeys()`` (sorted) with its value, read when the iterator reaches it.
///
/// ```swift
/// for (key, value) in record { copy[key] = value }
/// ```
public struct RecordKeyValueIterator: IteratorProtocol {
    private let record: Record
    private var keys: IndexingIterator<[Record.FieldKey]>

    init(record: Record) {
        self.record = record
        keys = record.allKeys().makeIterator()
    }

    /// The next key and its value, or `nil` after the last; a field removed since the
    /// iteration began is passed over.
    ///
    /// ```swift
    /// var fields = record.makeIterator()
    /// while let (key, value) = fields.next() { print(key, value) }
    /// ```
    public mutating func next() -> (Record.FieldKey, any RecordValueProtocol)? {
        while let key = keys.next() {
            if let value = record[key] { return (key, value) }
        }
        return nil
    }
}

extension Record: Sequence {
    /// An iterator of the record's fields, as `CKRecord.makeIterator()`: `for (key, value) in
    /// record` visits each field that has a value.
    ///
    /// ```swift
    /// for (key, value) in record { print(key, value) }
    /// ```
    public func makeIterator() -> RecordKeyValueIterator {
        RecordKeyValueIterator(record: self)
    }
}
