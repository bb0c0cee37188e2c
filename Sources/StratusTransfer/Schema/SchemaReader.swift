import Foundation
import Stratus

/// Reads CloudKit's schema language, the `.ckdb` files `cktool export-schema` writes and
/// `cktool import-schema` reads, into a ``Stratus/ContainerSchema``.
///
/// ```swift
/// let schema = try SchemaReader().read(contentsOf: URL(fileURLWithPath: "schema.ckdb"))
/// for type in schema.recordTypes { print(type.recordType, type.fields.count) }
/// ```
///
/// It reads `DEFINE SCHEMA`, `CREATE ROLE name;` and `RECORD TYPE name ( … );` with fields
/// of every type (`STRING`, `INT64`, `DOUBLE`, `TIMESTAMP`, `BYTES`, `REFERENCE`, `ASSET`,
/// `LOCATION`, `LIST<…>`, `ENCRYPTED …`, `NUMBER [PREFERRED AS INT64|DOUBLE]`), the options
/// `QUERYABLE`, `SORTABLE` and `SEARCHABLE`, and `GRANT READ|CREATE|WRITE[, …] TO role`.
/// Keywords are case-insensitive and names case-sensitive; a name may be double-quoted, and
/// must be when it is one of the reserved words `GRANT`, `PREFERRED`, `QUERYABLE`, `SORTABLE`
/// and `SEARCHABLE`; any other keyword can be a name (`type`, `order`, `timestamp`, `List`).
/// Comments are `// …`, `-- …` (to the end of the line) and `/* … */`. Lines end with LF, CR
/// or CRLF, alike: a file saved with any of them reads the same, and errors count its lines.
/// Files are UTF-8; a byte order mark is skipped (columns count from the character after it),
/// and a UTF-16 file is refused as one.
///
/// **System fields.** CloudKit's `"___createTime"`, `"___createdBy"`, `"___etag"`,
/// `"___modTime"`, `"___modifiedBy"` and `"___recordID"` become Stratus's `creationDate`,
/// `creatorUserRecordID`, `recordChangeTag`, `modificationDate`, `lastModifiedUserRecordID` and
/// `recordName` (``Stratus/SystemField``). Every record type has them, so the schema keeps only
/// those given options, as index declarations (``Stratus/RecordTypeSchema/indexableSystemFields``):
/// `"___recordID" REFERENCE QUERYABLE` gives the type its own record-name index. Their types
/// cannot change, and `"___etag"` takes no option.
///
/// **CloudKit's own types.** `RECORD TYPE "cloudkit.share" ( … "cloudkit.title" STRING, … )`,
/// which exports of containers that share records hold, reads as it is written: dotted names
/// under `cloudkit.` (``Stratus/RecordTypeSchema/isCloudKitRecordType(_:)``) are quoted, and
/// the dotted fields take no option.
///
/// **Users.** CloudKit's containers always have a `Users` record type with `roles LIST<INT64>`,
/// and its exports always show it; a file that leaves it out gets it
/// (``Stratus/ContainerSchema/includeUsersRecordType()``) unless
/// ``includesUsersRecordType`` is false.
///
/// **What is refused**, as CloudKit refuses it: a missing `DEFINE SCHEMA` or `;`, an unknown
/// type, a `LIST` of a `LIST`, `ENCRYPTED` before REFERENCE, ASSET or NUMBER, any option on an
/// encrypted field, `SEARCHABLE` on anything but STRING and LIST<STRING>, `SORTABLE` on a list,
/// a field or record type or role declared twice, a name that breaks CloudKit's naming rules
/// (a letter, then letters, digits and `_`), a field name Stratus keeps for a system field
/// (`recordName`, `recordType`, …), and a grant to a role the file does not create. And, as
/// Stratus's own limits (``limits``), more than 1,000 record types, 1,000 fields in one type,
/// 20,000 fields in all, 2,000 `QUERYABLE`/`SORTABLE`/`SEARCHABLE` options or 1,000 roles in
/// the file.
///
/// - Throws: ``Stratus/StratusError`` `invalidArguments` whose message starts with
///   `line:column:` and says what was expected or what rule was broken, followed by the line
///   and a caret under the column; ``Stratus/StratusError/line`` and
///   ``Stratus/StratusError/column`` carry the position.
public struct SchemaReader: Sendable {
    /// Whether to add the `Users` record type CloudKit always has when the file lacks it.
    public var includesUsersRecordType = true
    /// The largest file ``read(contentsOf:)`` reads, in bytes: 32 MiB, more than the export of
    /// any schema within the default ``limits`` (20,000 fields and 20,000 grants with names of
    /// 255 characters write about 18 MB), so that every stored schema's export reads back.
    public var maximumFileSize = 32 << 20
    /// How much a file may declare: a file past any of these is refused at the declaration
    /// that passes it, with its line and column.
    public var limits = Limits()

    /// How much a schema file may declare: ``ContainerSchema/Limits``.
    public typealias Limits = ContainerSchema.Limits

    public init() {}

    /// Reads a schema from the bytes of a file.
    ///
    /// ```swift
    /// let schema = try SchemaReader().read(Data(contentsOf: url))
    /// ```
    ///
    /// - Throws: ``Stratus/StratusError`` `invalidArguments` with the line and column of the
    ///   first problem.
    public func read(_ data: Data) throws -> ContainerSchema {
        try read(bytes: [UInt8](data))
    }

    /// Reads a schema from text.
    ///
    /// ```swift
    /// let schema = try SchemaReader().read("DEFINE SCHEMA RECORD TYPE Note (title STRING QUERYABLE);")
    /// ```
    ///
    /// - Throws: ``Stratus/StratusError`` `invalidArguments` with the line and column of the
    ///   first problem.
    public func read(_ text: String) throws -> ContainerSchema {
        try read(bytes: Array(text.utf8))
    }

    /// Reads a schema file.
    ///
    /// ```swift
    /// let schema = try SchemaReader().read(contentsOf: URL(fileURLWithPath: "schema.ckdb"))
    /// ```
    ///
    /// - Throws: ``Stratus/StratusError`` `invalidArguments` for a file larger than
    ///   ``maximumFileSize`` or with a problem (with its line and column); the file system's
    ///   error when the file cannot be read.
    public func read(contentsOf url: URL) throws -> ContainerSchema {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let data = try handle.read(upToCount: maximumFileSize + 1) ?? Data()
        if data.count > maximumFileSize {
            throw StratusError(.invalidArguments, "\(url.lastPathComponent) is larger than \(maximumFileSize) bytes; schema files are far smaller")
        }
        return try read(data)
    }

    private func read(bytes: [UInt8]) throws -> ContainerSchema {
        var parser = try SchemaParser(bytes: bytes, limits: limits)
        var schema = try parser.parse()
        if includesUsersRecordType { schema.includeUsersRecordType() }
        schema.includeShareFields()
        return schema
    }
}
