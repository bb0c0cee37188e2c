import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

/// How SQLite spells Stratus's queries: a field's tag and value are read from the field
/// document with `json_extract(r.fields, '$.key[0]')` and `'$.key[1]'`, which answer integers,
/// reals and text as SQLite compares them; a record's rows of one zone lie together in the
/// table by change key.
struct SQLiteDialect: SQLDialect {
    /// `r.` in statements, empty in index definitions.
    var table = "r."

    var recordColumns: String { SQLiteSchema.recordColumns }
    var recordColumnCount: Int { Int(SQLiteSchema.recordColumnCount) }
    var trueLiteral: String { "1" }
    var falseLiteral: String { "0" }

    /// A JSON path into the field document. `name` was checked by ``Naming`` when the query
    /// was compiled; the check is repeated because the name becomes part of the SQL text.
    static func path(_ name: String, _ index: Int) -> String {
        precondition((try? Naming.checkIdentifier(name, kind: "field name")) != nil, "unchecked field name reached SQL")
        return "$.\(name)[\(index)]"
    }

    func element(_ name: String, _ index: Int) -> String { "json_extract(\(table)fields, '\(Self.path(name, index))')" }

    func tag(_ name: String) -> String { element(name, 0) }

    /// Numbers, dates (seconds since 2001), strings and record names alike: SQLite compares
    /// what `json_extract` answers, numbers as numbers and text by its bytes (BINARY).
    func value(_ name: String, family: QueryRules.OrderedFamily) -> String { element(name, 1) }

    /// The stored folded copy where the document has one, else the value lowercased by
    /// SQLite's `lower()`, which lowercases the ASCII letters A–Z and nothing else.
    func equalityValue(_ name: String) -> String {
        "coalesce(\(element(name, 2)), lower(\(element(name, 1))))"
    }

    func systemColumn(_ key: QueryKey) -> String {
        switch key {
        case .recordName: "\(table)record_name"
        case .creationDate: "\(table)created_at"
        case .modificationDate: "\(table)modified_at"
        case .creatorUserRecordID: "\(table)created_by"
        // An empty modifier is the creator (version 9; see SQLiteSchema.recordsTableColumns).
        case .lastModifiedUserRecordID: "coalesce(nullif(\(table)modified_by, ''), \(table)created_by)"
        case .parent: "\(table)parent_name"
        case .field(let name): element(name, 1)
        }
    }

    func parameter(_ value: FieldValue) -> SQLValue {
        switch value {
        case .int64(let i): .integer(i)
        case .double(let d): .real(d)
        case .string(let s): .text(s)
        case .date(let d): .real(d.timeIntervalSinceReferenceDate)
        case .reference(let r): .text(r.recordID.recordName)
        case .bytes(let b): .blob(b)
        default: .null
        }
    }

    func textParameter(_ text: String) -> SQLValue { .text(text) }

    func anyElement(of name: String, family: QueryRules.OrderedFamily, _ test: (String) -> SQLFragment) -> SQLFragment {
        let inner = test("value")
        return SQLFragment(sql: "EXISTS (SELECT 1 FROM json_each(\(table)fields, '\(Self.path(name, 1))') WHERE \(inner.sql))", parameters: inner.parameters)
    }

    func startsWith(_ column: String, _ prefix: String) -> SQLFragment {
        SQLFragment(sql: "substr(\(column), 1, length(?)) = ?", parameters: [.text(prefix), .text(prefix)])
    }

    func distanceKilometres(_ name: String, from origin: Location) -> SQLFragment {
        let lat = element(name, 1), lon = element(name, 2)
        let sql = "(12742.0176 * asin(sqrt(pow(sin(radians(\(lat) - ?) / 2), 2) + cos(radians(?)) * cos(radians(\(lat))) * pow(sin(radians(\(lon) - ?) / 2), 2))))"
        return SQLFragment(sql: sql, parameters: [.real(origin.latitude), .real(origin.latitude), .real(origin.longitude)])
    }

    /// `stratus_has_tokens` (``SQLiteFunctions``) reads the words of the document's strings.
    func wordsWithoutIndex(_ words: [String], all: Bool) -> SQLFragment? {
        SQLFragment(sql: "stratus_has_tokens(\(table)fields, ?, ?)", parameters: [.text(words.joined(separator: " ")), .integer(all ? 1 : 0)])
    }

    /// One BLOB per row, ``Stratus/QueryRules/withOrderedKey(of:_:)`` (its family's rank,
    /// then its value, in bytes that order as Stratus orders values), made by
    /// `stratus_order_key` (``SQLiteFunctions``) in one read of the document: a field no schema
    /// declares has no index, so only scans and sorts read it.
    func undeclaredSortColumns(_ name: String) -> [String] {
        ["\(SQLiteFunctions.orderKeyFunction)(\(table)fields, \(Self.nameLiteral(name)))"]
    }

    func undeclaredSortValues(_ value: FieldValue?) -> [SQLValue] {
        guard let value, let key = QueryRules.orderedKey(of: Self.upToNUL(value)) else { return [.null] }
        return [.blob(Data(key))]
    }

    /// `stratus_equality_key` (``SQLiteFunctions``): ``equalityValue(_:)`` in one read of the
    /// document, NULL unless the field holds a string.
    func scanEqualityValue(_ name: String) -> String? {
        "\(SQLiteFunctions.equalityKeyFunction)(\(table)fields, \(Self.nameLiteral(name)))"
    }

    /// Text up to its first NUL: SQLite's JSON functions read stored strings so, and text
    /// parameters bind so (``SQLiteStatement/bind(_:at:)``), and the functions of
    /// ``SQLiteFunctions`` compare and order as they do.
    static func upToNUL(_ text: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let nul = text.firstIndex(of: 0) else { return text }
        return UnsafeBufferPointer(rebasing: text[..<nul])
    }

    /// A string value up to its first NUL (record names, and so references, hold none).
    static func upToNUL(_ value: FieldValue) -> FieldValue {
        guard case .string(let text) = value, text.utf8.contains(0) else { return value }
        return .string(String(decoding: text.utf8.prefix { $0 != 0 }, as: UTF8.self))
    }

    /// A field name as an SQL string literal; checked as ``path(_:_:)`` checks it.
    static func nameLiteral(_ name: String) -> String {
        precondition((try? Naming.checkIdentifier(name, kind: "field name")) != nil, "unchecked field name reached SQL")
        return "'\(name)'"
    }

    func sortParameter(_ value: FieldValue?) -> SQLValue { value.map(parameter) ?? .null }

    /// SQLite puts NULL first ascending and last descending, as Stratus's rules want.
    func orderTerm(_ expression: String, ascending: Bool) -> String { expression + (ascending ? " ASC" : " DESC") }

    /// A zone's rows are a range of the table's change keys; the unary + keeps the zone
    /// column (first in every index) from luring the planner into another index.
    func zoneRows(_ zoneRow: Int64, inStorageOrder: Bool) -> SQLFragment {
        guard inStorageOrder else { return SQLFragment(sql: "\(table)zone_id = ?", parameters: [.integer(zoneRow)]) }
        return SQLFragment(sql: "+\(table)zone_id = ? AND \(table)change_key BETWEEN ? AND ?", parameters: [
            .integer(zoneRow), .integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: 0)),
            .integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: SQLiteSchema.maximumSequence))])
    }

    /// An IN on an indexed field reads several index ranges, which SQLite cannot merge in
    /// record-name order; left alone it scans the whole type in name order instead. The unary
    /// + keeps the name order from choosing the index, so the IN ranges are read.
    func tiebreak(hasIndexedIn: Bool) -> String { (hasIndexedIn ? "+" : "") + "\(table)record_name" }

    /// No clause for -1 (every row): with a LIMIT, SQLite sorts into a temporary B-tree, a
    /// page-cache structure that spills to its temporary file page by page once it outgrows
    /// the cache; without one it uses its sorter, which sorts runs in memory and merges them.
    /// A whole sorted read of 1,000,000 rows took 9.2 s with `LIMIT -1` and 2.0 s without.
    func limitClause(_ limit: Int) -> String { limit < 0 ? "" : " LIMIT \(limit)" }
}
