/// User discovery's rules, decided once above every engine, as CloudKit's:
///
/// - a lookup names a user by email address, phone number or user record ID
///   (``UserIdentity/LookupInfo``); addresses compare as ``UserDirectoryEntry/checkEmailAddress(_:)``
///   and ``UserDirectoryEntry/checkPhoneNumber(_:)`` say;
/// - a signed-in caller finds a user whose directory entry has that address or record name
///   while the user is discoverable (``UserDirectoryEntry/isDiscoverable``), and always finds
///   themself (by their own record name or `__defaultOwner__` too, with no entry);
/// - anyone else is not found, which tells the caller nothing about whether the address is a
///   user's.
///
/// Engines read the candidates (``StorageEngine/findUsers(containerIdentifier:addressKeys:userRecordNames:)``);
/// on PostgreSQL with row-level security, a member's connection cannot read an undiscoverable
/// user's addresses or name at all, so the rule holds for raw SQL too.
///
/// ```swift
/// let found = try UserDiscovery.find([UserIdentity.LookupInfo(emailAddress: "bob@example.com")], engine: engine, context: context)
/// ```
enum UserDiscovery {
    /// The most lookups one read of the store answers; operations split longer lists.
    static let lookupsPerRead = 400

    /// What a lookup asks the store for.
    enum Key: Hashable {
        case address(String)
        case userRecordName(String)
    }

    /// The key of `info`.
    ///
    /// - Throws: `invalidArguments` for an address ``UserDirectoryEntry`` refuses, or a lookup
    ///   naming nothing.
    static func key(of info: UserIdentity.LookupInfo) throws(StratusError) -> Key {
        if let email = info.emailAddress { return .address(try UserDirectoryEntry.checkEmailAddress(email)) }
        if let phone = info.phoneNumber { return .address(try UserDirectoryEntry.checkPhoneNumber(phone)) }
        if let id = info.userRecordID { return .userRecordName(id.recordName) }
        throw StratusError(.invalidArguments, "a user identity lookup names no email address, phone number or user record ID")
    }

    /// The caller's login and record name.
    ///
    /// - Throws: `notAuthenticated` for a caller who is not signed in.
    static func caller(in context: DatabaseContext) throws(StratusError) -> (login: String, userRecordName: String) {
        guard let login = context.userName, let name = context.userRecordName else {
            throw StratusError(.notAuthenticated, "user discovery needs a signed-in user; this container has none (open it with a user name)")
        }
        return (login, name)
    }

    /// The entry the caller finds for each of `keys` (same order), `nil` for no one.
    ///
    /// - Throws: `notAuthenticated` for a caller who is not signed in; store errors.
    static func find(_ keys: [Key], engine: any StorageEngine, context: DatabaseContext) throws -> [UserDirectoryEntry?] {
        let me = try caller(in: context)
        var addressKeys: [String] = []
        var names: [String] = []
        for key in keys {
            switch key {
            case .address(let address): addressKeys.append(address)
            case .userRecordName(let name): names.append(name == CurrentUserDefaultName ? me.userRecordName : name)
            }
        }
        let candidates = try engine.findUsers(containerIdentifier: context.containerIdentifier, addressKeys: addressKeys, userRecordNames: names)
            .filter { $0.isDiscoverable || $0.hasLogin(me.login) }
        return keys.map { key in
            switch key {
            case .address(let address):
                return candidates.first { $0.storedAddresses.contains { $0.key == address } }
            case .userRecordName(let given):
                let name = given == CurrentUserDefaultName ? me.userRecordName : given
                // The caller without an entry still finds themself.
                return candidates.first { $0.userRecordName == name }
                    ?? (name == me.userRecordName ? UserDirectoryEntry(login: me.login, userRecordName: me.userRecordName) : nil)
            }
        }
    }

    /// The identity discovery answers for `entry`, found by `lookupInfo`.
    static func identity(of entry: UserDirectoryEntry, lookupInfo: UserIdentity.LookupInfo) -> UserIdentity {
        UserIdentity(userRecordID: Record.ID(recordName: entry.userRecordName), lookupInfo: lookupInfo, nameComponents: entry.nameComponents, hasiCloudAccount: true)
    }
}
