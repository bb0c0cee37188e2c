/// Where a ``RecordImporter`` reads its input: records, deletions and the items that could not
/// become either, each with its place in the input.
///
/// `StratusTransfer`'s `RecordReader` is one (CloudKit record JSON and CSV); a program can
/// import from anything else by conforming a class of its own.
///
/// ```swift
/// final class ArraySource: RecordSource {
///     var records: [Record]
///     var line = 0
///     init(_ records: [Record]) { self.records = records }
///     func nextItem() throws -> RecordSourceItem? {
///         guard !records.isEmpty else { return nil }
///         line += 1
///         return .record(records.removeFirst(), line: line)
///     }
/// }
/// ```
public protocol RecordSource: AnyObject {
    /// The next item of the input; nil at its end.
    ///
    /// - Throws: when the input cannot be read further (the importer stops and reports what it
    ///   did); an item that is bad on its own is ``RecordSourceItem/rejected(_:)`` instead.
    func nextItem() throws -> RecordSourceItem?

    /// Passes over up to `count` items without making them, answering how many it passed
    /// (fewer only where the input ends): a resumed import passes the items its checkpoint
    /// says an earlier run settled. The default reads them with ``nextItem()``; a source that
    /// can pass items faster than it makes them (a reader that only finds where lines end)
    /// does so here, and must pass exactly the items ``nextItem()`` would have answered.
    ///
    /// ```swift
    /// func skipItems(_ count: Int) throws -> Int {
    ///     let passed = min(count, records.count)
    ///     records.removeFirst(passed)
    ///     return passed
    /// }
    /// ```
    ///
    /// - Throws: when the input cannot be read further, as ``nextItem()`` does.
    func skipItems(_ count: Int) throws -> Int

    /// How many input bytes were consumed, for progress against the input's size; 0 when unknown.
    var bytesRead: Int { get }

    /// Whether the records the source yields have their record names, record types and field
    /// keys checked as a save checks them (a reader that checks them on its input's bytes), so
    /// that the importer checks only their values.
    var checksRecordNames: Bool { get }

    /// Told once, before the first item, how the importer saves records
    /// (``RecordImporter/Options/writeMode``): a source of requests that name their own mode
    /// (CloudKit's `records/modify` operations) rejects the items that ask for another, rather
    /// than have them saved as the wrong one.
    func willSave(as mode: RecordWriteMode)

    /// Whether the records read so far are whole versions, each the record entire as its
    /// source last had it (a CloudKit `changes/zone` answer's records), rather than fields to
    /// merge into what is stored. A `.forceUpdate` import writes such records as
    /// `.forceReplace` (``RecordImporter/Options/replacesWithWholeVersions``), so that a field
    /// a newer version no longer has is removed, not kept under the new version's change tag.
    ///
    /// ```swift
    /// final class MirrorFeed: RecordSource {
    ///     var holdsWholeVersions: Bool { true }   // each item is the record as it now is
    ///     func nextItem() throws -> RecordSourceItem? { … }
    /// }
    /// ```
    var holdsWholeVersions: Bool { get }
}

extension RecordSource {
    /// Not checked: the importer checks every name.
    public var checksRecordNames: Bool { false }

    /// Records name no mode of their own: nothing to do.
    public func willSave(as mode: RecordWriteMode) {}

    /// Reads the items with ``nextItem()`` and drops them.
    public func skipItems(_ count: Int) throws -> Int {
        var passed = 0
        while passed < count, try nextItem() != nil { passed += 1 }
        return passed
    }

    /// Unknown: 0.
    public var bytesRead: Int { 0 }

    /// Fields to merge, as any record a program saves.
    public var holdsWholeVersions: Bool { false }
}

/// One item of a ``RecordSource``.
///
/// ```swift
/// switch item {
/// case .record(let record, let line): print(line, record.recordID.recordName)
/// case .deletion(let id, _, let line): print(line, "delete", id.recordName)
/// case .rejected(let rejection): print(rejection)
/// }
/// ```
public enum RecordSourceItem: Sendable {
    /// A record to save; `line` is where it starts in the input.
    case record(Record, line: Int)
    /// A record to delete (a `"deleted": true` line of a change feed); its type when known.
    case deletion(Record.ID, recordType: String?, line: Int)
    /// An input item that is not a valid record or deletion, and why.
    case rejected(RecordRejection)
}

/// An input item that was not imported, where it is, and why.
///
/// ```swift
/// let rejection = RecordRejection(line: 7, column: 12, recordName: "a", message: "field 'count': …")
/// print(rejection)   // line 7, column 12: record 'a': field 'count': …
/// ```
public struct RecordRejection: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// 1-based line where the item (or its problem) is.
    public var line: Int
    /// 1-based column of the problem, counted in characters; 0 when the store rejected the
    /// record as a whole.
    public var column: Int
    /// The record's name, when the input gave a readable one.
    public var recordName: String?
    /// What was wrong; never contains a field's value.
    public var message: String

    /// A rejection of the item at `line` and `column`.
    public init(line: Int, column: Int, recordName: String?, message: String) {
        self.line = line
        self.column = column
        self.recordName = recordName
        self.message = message
    }

    /// `line 7, column 12: record 'a': …`, or `line 7: record 'a': …` for a record refused whole
    /// (column 0 names no place in the line, and `stratus import` prints none either).
    public var description: String {
        let name = recordName.map { "record '\($0)': " } ?? ""
        let place = column > 0 ? "line \(line), column \(column)" : "line \(line)"
        return "\(place): \(name)\(message)"
    }

    /// The same problem as an `invalidArguments` error carrying the position, for a caller
    /// that stops at the first bad item.
    ///
    /// ```swift
    /// if case .rejected(let rejection)? = try reader.next() { throw rejection.stratusError }
    /// ```
    public var stratusError: StratusError {
        var error = StratusError(.invalidArguments, description)
        error.line = line
        error.column = column
        return error
    }
}
