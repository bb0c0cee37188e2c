import Foundation
import Stratus

/// Writes a ``Stratus/ContainerSchema`` in CloudKit's schema language, laid out as
/// `cktool export-schema` lays it out, so that Stratus's export and CloudKit's can be diffed.
///
/// ```swift
/// let text = SchemaWriter().text(for: schema)
/// try SchemaWriter().write(schema, to: URL(fileURLWithPath: "schema.ckdb"))
/// ```
///
/// The layout: `DEFINE SCHEMA`, then each statement indented by four spaces and followed by a
/// blank line; roles, record types, fields and grants each sorted by the bytes of their names;
/// every type lists the six system fields (`"___createTime" TIMESTAMP`, …) with the indexes
/// the schema gives them; field names padded to one column; options in the order QUERYABLE,
/// SEARCHABLE, SORTABLE; one `GRANT` per role with its permissions as READ, CREATE, WRITE
/// (CloudKit's defaults for a type that declares none);
/// names quoted only where they must be. The `Users` type CloudKit always has is written
/// when the schema lacks it, unless ``includesUsersRecordType`` is false.
///
/// Compound indexes (``Stratus/RecordTypeSchema/compoundIndexes``) have no form in the
/// language and are not written; ``Stratus/ContainerSchema/keepingCompoundIndexes(of:)`` keeps
/// the stored ones when such a file is imported again.
public struct SchemaWriter: Sendable {
    /// Whether to write the `Users` record type CloudKit always has when the schema lacks it.
    public var includesUsersRecordType = true

    public init() {}

    /// The schema as text.
    ///
    /// ```swift
    /// print(SchemaWriter().text(for: schema), terminator: "")
    /// ```
    public func text(for schema: ContainerSchema) -> String {
        var schema = schema
        if includesUsersRecordType { schema.includeUsersRecordType() }
        schema.includeShareFields()
        var out = "DEFINE SCHEMA\n\n"
        for role in schema.roles.sorted() {
            out += "    CREATE ROLE \(SchemaLanguage.quoted(role.name));\n\n"
        }
        for type in schema.recordTypes.sorted(by: { $0.recordType.utf8.lexicographicallyPrecedes($1.recordType.utf8) }) {
            out += recordType(type)
        }
        return out
    }

    /// The schema as UTF-8 bytes.
    ///
    /// ```swift
    /// FileHandle.standardOutput.write(SchemaWriter().data(for: schema))
    /// ```
    public func data(for schema: ContainerSchema) -> Data {
        Data(text(for: schema).utf8)
    }

    /// Writes the schema to a file, replacing it.
    ///
    /// ```swift
    /// try SchemaWriter().write(schema, to: URL(fileURLWithPath: "schema.ckdb"))
    /// ```
    ///
    /// - Throws: the file system's error when the file cannot be written.
    public func write(_ schema: ContainerSchema, to url: URL) throws {
        try data(for: schema).write(to: url, options: .atomic)
    }

    private func recordType(_ type: RecordTypeSchema) -> String {
        // Every type has every system field; a declaration in the schema only adds indexes.
        var columns: [(name: String, type: String, indexes: RecordTypeSchema.Indexes)] = SystemField.allCases.map { system in
            (system.cloudKitName, SchemaLanguage.keyword(system.cloudKitType), type.field(system.rawValue)?.indexes ?? [])
        }
        for field in type.fields where field.systemField == nil {
            columns.append((field.name, field.schemaLanguageType, field.indexes))
        }
        columns.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        let width = columns.map { SchemaLanguage.quoted($0.name).count }.max() ?? 0
        var items = columns.map { column in
            let name = SchemaLanguage.quoted(column.name)
            let options = SchemaLanguage.options.filter { column.indexes.contains($0.indexes) }.map { " " + $0.name }.joined()
            return name + String(repeating: " ", count: width - name.count + 1) + column.type + options
        }
        // A type that grants nothing gets no GRANT line, which reads back as granting nothing.
        for (role, permissions) in type.effectiveGrants.sorted(by: { $0.key < $1.key }) {
            items.append("GRANT \(permissions) TO \(SchemaLanguage.quoted(role.name))")
        }
        return "    RECORD TYPE \(SchemaLanguage.quoted(type.recordType)) (\n"
            + items.map { "        " + $0 }.joined(separator: ",\n") + "\n    );\n\n"
    }
}
