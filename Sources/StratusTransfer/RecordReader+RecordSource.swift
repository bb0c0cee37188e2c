import Stratus

/// A reader is the source of a ``Stratus/RecordImporter``.
///
/// ```swift
/// let reader = try RecordReader(fileHandle: .standardInput, options: RecordReadOptions())
/// let summary = try await RecordImporter(database: database).run(from: reader)
/// ```
extension RecordReader: RecordSource {
    /// The next item, as ``next()`` reads it.
    ///
    /// - Throws: what ``next()`` throws, for input that cannot be read further;
    ///   `invalidArguments` at the end of an envelope that held no list of records.
    public func nextItem() throws -> RecordSourceItem? {
        switch try next() {
        case nil:
            if detectedFormat == .envelope && !sawRecordList {
                throw StratusError(
                    .invalidArguments,
                    "it holds no records: a JSON object without 'records' or 'operations' (a zones list or a database changes answer is not a file of records)")
            }
            return nil
        case .record(let record, let line)?:
            return .record(record, line: line)
        case .deletion(let id, let recordType, let line)?:
            return .deletion(id, recordType: recordType, line: line)
        case .rejected(let error)?:
            return .rejected(error)
        }
    }

    /// Passes over up to `count` items: NDJSON lines by finding where they end, without
    /// reading records from them (a resumed import passes what its checkpoint settled at the
    /// speed the input is read); the other formats' items as ``nextItem()`` reads them.
    ///
    /// - Throws: what ``next()`` throws, for input that cannot be read further.
    public func skipItems(_ count: Int) throws -> Int {
        if detectedFormat == .ndjson { return try skipLines(holding: count) }
        var passed = 0
        while passed < count, try nextItem() != nil { passed += 1 }
        return passed
    }

    public var bytesRead: Int { bytesConsumed }

    /// Whether a CloudKit changes answer was read: a record of a `changes/zone` answer's
    /// `zones`, or a `records/changes` answer (records beside a `syncToken` or `moreComing`,
    /// which may follow them: an answer of more records than a batch, which CloudKit's pages
    /// never hold, is known as one only from the batch its `syncToken` is read in). Each of
    /// their records is the record's whole new version.
    ///
    /// ```swift
    /// options.replacesWithWholeVersions = true   // RecordImporter.Options: asks the reader this
    /// _ = try await RecordImporter(database: database, options: options).run(from: reader)
    /// if reader.holdsWholeVersions { print("stored records were replaced by the answer's versions") }
    /// ```
    public var holdsWholeVersions: Bool { readChangesAnswerRecord || readChangesEnvelope }

    /// A `records/modify` operation that asks for another mode than `mode`
    /// (`"operationType": "forceReplace"` read for a `.forceUpdate` import) is rejected, naming
    /// the mode that applies it: a replace saved as an update keeps fields the request removed,
    /// a create saved over a stored record overwrites it. A reader not told reads every
    /// operation whatever its type.
    ///
    /// ```swift
    /// reader.willSave(as: .create)   // what RecordImporter.run(from:) does with its writeMode
    /// ```
    public func willSave(as mode: RecordWriteMode) { savingMode = mode }
}
