/// Who a login is in a container: the user record name the container's records carry for them,
/// and the security roles they hold in the public database.
///
/// Without an entry, a login's record name is derived from the container and the login
/// (``derivedRecordName(containerIdentifier:login:)``), the same in every process; an entry maps
/// a login onto another name (the owner of records imported from CloudKit) and gives roles.
/// Both environments of a container share its directory.
///
/// ```swift
/// try await container.saveUsers([UserDirectoryEntry(login: "carol", userRecordName: "_0f1e…", roles: ["moderator"])])
/// ```
public struct UserDirectoryEntry: Hashable, Sendable, Codable {
    /// The name a container is opened with (`userName:`, `$STRATUS_USER`, `--user`).
    public let login: String
    /// The user's record name, as creator and modifier fields, owners and ``Container/userRecordID()`` show it.
    public var userRecordName: String
    /// The custom roles the user holds; CloudKit's own roles (`_world`, `_icloud`, `_creator`)
    /// apply by themselves and are not listed.
    public var roles: Set<SecurityRole>

    public init(login: String, userRecordName: String, roles: Set<SecurityRole> = []) {
        self.login = login
        self.userRecordName = userRecordName
        self.roles = roles
    }

    /// The user record name of a login without a directory entry: `_` and the first 128 bits of
    /// SHA-256 of the container identifier, a zero byte and the login, in lowercase hexadecimal,
    /// as CloudKit's user record names look.
    ///
    /// ```swift
    /// UserDirectoryEntry.derivedRecordName(containerIdentifier: "com.example.todo", login: "alice")   // "_36e7614dafc1691e500e6e80e862dc9b"
    /// ```
    public static func derivedRecordName(containerIdentifier: String, login: String) -> String {
        let digest = SHA256Hasher.digest(Array(containerIdentifier.utf8) + [0] + Array(login.utf8))
        return "_" + digest.hexadecimal.prefix(32)
    }

    /// Whether `name` has the form of a CloudKit user record name: `_` and 32 lowercase
    /// hexadecimal digits.
    public static func isUserRecordName(_ name: String) -> Bool {
        let bytes = name.utf8
        return bytes.count == 33 && bytes.first == UInt8(ascii: "_")
            && bytes.dropFirst().allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// Checks the login (1–255 characters, no control character), the record name (a valid
    /// record name starting with `_`, as CloudKit's user record names do) and the roles (custom
    /// roles only).
    ///
    /// ```swift
    /// try entry.validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws(StratusError) {
        try Self.checkLogin(login)
        try Naming.checkRecordName(userRecordName, allowSystemNames: true)
        guard userRecordName.hasPrefix("_") else {
            throw StratusError(.invalidArguments, "user record name '\(userRecordName)' of login '\(login)' does not start with '_', as CloudKit's user record names do")
        }
        // CloudKit's names for the current user and for its security roles name no one user:
        // records of a user so named would read as every reader's own, or as a role's.
        if userRecordName == RecordZone.ID.currentUserDefaultOwner || SecurityRole(userRecordName).isSystem {
            throw StratusError(.invalidArguments, "user record name '\(userRecordName)' of login '\(login)' is CloudKit's name for \(userRecordName == RecordZone.ID.currentUserDefaultOwner ? "the current user" : "a security role"), not a user's; CloudKit's user record names are _ and 32 hex digits")
        }
        for role in roles.sorted() {
            if role.isSystem {
                throw StratusError(.invalidArguments, "login '\(login)' is given the role \(role.name), which CloudKit gives by itself; list only custom roles")
            }
            try role.validate()
        }
    }

    /// Checks a login name: 1–255 characters without a control character.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public static func checkLogin(_ login: String) throws(StratusError) {
        if login.isEmpty { throw StratusError(.invalidArguments, "a login name is empty") }
        if login.utf8.count > Naming.maximumIdentifierLength {
            throw StratusError(.invalidArguments, "login name '\(login.prefix(40))…' is longer than \(Naming.maximumIdentifierLength) bytes")
        }
        if login.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw StratusError(.invalidArguments, "login name '\(login.debugDescription)' has a control character")
        }
    }
}
