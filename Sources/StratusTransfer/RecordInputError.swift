import Stratus

/// One input item that could not become a record; reading continues after it.
///
/// ```swift
/// if case .rejected(let error)? = try reader.next() {
///     FileHandle.standardError.write(Data("\(error)\n".utf8))   // line 3, column 41: …
/// }
/// ```
public struct RecordInputError: Error, Sendable, CustomStringConvertible {
    /// 1-based line of the problem.
    public let line: Int
    /// 1-based column of the problem, counted in characters.
    public let column: Int
    /// The record's name, when the input gave a readable one.
    public let recordName: String?
    /// What was wrong, naming the field or key, e.g. `field 'count': INT64 value 1.5 is not an integer`.
    public let message: String

    /// Creates an error for the item at `line` and `column`.
    public init(line: Int, column: Int, recordName: String?, message: String) {
        self.line = line
        self.column = column
        self.recordName = recordName
        self.message = message
    }

    public var description: String {
        let name = recordName.map { "record '\($0)': " } ?? ""
        return "line \(line), column \(column): \(name)\(message)"
    }

    /// The same problem as an `invalidArguments` error carrying the position.
    public var stratusError: StratusError {
        var error = StratusError(.invalidArguments, description)
        error.line = line
        error.column = column
        return error
    }
}

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
