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
/// false) `recordChangeTag,creationDate,creatorUserRecordID,modificationDate,lastModifiedUserRecordID,parent`,
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
    public var csvFieldsAreEveryField = false
    /// CSV: how TIMESTAMP cells (and the creation and modification dates) are written.
    public var csvTimestampStyle = TimestampStyle.milliseconds

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
    public var jsonOptions = RecordJSONWriter.Options()
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
    private var columns: [CSVLayout.Column]?
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
        let mark = out.count
        do {
            switch format {
            case .ndjson:
                try appendJSON(record)
                out.append(0x0A)
            case .json:
                out.append(recordCount == 0 ? "[\n" : ",\n")
                try appendJSON(record)
            case .envelope:
                out.append(recordCount == 0 ? "{\"records\":[\n" : ",\n")
                try appendJSON(record)
            case .csv:
                try appendCSVRow(record)
            }
        } catch {
            out.removeAll(from: mark)
            out.problem = nil
            throw error
        }
        recordCount += 1
        if out.count >= Self.flushThreshold { try flush() }
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

    private func appendJSON(_ record: Record) throws {
        RecordJSONWriter.append(record, options: jsonOptions, to: &out)
        if let failure = jsonOptions.assetFolder?.takeOutputFailure() { throw failure }
        if let problem = out.problem {
            throw StratusError(.invalidArguments, "record '\(record.recordID.recordName)': \(problem)", recordID: record.recordID)
        }
    }

    private func flush() throws {
        var written = 0
        let total = out.count
        let bytes = out.bytes
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
        out.removeAll()
    }

    // MARK: - CSV

    private func writeCSVHeader(fields: [String], types: [String: FieldType], encrypted: Set<String> = []) {
        var columns: [CSVLayout.Column] = [.recordName, .recordType]
        if csvSystemColumns { columns += [.changeTag, .creationDate, .creator, .modificationDate, .modifier, .parent] }
        // System names asked for as fields already have their own columns; each field gets one.
        var seen: Set<String> = []
        let fields = fields.filter { !Naming.reservedFieldKeys.contains($0) && seen.insert($0).inserted }
        columns += fields.map { .field($0, types[$0], encrypted: types[$0] != nil && (encrypted.contains($0) || csvEncryptedFields.contains($0))) }
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
            case .parent: out.append("parent")
            case .field(let name, let type, let encrypted):
                out.appendCSVCell(type.map { "\(name):\($0.name(encrypted: encrypted))" } ?? name)
            }
        }
        out.append(0x0A)
        self.columns = columns
    }

    private func appendCSVRow(_ record: Record) throws {
        let (_, values, encrypted, _, extras) = record.contents
        if columns == nil {
            let fields = csvFields ?? values.keys.sorted()
            var types = csvTypes
            for name in fields where types[name] == nil { types[name] = values[name]?.type }
            writeCSVHeader(fields: fields, types: types, encrypted: encrypted)
        }
        let name = record.recordID.recordName
        func fail(_ message: String) -> StratusError {
            StratusError(.invalidArguments, "record '\(name)': \(message)", recordID: record.recordID)
        }
        if csvFields == nil || csvFieldsAreEveryField {
            let known = Set(columns!.compactMap { if case .field(let n, _, _) = $0 { n } else { nil } })
            if let extra = values.keys.sorted().first(where: { !known.contains($0) }) {
                throw fail(csvFields == nil
                    ? "field '\(extra)' has no CSV column (the columns come from the first record); give the fields to write"
                    : "field '\(extra)' has no CSV column: it was written after the export found the columns (a write during the export), and would be left out; export again")
            }
        }
        let system = record.systemFields
        for (i, column) in columns!.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            switch column {
            case .recordName: out.appendCSVCell(name)
            case .recordType: out.appendCSVCell(record.recordType)
            case .changeTag: if let tag = system.recordChangeTag { out.appendCSVCell(tag) }
            case .creationDate: if let date = system.creationDate { appendCSVTimestamp(date, field: "creationDate") }
            case .modificationDate: if let date = system.modificationDate { appendCSVTimestamp(date, field: "modificationDate") }
            case .creator: if let user = system.creatorUserRecordID { out.appendCSVCell(user.recordName) }
            case .modifier: if let user = system.lastModifiedUserRecordID { out.appendCSVCell(user.recordName) }
            case .parent: if let parent = record.parent { try appendCSVValue(.reference(parent), key: "parent", zone: record.recordID.zoneID) }
            case .field(let key, let type, let columnEncrypted):
                guard let value = values[key] else { continue }
                // A DOUBLE column takes whole numbers too (a NUMBER field holds both kinds), as
                // its reader takes "3": written as they are, exactly.
                if let type, value.type != type, !(value.type == .int64 && type == .double), !(value.type == .int64List && type == .doubleList) {
                    throw fail("field '\(key)' is \(value.type.rawValue), but its CSV column is \(type.rawValue)")
                }
                if encrypted.contains(key) != columnEncrypted {
                    let hint = columnEncrypted ? "" : "; give the column the type \(value.type.name(encrypted: true)) (csvEncryptedFields, --fields \(key):\(value.type.name(encrypted: true)))"
                    throw fail("field '\(key)' is \(columnEncrypted ? "a plain" : "an encrypted") value, but its CSV column holds \(columnEncrypted ? "encrypted" : "plain") values\(hint)")
                }
                if type == nil {
                    guard case .string(let text) = value else {
                        throw fail("field '\(key)' is \(value.type.rawValue), but its CSV column has no type (the first record had no value); give the column types")
                    }
                    // A reader infers an untyped column's unquoted numbers; a quoted cell stays text.
                    appendQuotedCSVCell(text)
                    continue
                }
                // A reference or location whose JSON held more than its typed value (VALIDATE or
                // no action, a zoneID, some location members only) goes as that JSON.
                // Only an object or array: a reference given as a bare JSON string would come back
                // as a record name in quotes.
                if let kept = extras.fields.isEmpty ? nil : extras.fields[key], Self.keepsObjectText(value),
                   let text = JSONCursor.keptValueText(kept), text.hasPrefix("{") || text.hasPrefix("[") {
                    out.appendCSVCell(text)
                } else {
                    try appendCSVValue(value, key: key, zone: record.recordID.zoneID)
                }
            }
            if let failure = jsonOptions.assetFolder?.takeOutputFailure() { throw failure }
            if let problem = out.problem { throw fail(problem) }
        }
        out.append(0x0A)
    }

    private func appendCSVValue(_ value: FieldValue, key: String, zone: RecordZone.ID) throws {
        switch value {
        case .string(let s):
            out.appendCSVCell(s, quoteEmpty: true)
            return
        case .int64(let i):
            out.appendInt(i)
            return
        case .double(let d):
            out.appendDouble(d, field: key)
            return
        case .date(let d):
            appendCSVTimestamp(d, field: key)
            return
        case .bytes(let b):
            if b.isEmpty { out.append("\"\"") } else { out.appendBase64(b, quoted: false) }
            return
        case .reference(let r) where r.action == .none && r.recordID.zoneID == zone && !Self.looksLikeJSON(r.recordID.recordName):
            out.appendCSVCell(r.recordID.recordName)
            return
        case .asset(let a) where jsonOptions.assetFolder == nil && a.contentURL != nil && !Self.looksLikeJSON(a.contentURL!.path):
            out.appendCSVCell(a.contentURL!.path)
            return
        default:
            // Lists and objects: their JSON text, as one quoted cell. With an asset folder, an
            // asset's content goes there and its JSON names the file, as in record JSON.
            cell.removeAll()
            if let folder = jsonOptions.assetFolder {
                RecordJSONWriter.appendValue(value, field: key, zone: zone, assetFolder: folder, to: &cell)
            } else {
                RecordJSONWriter.appendValue(value, field: key, zone: zone, to: &cell)
            }
            if let problem = cell.problem {
                cell.problem = nil
                out.problem = out.problem ?? problem
            }
            out.appendCSVCell(cell.bytes)
        }
    }

    private func appendCSVTimestamp(_ date: Date, field: String) {
        if csvTimestampStyle == .iso8601, let text = ISO8601Timestamp.text(for: date) {
            for byte in text.utf8 { out.append(byte) }
        } else {
            out.appendTimestamp(date, field: field)
        }
    }

    private func appendQuotedCSVCell(_ text: String) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            out.append(byte)
            if byte == UInt8(ascii: "\"") { out.append(byte) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether a value's kept JSON (``Stratus/Record/JSONExtras/fields``) is what its CSV cell
    /// holds: references and locations, and their lists.
    private static func keepsObjectText(_ value: FieldValue) -> Bool {
        switch value {
        case .reference, .referenceList, .location, .locationList: true
        default: false
        }
    }

    private static func looksLikeJSON(_ text: String) -> Bool {
        text.hasPrefix("{") || text.hasPrefix("[") || text.isEmpty
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
