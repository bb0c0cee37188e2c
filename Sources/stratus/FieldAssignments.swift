import Foundation
import Stratus
import StratusTransfer

/// The `--set NAME[:TYPE]=VALUE` options of `stratus update`: values spelled as CSV cells are,
/// so that a value means in `--set` what it means in a CSV column of the same header.
///
/// `NAME=VALUE` types the value from the container's schema, else as a CSV cell without a type
/// is typed (an integer is INT64, another number DOUBLE, anything else STRING);
/// `NAME:TYPE=VALUE` gives the type (`count:INT64=5`, `due:TIMESTAMP=2025-01-01T09:00:00Z`,
/// `tags:STRING_LIST=["a","b"]`, `owner:REFERENCE=user-7`, `place:LOCATION=48.85,2.35`); an
/// empty VALUE (`NAME=`) removes the field, as an empty CSV cell does, and a quoted one
/// (`NAME=""`) is the empty string, as a quoted empty CSV cell is.
///
/// ```swift
/// let assignments = try FieldAssignments(["checked:INT64=1", "note="], recordType: "Todo", schemas: [:], zoneID: .default)
/// assignments.values    // ["checked": .int64(1)]
/// assignments.removed   // ["note"]
/// ```
struct FieldAssignments {
    /// One `--set` as written: the header it makes and its cell.
    struct Assignment {
        let text: String
        let name: String
        let type: FieldType?
        /// Whether the type was given as `ENCRYPTED_…`.
        let encrypted: Bool
        let value: String
    }

    private(set) var values: [String: FieldValue] = [:]
    private(set) var removed: Set<String> = []
    /// The fields set as encrypted values: typed `ENCRYPTED_…`, or declared encrypted by the schema.
    private(set) var encrypted: Set<String> = []

    /// Splits each `--set` into its name, type and value, without reading the values.
    ///
    /// - Throws: ``UsageError`` naming the `--set` that is malformed, names an unknown type or
    ///   a name no field may have (a system field such as `recordType`), or repeats a field.
    static func split(_ texts: [String]) throws -> [Assignment] {
        guard !texts.isEmpty else { throw UsageError(message: "give at least one --set NAME=VALUE") }
        var names = Set<String>()
        return try texts.map { text in
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw UsageError(message: "--set takes NAME=VALUE or NAME:TYPE=VALUE (an empty VALUE removes the field), not '\(text)'")
            }
            let head = text[..<equals]
            let value = String(text[text.index(after: equals)...])
            var name = String(head)
            var type: FieldType?
            var encrypted = false
            if let colon = head.firstIndex(of: ":") {
                name = String(head[..<colon])
                (type, encrypted) = try ParsedArguments.columnType(String(head[head.index(after: colon)...]), in: "--set", item: text)
            }
            guard !name.isEmpty else { throw UsageError(message: "--set '\(text)' names no field") }
            // A CSV header takes `recordType`, `creationDate`… as the record's own columns, so
            // such a --set would read as "remove nothing" and pass as unchanged.
            do throws(StratusError) {
                try Naming.checkFieldKey(name)
            } catch {
                throw UsageError(message: "--set \(text): \(error.message); update sets a record's fields, never its system fields (recordName, recordType, creationDate, recordChangeTag, ___parent, …)")
            }
            guard names.insert(name).inserted else { throw UsageError(message: "--set gives the field '\(name)' twice") }
            return Assignment(text: text, name: name, type: type, encrypted: encrypted, value: value)
        }
    }

    /// Reads the values as the cells of a one-row CSV whose header is the `--set` names and
    /// types, typed by `schemas` where a `--set` gives no type.
    ///
    /// - Throws: ``UsageError`` quoting the `--set` whose value its type cannot read.
    init(_ assignments: [Assignment], recordType: String, schemas: [String: RecordTypeSchema], zoneID: RecordZone.ID) throws {
        var options = RecordReadOptions()
        options.format = .csv
        options.zoneID = zoneID
        options.schemas = schemas
        options.csvRecordType = recordType
        for assignment in assignments {
            // Beside the parent's own column, a `parent` column is the field of that name.
            var header = "recordName,\(Record.SystemFieldKey.parent)," + Self.cell(assignment.name + (assignment.type.map { ":" + (assignment.encrypted ? "ENCRYPTED_" : "") + $0.rawValue } ?? ""))
            header += "\nupdate,," + Self.cell(assignment.value) + "\n"
            let reader = try RecordReader(data: Data(header.utf8), options: options)
            switch try reader.next() {
            case .record(let record, _)?:
                if let value = record.fieldValue(forKey: assignment.name) {
                    values[assignment.name] = value
                    if record.encryptedKeys.contains(assignment.name) { encrypted.insert(assignment.name) }
                } else {
                    removed.insert(assignment.name)
                }
            case .rejected(let error)?:
                let type = assignment.type ?? schemas[recordType]?.field(assignment.name)?.type
                if type == .asset || type == .assetList, error.message.contains("--assets-dir") {
                    // The reader's advice names import's option: update reads no asset files.
                    throw UsageError(message: "--set \(assignment.text): update reads no asset files (it has no --assets-dir); give an asset its content with `stratus import FILE --assets-dir DIR --mode forceUpdate` of the records naming it, or remove it with \(assignment.name)=")
                }
                throw UsageError(message: "--set \(assignment.text): \(Self.reason(error.message))")
            default:
                throw UsageError(message: "--set \(assignment.text) gives no value")
            }
        }
    }

    /// The reader's message without the CSV's place in it.
    private static func reason(_ message: String) -> String {
        message.replacingOccurrences(of: " cell ", with: " value ")
    }

    /// The CSV cell a `--set` value is: as written when it is a quoted cell already (`""` is
    /// the empty string, `"a,b"` is a,b, as in a CSV file), else a cell holding the text
    /// exactly, quoted only when it must be.
    private static func cell(_ text: String) -> String {
        if isQuotedCell(text) { return text }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Whether `text` is one quoted CSV cell: quotes around it, and quotes inside it doubled.
    private static func isQuotedCell(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count >= 2, scalars.first == "\"", scalars.last == "\"" else { return false }
        var index = 1
        while index < scalars.count - 1 {
            if scalars[index] == "\"" {
                guard index + 1 < scalars.count - 1, scalars[index + 1] == "\"" else { return false }
                index += 2
            } else {
                index += 1
            }
        }
        return true
    }

    /// A canonical form, for the checkpoint file to tell commands apart.
    static func canonical(_ assignments: [Assignment]) -> String {
        assignments.sorted { $0.name < $1.name }.map(\.text).joined(separator: " ")
    }
}
