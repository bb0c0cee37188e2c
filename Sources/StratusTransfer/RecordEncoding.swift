import Foundation
import Stratus

/// How a ``RecordWriter`` turns one record into its bytes, settled before the first record: the
/// one encoding behind both the writer's own ``RecordWriter/write(_:)`` and the batches a
/// ``Stratus/RecordExporter`` encodes on other threads, so that both write the same bytes.
///
/// A record's bytes are its JSON and a line feed (NDJSON), its JSON (a JSON array or envelope,
/// whose writer puts the opening or ``recordSeparator`` before it), or its CSV row and a line
/// feed.
struct RecordEncoding: RecordBatchEncoder {
    let format: RecordFormat
    let jsonOptions: RecordJSONWriter.Options
    /// CSV: the columns (header written), or nil before they are settled.
    let csvColumns: [CSVLayout.Column]?
    /// CSV: the fields that have a column.
    let csvKnownFields: Set<String>
    /// CSV: whether a field without a column fails the record (columns from the first record,
    /// or given as every field).
    let csvRefusesOtherFields: Bool
    /// CSV: whether the columns came from the first record (for the failure's advice).
    let csvColumnsFromFirstRecord: Bool
    let csvTimestampStyle: RecordWriter.TimestampStyle

    /// What a JSON array or envelope writes between two records.
    static let recordSeparator: StaticString = ",\n"

    init(format: RecordFormat, jsonOptions: RecordJSONWriter.Options, csvColumns: [CSVLayout.Column]?, csvColumnsFromFirstRecord: Bool,
         csvFieldsAreEveryField: Bool, csvTimestampStyle: RecordWriter.TimestampStyle) {
        self.format = format
        self.jsonOptions = jsonOptions
        self.csvColumns = csvColumns
        self.csvKnownFields = Set(csvColumns?.compactMap { if case .field(let name, _, _) = $0 { name } else { nil } } ?? [])
        self.csvRefusesOtherFields = csvColumnsFromFirstRecord || csvFieldsAreEveryField
        self.csvColumnsFromFirstRecord = csvColumnsFromFirstRecord
        self.csvTimestampStyle = csvTimestampStyle
    }

    /// Appends the record's bytes (without the separator a JSON array puts before it).
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a record the format cannot hold, an
    ///   asset folder's ``RecordWriter/OutputError``; the bytes appended are then left for the
    ///   caller to remove.
    func append(_ record: Record, to out: inout ByteOutput, cell: inout ByteOutput) throws {
        switch format {
        case .ndjson:
            try appendJSON(record, to: &out)
            out.append(0x0A)
        case .json, .envelope:
            try appendJSON(record, to: &out)
        case .csv:
            try appendCSVRow(record, to: &out, cell: &cell)
        }
    }

    /// Encodes the records into `batch` (empty), each JSON array or envelope record after a
    /// ``recordSeparator``, up to the first that fails.
    func encode(_ records: ArraySlice<Record>, into batch: EncodedRecordBatch) {
        precondition(batch.count == 0 && batch.bytes.count == 0, "an empty batch")
        var cell = ByteOutput()
        for (place, record) in records.enumerated() {
            guard appendRecord(at: place, to: batch, { try append(record, to: &$0, cell: &cell) }) else { return }
        }
    }

    /// Appends one record's bytes to `batch` with `write`, after the ``recordSeparator`` a JSON
    /// array or envelope puts before each; false, with nothing of the record left and the
    /// batch failed at `place`, when `write` throws.
    func appendRecord(at place: Int, to batch: EncodedRecordBatch, _ write: (inout ByteOutput) throws -> Void) -> Bool {
        let mark = batch.bytes.count
        if format == .json || format == .envelope { batch.bytes.append(Self.recordSeparator) }
        do {
            try write(&batch.bytes)
        } catch {
            batch.bytes.removeAll(from: mark)
            batch.bytes.problem = nil
            batch.fail(at: place, error)
            return false
        }
        batch.endRecord()
        return true
    }

    // MARK: - JSON

    private func appendJSON(_ record: Record, to out: inout ByteOutput) throws {
        RecordJSONWriter.append(record, options: jsonOptions, to: &out)
        if let failure = jsonOptions.assetFolder?.takeFailure(writing: record) { throw failure }
        if let problem = out.problem {
            throw StratusError(.invalidArguments, "record '\(record.recordID.recordName)': \(problem)", recordID: record.recordID)
        }
    }

    // MARK: - CSV

    /// The first whole number of an INT64 value (or list) that no double holds exactly.
    private static func wholeNumberNoDoubleHolds(_ value: FieldValue) -> Int64? {
        switch value {
        case .int64(let number): Double(exactly: number) == nil ? number : nil
        case .int64List(let numbers): numbers.first { Double(exactly: $0) == nil }
        default: nil
        }
    }

    private func appendCSVRow(_ record: Record, to out: inout ByteOutput, cell: inout ByteOutput) throws {
        guard let columns = csvColumns else { preconditionFailure("CSV columns are settled before the first row") }
        let (_, values, encrypted, _, extras) = record.contents
        let name = record.recordID.recordName
        func fail(_ message: String) -> StratusError {
            StratusError(.invalidArguments, "record '\(name)': \(message)", recordID: record.recordID)
        }
        if csvRefusesOtherFields, values.keys.contains(where: { !csvKnownFields.contains($0) }),
           let extra = values.keys.sorted().first(where: { !csvKnownFields.contains($0) }) {
            throw fail(csvColumnsFromFirstRecord
                ? "field '\(extra)' has no CSV column (the columns come from the first record); give the fields to write"
                : "field '\(extra)' has no CSV column: it was written after the export found the columns (a write during the export), and would be left out; export again")
        }
        let system = record.systemFields
        for (i, column) in columns.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            switch column {
            case .recordName: out.appendCSVCell(name)
            case .recordType: out.appendCSVCell(record.recordType)
            case .changeTag: if let tag = system.recordChangeTag { out.appendCSVCell(tag) }
            case .creationDate: if let date = system.creationDate { appendCSVTimestamp(date, field: "creationDate", to: &out) }
            case .modificationDate: if let date = system.modificationDate { appendCSVTimestamp(date, field: "modificationDate", to: &out) }
            case .creator: if let user = system.creatorUserRecordID { out.appendCSVCell(user.recordName) }
            case .modifier: if let user = system.lastModifiedUserRecordID { out.appendCSVCell(user.recordName) }
            case .parent: if let parent = record.parent { appendCSVValue(.reference(parent), key: "parent", zone: record.recordID.zoneID, to: &out, cell: &cell) }
            case .field(let key, let type, let columnEncrypted):
                guard let value = values[key] else { continue }
                // A DOUBLE column takes whole numbers too (a NUMBER field holds both kinds), as
                // its reader takes "3": written as they are, exactly.
                if let type, value.type != type, !(value.type == .int64 && type == .double), !(value.type == .int64List && type == .doubleList) {
                    throw fail("field '\(key)' is \(value.type.rawValue), but its CSV column is \(type.rawValue)")
                }
                if type == .double || type == .doubleList, let inexact = Self.wholeNumberNoDoubleHolds(value) {
                    // Read back, the cell would be refused (or another number): not a file to write.
                    throw fail("field '\(key)' holds the whole number \(inexact), which its \(type!.rawValue) column cannot hold exactly (a double has 53 bits); give the column the type \(value.type.rawValue) (--fields \(key):\(value.type.rawValue)) if the field holds no fractions, else export as record JSON, which keeps each value's type")
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
                    Self.appendQuotedCSVCell(text, to: &out)
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
                    appendCSVValue(value, key: key, zone: record.recordID.zoneID, to: &out, cell: &cell)
                }
            }
            if let failure = jsonOptions.assetFolder?.takeFailure(writing: record) { throw failure }
            if let problem = out.problem { throw fail(problem) }
        }
        out.append(0x0A)
    }

    private func appendCSVValue(_ value: FieldValue, key: String, zone: RecordZone.ID, to out: inout ByteOutput, cell: inout ByteOutput) {
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
            appendCSVTimestamp(d, field: key, to: &out)
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

    private func appendCSVTimestamp(_ date: Date, field: String, to out: inout ByteOutput) {
        if csvTimestampStyle == .iso8601, let text = ISO8601Timestamp.text(for: date) {
            for byte in text.utf8 { out.append(byte) }
        } else {
            out.appendTimestamp(date, field: field)
        }
    }

    private static func appendQuotedCSVCell(_ text: String, to out: inout ByteOutput) {
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
