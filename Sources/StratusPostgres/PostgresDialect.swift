import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

/// How PostgreSQL spells Stratus's queries over the `jsonb` field document.
///
/// A field's tag is `fields->'key'->>0`. Numbers and timestamps (seconds since 2001) compare
/// as `jsonb` numbers (`fields->'key'->1`), which PostgreSQL compares exactly, INT64 and DOUBLE
/// alike; strings and record names compare as text in the "C" collation (Unicode scalar
/// order). Parameters travel as text of unknown type, so the server reads each as the type of
/// the expression it meets (`jsonb`, `text`, `double precision`).
struct PostgresDialect: SQLDialect {
    /// `r.` in statements, empty in index definitions.
    var table = "r."

    // Only queries select through the dialect: their rows are decoded with the query's type.
    var recordColumns: String { PostgresSchema.queryRecordColumns }
    var recordColumnCount: Int { PostgresSchema.recordColumnCount }
    var trueLiteral: String { "TRUE" }
    var falseLiteral: String { "FALSE" }

    /// A key into the field document. `name` was checked by ``Naming`` when the query was
    /// compiled; the check is repeated because the name becomes part of the SQL text.
    static func key(_ name: String) -> String {
        precondition((try? Naming.checkIdentifier(name, kind: "field name")) != nil, "unchecked field name reached SQL")
        return "'\(name)'"
    }

    func json(_ name: String, _ index: Int) -> String { "(\(table)fields->\(Self.key(name))->\(index))" }
    func text(_ name: String, _ index: Int) -> String { "(\(table)fields->\(Self.key(name))->>\(index))" }

    func tag(_ name: String) -> String { text(name, 0) }

    func value(_ name: String, family: QueryRules.OrderedFamily) -> String {
        switch family {
        case .number, .timestamp: json(name, 1)
        case .string, .reference: "(\(text(name, 1)) COLLATE \"C\")"
        }
    }

    /// The stored folded copy where the document has one, else the value with A–Z lowercased
    /// (`translate`, whatever the database's locale).
    func equalityValue(_ name: String) -> String {
        "(coalesce(\(text(name, 2)), translate(\(text(name, 1)), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) COLLATE \"C\")"
    }

    func systemColumn(_ key: QueryKey) -> String {
        switch key {
        case .recordName: "\(table)record_name"
        case .creationDate: "\(table)created_at"
        case .modificationDate: "\(table)modified_at"
        case .creatorUserRecordID: "\(table)created_by"
        case .lastModifiedUserRecordID: "\(table)modified_by"
        case .parent: "\(table)parent_name"
        case .field(let name): text(name, 1)
        }
    }

    /// A value as text: numbers in JSON's notation (read as `jsonb` against a document value,
    /// as `double precision` against a date column), strings and record names as they are.
    func parameter(_ value: FieldValue) -> SQLValue {
        switch value {
        case .int64(let i): .text(String(i))
        case .double(let d): .text(Self.number(d))
        case .date(let d): .text(Self.number(d.timeIntervalSinceReferenceDate))
        case .string(let s): .text(Self.escaped(s))
        case .reference(let r): .text(r.recordID.recordName)
        case .bytes(let b): .blob(b)
        default: .null
        }
    }

    func textParameter(_ text: String) -> SQLValue { .text(Self.escaped(text)) }

    /// Text as the `fields` column holds it for queries: PostgreSQL's text cannot hold
    /// U+0000, so U+0000 becomes U+0001 U+0001 and U+0001 becomes U+0001 U+0002. The code is
    /// prefix-free and keeps the order of Unicode scalars (every other scalar is above
    /// U+0001), so comparisons, orders and prefixes of escaped text are those of the text.
    static func escaped(_ text: String) -> String {
        guard needsEscaping(text) else { return text }
        // Bytes, not a String.UnicodeScalarView: appending to the view copies the whole string
        // each time on Linux, quadratic in the number of U+0000 and U+0001.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 16)
        for byte in text.utf8 {
            switch byte {
            case 0: bytes.append(1); bytes.append(1)
            case 1: bytes.append(1); bytes.append(2)
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether ``escaped(_:)`` changes `text`.
    static func needsEscaping(_ text: String) -> Bool {
        text.utf8.contains { $0 <= 1 }
    }

    /// The text of `d` in JSON's notation as the `fields` column holds it: whole numbers as
    /// their exact digits (from 2^53 on every double is one), others the shortest text that
    /// reads back as `d`.
    static func number(_ d: Double) -> String {
        guard d.isFinite, d == d.rounded(.towardZero) else { return d.description }
        return ByteOutput.exactDigits(ofWhole: d) + ".0"
    }

    func anyElement(of name: String, family: QueryRules.OrderedFamily, _ test: (String) -> SQLFragment) -> SQLFragment {
        let inner: SQLFragment
        let elements: String
        switch family {
        case .number, .timestamp:
            inner = test("e.value")
            elements = "jsonb_array_elements(\(json(name, 1))) AS e(value)"
        case .string, .reference:
            inner = test("(e.value COLLATE \"C\")")
            elements = "jsonb_array_elements_text(\(json(name, 1))) AS e(value)"
        }
        return SQLFragment(sql: "EXISTS (SELECT 1 FROM \(elements) WHERE \(inner.sql))", parameters: inner.parameters)
    }

    func startsWith(_ column: String, _ prefix: String) -> SQLFragment {
        SQLFragment(sql: "left(\(column), char_length(?)) = ?", parameters: [textParameter(prefix), textParameter(prefix)])
    }

    func distanceKilometres(_ name: String, from origin: Location) -> SQLFragment {
        let lat = "(\(text(name, 1)))::float8", lon = "(\(text(name, 2)))::float8"
        let sql = "(12742.0176 * asin(sqrt(power(sin(radians(\(lat) - ?::float8) / 2), 2) + cos(radians(?::float8)) * cos(radians(\(lat))) * power(sin(radians(\(lon) - ?::float8) / 2), 2))))"
        return SQLFragment(sql: sql, parameters: [.real(origin.latitude), .real(origin.latitude), .real(origin.longitude)])
    }

    /// PostgreSQL cannot tokenize as Stratus does; the engine checks the words of the rows it reads.
    func wordsWithoutIndex(_ words: [String], all: Bool) -> SQLFragment? { nil }

    /// The family's rank, the value of the number and timestamp families (`jsonb`), then the
    /// value of the string and reference families (text): within one rank only one of the
    /// two values is there, so the three columns order as Stratus's rules say.
    func undeclaredSortColumns(_ name: String) -> [String] {
        ["(CASE \(tag(name)) WHEN 'I' THEN 1 WHEN 'F' THEN 1 WHEN 'D' THEN 2 WHEN 'S' THEN 3 WHEN 'R' THEN 4 END)",
         "(CASE WHEN \(tag(name)) IN ('I', 'F', 'D') THEN \(json(name, 1)) END)",
         "(CASE WHEN \(tag(name)) IN ('S', 'R') THEN \(text(name, 1)) END COLLATE \"C\")"]
    }

    func undeclaredSortValues(_ value: FieldValue?) -> [SQLValue] {
        guard let value, let family = QueryRules.orderedFamily(of: value) else { return [.null, .null, .null] }
        switch family {
        case .number, .timestamp: return [.integer(Int64(family.rawValue)), parameter(value), .null]
        case .string, .reference: return [.integer(Int64(family.rawValue)), .null, parameter(value)]
        }
    }

    func sortParameter(_ value: FieldValue?) -> SQLValue { value.map(parameter) ?? .null }

    /// PostgreSQL puts NULL last ascending unless told: Stratus wants it first ascending and
    /// last descending (a btree index in ASC NULLS FIRST order serves both, backwards).
    func orderTerm(_ expression: String, ascending: Bool) -> String {
        expression + (ascending ? " ASC NULLS FIRST" : " DESC NULLS LAST")
    }

    /// The primary key (zone_id, record_name) is in PostgreSQL's default order (NULLS LAST
    /// ascending); the record name is never NULL, so the order is the same, and the key serves
    /// it without a sort (`NULLS FIRST` would make PostgreSQL sort every row of the zone).
    func primaryKeyOrderTerm(_ expression: String, ascending: Bool) -> String {
        expression + (ascending ? " ASC" : " DESC")
    }

    func zoneRows(_ zoneRow: Int64, inStorageOrder: Bool) -> SQLFragment {
        SQLFragment(sql: "\(table)zone_id = ?", parameters: [.integer(zoneRow)])
    }

    func tiebreak(hasIndexedIn: Bool) -> String { "\(table)record_name" }

    func limitClause(_ limit: Int) -> String { limit < 0 ? "" : " LIMIT \(limit)" }

    // MARK: - Bounded index entries

    /// The characters (Unicode scalars) of a string key that an `ix_` index holds. A btree
    /// entry may not exceed 2,704 bytes, and a string field may hold megabytes: 256 scalars
    /// take at most 1,024 bytes, so an entry of the zone, two such keys and a record name
    /// (at most 255 bytes) fits. Queries compare the prefix, then the whole value.
    static let indexPrefixLength = 256
    /// The bytes of a word that `record_tokens` holds: with the zone and a record name, an
    /// entry of its primary key stays within the btree's 2,704 bytes.
    static let wordKeyLength = 1_000

    /// `left()` counts characters, which in a UTF-8 database are Unicode scalars.
    func indexPrefix(_ expression: String) -> String? { "left(\(expression), \(Self.indexPrefixLength))" }

    func indexPrefix(of parameter: SQLValue) -> SQLValue {
        guard case .text(let text) = parameter else { return parameter }
        // The escaped text: the prefix of what the column holds (``escaped(_:)``).
        let scalars = text.unicodeScalars
        guard scalars.count > Self.indexPrefixLength else { return parameter }
        return .text(String(String.UnicodeScalarView(scalars.prefix(Self.indexPrefixLength))))
    }

    func wordKey(_ word: String) -> String { Self.wordKey(word) }

    /// `word` cut to at most ``wordKeyLength`` bytes on a Unicode scalar boundary.
    static func wordKey(_ word: String) -> String {
        guard word.utf8.count > wordKeyLength else { return word }
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in word.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > wordKeyLength { break }
            kept.append(scalar)
        }
        return String(kept)
    }
}

/// SQL written with `?` placeholders, numbered as PostgreSQL wants them (`$1`, `$2`, …).
/// Placeholders inside quoted literals and identifiers are left alone.
///
/// ```swift
/// PostgresSQL.numbered("a = ? AND b = 'x?'")   // "a = $1 AND b = 'x?'"
/// ```
enum PostgresSQL {
    static func numbered(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                result.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                result.append(character)
            } else if character == "?" {
                number += 1
                result += "$\(number)"
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// A shared SQL value as a PostgreSQL parameter.
    static func value(_ value: SQLValue) -> PostgresValue {
        switch value {
        case .null: .null
        case .integer(let i): .int64(i)
        case .real(let d): .double(d)
        case .text(let s): .text(s)
        case .blob(let b): .bytea(b)
        }
    }
}
