import Foundation

/// Who a login is in a container: the user record name the container's records carry for them,
/// the security roles they hold in the public database, and what user discovery finds them by
/// (email addresses, phone numbers, a name) when they are discoverable.
///
/// Without an entry, a login's record name is derived from the container and the login
/// (``derivedRecordName(containerIdentifier:login:)``), the same in every process; an entry maps
/// a login onto another name (the owner of records imported from CloudKit) and gives roles.
/// Both environments of a container share its directory.
///
/// As in CloudKit, other users find a user (``Container/userIdentity(forEmailAddress:)``,
/// ``DiscoverUserIdentitiesOperation``, ``FetchShareParticipantsOperation``) only while
/// ``isDiscoverable``; a user always finds themself. The administrator sets it here, and a user
/// grants or revokes it for themself with ``Container/requestApplicationPermission(_:)``.
///
/// ```swift
/// try await container.saveUsers([UserDirectoryEntry(login: "carol", userRecordName: "_0f1e…", roles: ["moderator"])])
/// var bob = UserDirectoryEntry(login: "bob", userRecordName: "_5a0f3c9e8b7d6a4f2e1c0b9a8d7e6f5a")
/// bob.emailAddresses = ["bob@example.com"]
/// bob.nameComponents = PersonNameComponents(givenName: "Bob", familyName: "Ross")
/// bob.isDiscoverable = true
/// try await container.saveUsers([bob])
/// ```
public struct UserDirectoryEntry: Hashable, Sendable, Codable {
    /// The name a container is opened with (`userName:`, `$STRATUS_USER`, `--user`).
    public let login: String

    /// Whether the entry is the one of `login`, compared by bytes as the store keys logins:
    /// "josé" composed and "josé" decomposed, equal as Swift strings, are two users.
    ///
    /// ```swift
    /// let mine = entries.first { $0.hasLogin("ada") }
    /// ```
    public func hasLogin(_ login: String) -> Bool {
        self.login.utf8.elementsEqual(login.utf8)
    }
    /// The user's record name, as creator and modifier fields, owners and ``Container/userRecordID()`` show it.
    public var userRecordName: String
    /// The custom roles the user holds; CloudKit's own roles (`_world`, `_icloud`, `_creator`)
    /// apply by themselves and are not listed.
    public var roles: Set<SecurityRole>
    /// The email addresses user discovery finds the user by (compared without regard to case),
    /// each the user's alone in the container.
    public var emailAddresses: [String]
    /// The phone numbers user discovery finds the user by (compared by their digits and a
    /// leading `+`: `+1 (555) 010-0100` is `+15550100100`), each the user's alone in the
    /// container.
    public var phoneNumbers: [String]
    /// The user's name, as discovered identities carry it.
    public var nameComponents: PersonNameComponents?
    /// Whether other users find the user by discovery, as CloudKit's `.userDiscoverability`
    /// permission says: `false` until the administrator or the user grants it.
    public var isDiscoverable: Bool

    /// An entry; a user is found by discovery only once given addresses and made discoverable.
    ///
    /// ```swift
    /// let entry = UserDirectoryEntry(login: "bob", userRecordName: "_5a0f3c9e8b7d6a4f2e1c0b9a8d7e6f5a", emailAddresses: ["bob@example.com"], isDiscoverable: true)
    /// ```
    public init(login: String, userRecordName: String, roles: Set<SecurityRole> = [], emailAddresses: [String] = [], phoneNumbers: [String] = [],
                nameComponents: PersonNameComponents? = nil, isDiscoverable: Bool = false) {
        self.login = login
        self.userRecordName = userRecordName
        self.roles = roles
        self.emailAddresses = emailAddresses
        self.phoneNumbers = phoneNumbers
        self.nameComponents = nameComponents
        self.isDiscoverable = isDiscoverable
    }

    private enum CodingKeys: String, CodingKey {
        case login, userRecordName, roles, emailAddresses, phoneNumbers, nameComponents, isDiscoverable
    }

    /// Decodes an entry; entries encoded before discovery came (without its keys) decode as
    /// undiscoverable, without addresses.
    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(login: try values.decode(String.self, forKey: .login), userRecordName: try values.decode(String.self, forKey: .userRecordName),
                  roles: try values.decodeIfPresent(Set<SecurityRole>.self, forKey: .roles) ?? [],
                  emailAddresses: try values.decodeIfPresent([String].self, forKey: .emailAddresses) ?? [],
                  phoneNumbers: try values.decodeIfPresent([String].self, forKey: .phoneNumbers) ?? [],
                  nameComponents: try values.decodeIfPresent(PersonNameComponents.self, forKey: .nameComponents),
                  isDiscoverable: try values.decodeIfPresent(Bool.self, forKey: .isDiscoverable) ?? false)
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

    /// Checks a user record name a login is to act under: a valid record name starting with
    /// `_`, as CloudKit's user record names do, and not CloudKit's name for the current user or
    /// for a security role.
    ///
    /// ```swift
    /// try UserDirectoryEntry.checkUserRecordName("_0123456789abcdef0123456789abcdef", of: "carol")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public static func checkUserRecordName(_ userRecordName: String, of login: String) throws(StratusError) {
        try Naming.checkRecordName(userRecordName, allowSystemNames: true)
        guard userRecordName.hasPrefix("_") else {
            throw StratusError(.invalidArguments, "user record name '\(userRecordName)' of login '\(login)' does not start with '_', as CloudKit's user record names do")
        }
        // CloudKit's names for the current user and for its security roles name no one user:
        // records of a user so named would read as every reader's own, or as a role's.
        if userRecordName == RecordZone.ID.currentUserDefaultOwner || SecurityRole(userRecordName).isSystem {
            throw StratusError(.invalidArguments, "user record name '\(userRecordName)' of login '\(login)' is CloudKit's name for \(userRecordName == RecordZone.ID.currentUserDefaultOwner ? "the current user" : "a security role"), not a user's; CloudKit's user record names are _ and 32 hex digits")
        }
    }

    /// Checks the login (1–255 characters, no control character), the record name (a valid
    /// record name starting with `_`, as CloudKit's user record names do), the roles (custom
    /// roles only) and the addresses (``checkEmailAddress(_:)``, ``checkPhoneNumber(_:)``; none
    /// twice).
    ///
    /// ```swift
    /// try entry.validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws(StratusError) {
        try Self.checkLogin(login)
        try Self.checkUserRecordName(userRecordName, of: login)
        for role in roles.sorted() {
            if role.isSystem {
                throw StratusError(.invalidArguments, "login '\(login)' is given the role \(role.name), which CloudKit gives by itself; list only custom roles")
            }
            try role.validate()
        }
        var keys: Set<String> = []
        for address in emailAddresses {
            guard keys.insert(try Self.checkEmailAddress(address)).inserted else {
                throw StratusError(.invalidArguments, "login '\(login)' lists email address '\(address)' twice")
            }
        }
        for number in phoneNumbers {
            guard keys.insert(try Self.checkPhoneNumber(number)).inserted else {
                throw StratusError(.invalidArguments, "login '\(login)' lists phone number '\(number)' twice")
            }
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
