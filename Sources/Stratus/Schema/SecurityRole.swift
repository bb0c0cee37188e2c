/// A security role of a container's public database: CloudKit's `_world`, `_icloud` and
/// `_creator`, or a role the schema creates (`CREATE ROLE moderator;`).
///
/// Record type schemas grant roles ``RecordPermissions`` on their records.
///
/// ```swift
/// var schema = RecordTypeSchema(recordType: "Post")
/// schema.grant(.read, to: .world)
/// schema.grant([.create, .write], to: "moderator")
/// ```
public struct SecurityRole: Hashable, Sendable, Comparable, Codable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The role's name as CloudKit writes it: `_world`, or the name given to `CREATE ROLE`.
    public let name: String

    public init(_ name: String) { self.name = name }
    public init(stringLiteral name: String) { self.name = name }

    /// Everyone, signed in or not (`_world`; "World" in CloudKit's dashboard).
    public static let world = SecurityRole("_world")
    /// Every signed-in user (`_icloud`; "Authenticated" in CloudKit's dashboard).
    public static let authenticated = SecurityRole("_icloud")
    /// The user who created a record (`_creator`; "Creator" in CloudKit's dashboard).
    public static let creator = SecurityRole("_creator")
    /// The roles every container has.
    public static let systemRoles: [SecurityRole] = [.creator, .authenticated, .world]

    /// Whether this is one of CloudKit's own roles (``systemRoles``).
    public var isSystem: Bool { Self.systemRoles.contains(self) }

    public var description: String { name }

    /// Orders roles by the bytes of their names, as `cktool export-schema` lists them.
    public static func < (lhs: SecurityRole, rhs: SecurityRole) -> Bool {
        lhs.name.utf8.lexicographicallyPrecedes(rhs.name.utf8)
    }

    /// Checks the name: a system role, or 1–255 characters without a leading `_` (which CloudKit
    /// keeps for its own roles), a control character or a double quote.
    ///
    /// ```swift
    /// try SecurityRole("moderator").validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws(StratusError) {
        if isSystem { return }
        if name.isEmpty { throw StratusError(.invalidArguments, "a role name is empty") }
        if name.utf8.count > Naming.maximumIdentifierLength {
            throw StratusError(.invalidArguments, "role name '\(name.prefix(40))…' is longer than \(Naming.maximumIdentifierLength) characters")
        }
        if name.hasPrefix("_") {
            throw StratusError(.invalidArguments, "role name '\(name)' starts with '_', which CloudKit keeps for _world, _icloud and _creator")
        }
        if name.unicodeScalars.contains(where: { $0 == "\"" || $0.properties.generalCategory == .control }) {
            throw StratusError(.invalidArguments, "role name '\(name)' has a double quote or a control character")
        }
    }

    public init(from decoder: any Decoder) throws {
        name = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}
