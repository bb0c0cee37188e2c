import Foundation
import Stratus
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes records as NDJSON, a JSON array, a CloudKit response envelope or CSV, buffering
/// and writing in large chunks; memory stays flat however many records pass through.
///
/// ```swift
/// let writer = RecordWriter(format: .envelope, output: .standardOutput)
/// for record in page.records { try writer.write(record) }
/// try writer.finish(continuationMarker: page.cursor?.description)
/// ```
///
/// JSON output is what ``RecordJSONWriter`` writes, one record per line (inside `[…]` or
/// `{"records":[…]}` for the array and envelope formats). ``RecordReader`` reads every format
/// back to equal field values and system fields.
///
/// CSV output has a header row `recordName,recordType`, then (unless ``csvSystemColumns`` is
/// false) `recordChangeTag,creationDate,creatorUserRecordID,modificationDate,lastModifiedUserRecordID,parent`
/// (the parent's column is `___parent` when a field is named `parent`),
/// then one `name:TYPE` column per field: the `csvFields` given, or the first record's keys.
/// A column's type comes from ``csvTypes`` or the first record's value; a column of encrypted
/// values (in the first record) is `name:ENCRYPTED_TYPE`; a column without a type (the first
/// record had no value and ``csvTypes`` names none) holds only strings, each quoted, because a
/// reader infers the type of an untyped column's unquoted cells. Cells hold text,
/// numbers, timestamps in milliseconds (or ISO 8601, see ``csvTimestampStyle``), base64 bytes, a reference's record name (JSON when it
/// has an action or zone), a location as JSON, an asset's file path, and lists as JSON
/// arrays; an empty cell is no value, and `""` is the empty string (or empty bytes). A
/// reference or location read from JSON that held more than its typed value (`VALIDATE` or
/// no action, a `zoneID`, some location members only) is written as that JSON, which
/// ``RecordReader`` keeps. Lines end with LF. The zone is not written: CSV rows are read into
/// the zone the reader is given. CSV carries values, not how record JSON spelled them (no
/// type, `UNKNOWN_LIST`, `1e2`, base64 without padding, encrypted text that is not base64,
/// `isEncrypted`, an asset field's other members): a JSON format keeps those.
public final class RecordWriter {
    /// The format being written.
    public let format: RecordFormat
    /// CSV: whether to write the system-field columns. Set before the first record.
    public var csvSystemColumns = true
    /// CSV: column types by field name, for fields the first record lacks. Set before the first record.
    public var csvTypes: [String: FieldType] = [:]
    /// CSV: fields whose column holds encrypted values (`name:ENCRYPTED_TYPE`), for fields the
    /// first record lacks; a field typed by ``csvTypes`` or the first record. Set before the
    /// first record.
    ///
    /// ```swift
    /// writer.csvTypes = ["secret": .bytes]
    /// writer.csvEncryptedFields = ["secret"]      // header secret:ENCRYPTED_BYTES
    /// ```
    public var csvEncryptedFields: Set<String> = []
    /// CSV: whether a record holding a field without a column fails (`invalidArguments`) also
    /// when the columns were given (`csvFields`). Set it when the columns are meant to be every
    /// field (``RecordExporter/fieldColumns()`` read before the rows): a field written after
    /// they were found (by a writer during the export) then fails the export instead of being
    /// left out of it. Set before the first record.
    ///
    /// ```swift
    /// let writer = RecordWriter(format: .csv, output: handle, csvFields: try await exporter.fieldColumns().types.keys.sorted())
    /// writer.csvFieldsAreEveryField = true
    /// ```
    public var csvFieldsAreEveryField = false { didSet { settledEncoding = nil } }
    /// CSV: how TIMESTAMP cells (and the creation and modification dates) are written.
    public var csvTimestampStyle = TimestampStyle.milliseconds { didSet { settledEncoding = nil } }

    /// How a CSV cell holds a date; ``RecordReader`` reads both.
    ///
    /// ```swift
    /// writer.csvTimestampStyle = .iso8601
    /// ```
    public enum TimestampStyle: String, Sendable, CaseIterable {
        /// Milliseconds since 1970, as CloudKit's JSON writes them: `1735689600000`.
        case milliseconds
        /// ISO 8601 in UTC, `2025-01-01T00:00:00Z`, with the fraction the date has (exact);
        /// dates outside the years 0000–9999 are written in milliseconds.
        case iso8601
    }
    /// How records are written beyond their values: the current user's record name for owners,
    /// a folder for asset content. Set before the first record.
    public var jsonOptions = RecordJSONWriter.Options() { didSet { settledEncoding = nil } }
    /// What the output is called in an ``OutputError``'s message (the file the user named);
    /// "the output" when nil, as for standard output.
    ///
    /// ```swift
    /// writer.outputName = "backup.ndjson"   // "cannot write backup.ndjson: No space left on device"
    /// ```
    public var outputName: String?
    /// How many records were written.
    public private(set) var recordCount = 0

    private let descriptor: Int32
    /// Held so the descriptor stays open while the writer lives.
    private let handle: FileHandle
    private let csvFields: [String]?
    private var out = ByteOutput(capacity: RecordWriter.flushThreshold + (64 << 10))
    private var cell = ByteOutput()
    private var columns: [CSVLayout.Column]? { didSet { settledEncoding = nil } }
    /// The encoding of the settings as they are, made at the first record after a change.
    private var settledEncoding: RecordEncoding?
    private var finished = false
    private static let flushThreshold = 1 << 20

    /// Creates a writer. Nothing is written until the first record (or ``finish(continuationMarker:)``).
    ///
    /// ```swift
    /// let writer = RecordWriter(format: .csv, output: handle, csvFields: ["title", "due"])
    /// ```
    public init(format: RecordFormat, output: FileHandle, csvFields: [String]? = nil) {
        self.format = format
        self.descriptor = output.fileDescriptor
        self.handle = output
        self.csvFields = csvFields
    }

    /// Appends one record.
    ///
    /// ```swift
    /// try writer.write(record)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the record holds what the format cannot
    ///   (a non-finite number, an asset without a file; in CSV a value whose type differs from
    ///   its column's, or a field without a column when the columns came from the first
    ///   record); nothing of that record is written. `internalError` when writing fails.
    public func write(_ record: Record) throws {
        guard !finished else { throw StratusError(.invalidArguments, "the writer is finished; records cannot be added") }
        let encoding = encoding(first: record)
        let mark = out.count
        do {
            switch format {
            case .ndjson, .csv:
                break
            case .json:
                if recordCount == 0 { out.append("[\n") } else { out.append(RecordEncoding.recordSeparator) }
            case .envelope:
                if recordCount == 0 { out.append("{\"records\":[\n") } else { out.append(RecordEncoding.recordSeparator) }
            }
            try encoding.append(record, to: &out, cell: &cell)
        } catch {
            out.removeAll(from: mark)
            out.problem = nil
            throw error
        }
        recordCount += 1
        if out.count >= Self.flushThreshold { try flush() }
    }

    /// The encoding of the current settings; a CSV writer's header is written first, its
    /// columns taken from `record` when they were not given.
    private func encoding(first record: Record) -> RecordEncoding {
        if format == .csv && columns == nil {
            let (_, values, encrypted, _, _) = record.contents
            let fields = csvFields ?? values.keys.sorted()
            var types = csvTypes
            for name in fields where types[name] == nil { types[name] = values[name]?.type }
            writeCSVHeader(fields: fields, types: types, encrypted: encrypted)
        }
        if let settledEncoding { return settledEncoding }
        let encoding = RecordEncoding(
            format: format, jsonOptions: jsonOptions, csvColumns: columns, csvColumnsFromFirstRecord: csvFields == nil,
            csvFieldsAreEveryField: csvFieldsAreEveryField, csvTimestampStyle: csvTimestampStyle)
        settledEncoding = encoding
        return encoding
    }

    // MARK: - Batches encoded elsewhere

    /// The encoder of a ``Stratus/RecordExporter``'s batches: this writer's encoding, its CSV
    /// header written first (columns from `first` when none were given); nil when assets are
    /// written into a folder, whose files must be written in record order.
    package func batchEncoder(first: Record) -> (any RecordBatchEncoder)? {
        guard !finished, jsonOptions.assetFolder == nil else { return nil }
        return encoding(first: first)
    }

    /// Record JSON is encoded from the rows a store read (see ``RecordEncoding``).
    package var encodesStoredRows: Bool { !finished && RecordEncoding.encodesStoredRows(format: format, jsonOptions: jsonOptions) }

    /// Writes records `records` of a batch this writer's ``batchEncoder(first:)`` encoded: the
    /// bytes ``write(_:)`` would have written for them.
    ///
    /// - Throws: the failure of the batch's record in `records` that could not be encoded,
    ///   after writing those before it; ``OutputError`` when writing fails.
    package func write(_ batch: EncodedRecordBatch, records: Range<Int>) throws {
        guard !finished else { throw StratusError(.invalidArguments, "the writer is finished; records cannot be added") }
        let failure = batch.failure.flatMap { records.contains($0.index) ? $0 : nil }
        let end = failure?.index ?? records.upperBound
        if end > records.lowerBound {
            var from = batch.start(of: records.lowerBound)
            if recordCount == 0 {
                // The encoder put a separator before every record; the first one opens the array.
                switch format {
                case .ndjson, .csv: break
                case .json: out.append("[\n")
                case .envelope: out.append("{\"records\":[\n")
                }
                if format == .json || format == .envelope { from += RecordEncoding.recordSeparator.utf8CodeUnitCount }
            }
            let bytes = UnsafeBufferPointer(rebasing: batch.bytes.bytes[from..<batch.ends[end - 1]])
            if out.count == 0 && bytes.count >= Self.flushThreshold / 4 {
                // A page's bytes go out as they are, without a copy into the buffer.
                try writeOut(bytes)
            } else {
                out.append(bytes)
                if out.count >= Self.flushThreshold { try flush() }
            }
            recordCount += end - records.lowerBound
        }
        if let failure { throw failure.error }
    }

    /// Closes the JSON array or envelope and writes everything still buffered. Call it once, last.
    ///
    /// ```swift
    /// try writer.finish(continuationMarker: nextCursor)   // the marker only goes into an envelope
    /// ```
    ///
    /// - Throws: ``StratusError`` `internalError` when writing fails.
    public func finish(continuationMarker: String? = nil) throws {
        guard !finished else { return }
        finished = true
        switch format {
        case .ndjson:
            break
        case .json:
            out.append(recordCount == 0 ? "[]\n" : "\n]\n")
        case .envelope:
            out.append(recordCount == 0 ? "{\"records\":[]" : "\n]")
            if let continuationMarker {
                out.append(",\"continuationMarker\":")
                out.appendString(continuationMarker)
            }
            out.append("}\n")
        case .csv:
            if columns == nil, let csvFields {
                // An empty export still says what its columns are.
                writeCSVHeader(fields: csvFields, types: csvTypes)
            }
        }
        try flush()
    }

    private func flush() throws {
        try writeOut(out.bytes)
        out.removeAll()
    }

    /// Writes `bytes` to the output descriptor, all of them.
    private func writeOut(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        var written = 0
        let total = bytes.count
        while written < total {
            #if canImport(Glibc)
            let n = Glibc.write(descriptor, bytes.baseAddress! + written, total - written)
            #else
            let n = Darwin.write(descriptor, bytes.baseAddress! + written, total - written)
            #endif
            if n >= 0 {
                written += n
            } else if errno != EINTR {
                throw OutputError(message: "cannot write \(outputName ?? "the output"): \(String(cString: strerror(errno)))")
            }
        }
    }

    // MARK: - CSV

    private func writeCSVHeader(fields: [String], types: [String: FieldType], encrypted: Set<String> = []) {
        var columns: [CSVLayout.Column] = [.recordName, .recordType]
        if csvSystemColumns { columns += [.changeTag, .creationDate, .creator, .modificationDate, .modifier, .parent] }
        // System names asked for as fields already have their own columns; each field gets one.
        var seen: Set<String> = []
        let fields = fields.filter { !Naming.reservedFieldKeys.contains($0) && seen.insert($0).inserted }
        columns += fields.map { name in
            // Without the parent's column, an untyped `parent` would read back as the parent; its
            // cells are strings (as every untyped column's), so it says so.
            let type = types[name] ?? (name == CSVLayout.Column.plainParent && !csvSystemColumns ? .string : nil)
            return .field(name, type, encrypted: type != nil && (encrypted.contains(name) || csvEncryptedFields.contains(name)))
        }
        for (i, column) in columns.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            switch column {
            case .recordName: out.append("recordName")
            case .recordType: out.append("recordType")
            case .changeTag: out.append("recordChangeTag")
            case .creationDate: out.append("creationDate")
            case .creator: out.append("creatorUserRecordID")
            case .modificationDate: out.append("modificationDate")
            case .modifier: out.append("lastModifiedUserRecordID")
            // `parent` keeps the file readable by earlier versions, unless a field takes the name.
            case .parent: out.appendRaw(fields.contains(CSVLayout.Column.plainParent) ? Record.SystemFieldKey.parent : CSVLayout.Column.plainParent)
            case .field(let name, let type, let encrypted):
                out.appendCSVCell(type.map { "\(name):\($0.name(encrypted: encrypted))" } ?? name)
            }
        }
        out.append(0x0A)
        self.columns = columns
    }
}

extension RecordWriter {
    /// The output could not be written (a full disk, a closed pipe): a failure of where the
    /// records go, not of the store or the records.
    ///
    /// ```swift
    /// do { try writer.write(record) } catch let error as RecordWriter.OutputError { print(error.message) }
    /// ```
    public struct OutputError: Error, CustomStringConvertible, Sendable {
        /// What failed, with the system's reason.
        public let message: String

        public var description: String { message }
    }
}
