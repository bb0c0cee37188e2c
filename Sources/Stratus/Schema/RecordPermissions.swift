/// What a security role may do with the records of one type in the public database, as
/// `GRANT READ, CREATE, WRITE TO role` says it.
///
/// ```swift
/// schema.grant([.read, .write], to: .creator)
/// if schema.grants[.world, default: []].contains(.read) { print("public") }
/// ```
public struct RecordPermissions: OptionSet, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Fetch and query the records.
    public static let read = RecordPermissions(rawValue: 1 << 0)
    /// Save new records.
    public static let create = RecordPermissions(rawValue: 1 << 1)
    /// Change and delete existing records.
    public static let write = RecordPermissions(rawValue: 1 << 2)

    /// Each permission with its name in the schema language, in the order `cktool` writes them.
    public static let named: [(permission: RecordPermissions, name: String)] = [(.read, "READ"), (.create, "CREATE"), (.write, "WRITE")]

    /// The permissions as the schema language lists them: `READ, CREATE, WRITE`.
    public var description: String {
        Self.named.filter { contains($0.permission) }.map(\.name).joined(separator: ", ")
    }
}
