import Stratus

/// One input item that could not become a record, where it is and why; reading continues
/// after it. The reader's name for ``Stratus/RecordRejection``, the type an import reports
/// rejections with, so that a rejection read here is the one an importer reports.
///
/// ```swift
/// if case .rejected(let error)? = try reader.next() {
///     FileHandle.standardError.write(Data("\(error)\n".utf8))   // line 3, column 41: …
/// }
/// ```
public typealias RecordInputError = RecordRejection

/// What ``RecordReader/next()`` produced: a record, a deletion, or an input item it rejected.
///
/// ```swift
/// while let item = try reader.next() {
///     switch item {
///     case .record(let record, let line): print(line, record.recordID.recordName)
///     case .deletion(let id, _, let line): print(line, "deleted", id.recordName)
///     case .rejected(let error): print(error)
///     }
/// }
/// ```
public enum RecordReadResult: Sendable {
    /// A record whose fields are all set (``Record/changedKeys()`` lists each, including the
    /// ones the input set to `null`), with the system fields the input carried. `line` is
    /// where the record starts.
    case record(Record, line: Int)
    /// A deletion (`"deleted": true`) of the record with this ID, and its type when given;
    /// only with ``RecordReadOptions/readsDeletions``. `line` is where it starts.
    case deletion(Record.ID, recordType: String?, line: Int)
    /// An item that is not a valid record.
    case rejected(RecordInputError)
}
