import Stratus

/// The vocabulary the schema reader and writer share.
enum SchemaLanguage {
    /// Words that stand for themselves wherever they appear (``Stratus/SchemaChange/reservedWords``).
    static var reservedWords: Set<String> { SchemaChange.reservedWords }

    /// Field options, with their indexes, in the order `cktool` writes them.
    static let options: [(name: String, indexes: RecordTypeSchema.Indexes)] = [
        ("QUERYABLE", .queryable), ("SEARCHABLE", .searchable), ("SORTABLE", .sortable),
    ]

    /// The scalar types, by keyword.
    static let scalarTypes: [String: FieldType] = [
        "ASSET": .asset, "BYTES": .bytes, "DOUBLE": .double, "INT64": .int64, "LOCATION": .location,
        "REFERENCE": .reference, "STRING": .string, "TIMESTAMP": .timestamp,
    ]

    /// The types `ENCRYPTED` can precede.
    static let encryptableTypes: Set<FieldType> = [.bytes, .string, .double, .int64, .location, .timestamp]

    /// The keyword of a scalar type.
    static func keyword(_ type: FieldType) -> String { type.schemaLanguageKeyword }

    /// A name as the schema language writes it: bare when it is an identifier that is not a
    /// reserved word, else in double quotes (system fields, `_world`, `"test role"`).
    static func quoted(_ name: String) -> String { SchemaChange.quoted(name) }
}
