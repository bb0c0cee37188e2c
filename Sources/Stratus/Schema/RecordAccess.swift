/// What one caller may do with the records of one type in the public database, by CloudKit's
/// security roles: `_world` (everyone), `_icloud` (every signed-in user), the custom roles the
/// user directory gives the caller, and `_creator` (the user who created a record, for that
/// record only). Permissions add up across roles. Decided above every engine.
///
/// ```swift
/// let access = RecordAccess(schema, context: context)
/// if let denied = access.denial(.write, recordID: id, recordType: "Post", creator: stored.creatorUserRecordID) { return .failure(denied) }
/// ```
struct RecordAccess: Sendable {
    /// What the caller may do with every record of the type.
    let everyRecord: RecordPermissions
    /// What the caller may do with the records they created (``everyRecord`` and `_creator`'s grants).
    let ownRecords: RecordPermissions
    /// Which roles hold each permission, for messages.
    private let holders: [SecurityRole: RecordPermissions]
    private let userRecordName: String?
    private let isAdministrator: Bool

    /// The access of `context`'s caller to records of the type `schema` describes (or of a type
    /// without a schema, which has CloudKit's defaults, ``RecordTypeSchema/publicDatabaseGrants``).
    /// A type that grants nothing is unusable in the public database, as in CloudKit.
    ///
    /// The `Users` type is CloudKit's: a `Users` schema that grants nothing (a hand-written
    /// `RECORD TYPE Users (nickname STRING)`) has the `Users` type's own grants, and no grant
    /// lets a caller create a `Users` record (``ContainerSchema/defaultUsersRecordType``):
    /// CloudKit makes one per user, so a save that creates one would make another user's record,
    /// of which the saver, as `_creator`, could then write what its user reads as their own.
    init(_ schema: RecordTypeSchema?, context: DatabaseContext) {
        self.init(schema, userRecordName: context.userRecordName, roles: context.roles, isAdministrator: context.isAdministrator)
    }

    /// The access of the user `userRecordName` (nil: not signed in) holding `roles`.
    init(_ schema: RecordTypeSchema?, userRecordName: String?, roles: Set<SecurityRole>, isAdministrator: Bool = false) {
        let isUsers = schema?.recordType == ContainerSchema.usersRecordType
        let grants = schema?.effectiveGrants ?? RecordTypeSchema.publicDatabaseGrants
        var every = grants[.world] ?? []
        if isAdministrator {
            every = [.read, .create, .write]
        } else if userRecordName != nil {
            every.formUnion(grants[.authenticated] ?? [])
            for role in roles { every.formUnion(grants[role] ?? []) }
        }
        var own = userRecordName == nil ? every : every.union(grants[.creator] ?? [])
        if isUsers && !isAdministrator {
            every.remove(.create)
            own.remove(.create)
        }
        everyRecord = every
        ownRecords = own
        holders = grants
        self.userRecordName = userRecordName
        self.isAdministrator = isAdministrator
    }

    /// Whether the caller may do `permission` with a record created by `creator` (`nil`: a new
    /// record, or a creator unknown).
    func allows(_ permission: RecordPermissions, creator: Record.ID?) -> Bool {
        if everyRecord.isSuperset(of: permission) { return true }
        guard let userRecordName, creator?.recordName == userRecordName else { return false }
        return ownRecords.isSuperset(of: permission)
    }

    /// CloudKit's error for an operation the roles do not allow, or `nil` when they do:
    /// `notAuthenticated` for a caller who is not signed in (who may only read what `_world`
    /// may), `permissionFailure` otherwise.
    /// `recordType` `nil`: the message names no type (the record's, to one who may not read it).
    func denial(_ permission: RecordPermissions, recordID: Record.ID?, recordType: String?, creator: Record.ID?) -> StratusError? {
        if isAdministrator { return nil }
        // A refused read names no type: what a record is, is part of what only a reader is shown.
        let subject: String
        if let recordID, permission == .read || recordType == nil {
            subject = " on record '\(recordID.recordName)'"
        } else {
            subject = Self.subject(recordID, recordType ?? "")
        }
        if userRecordName == nil && permission != .read {
            return StratusError(.notAuthenticated, "\(permission) operation not permitted\(subject): writing to the public database needs a signed-in user", recordID: recordID)
        }
        if allows(permission, creator: creator) { return nil }
        return StratusError(userRecordName == nil ? .notAuthenticated : .permissionFailure,
                            "\(permission) operation not permitted\(subject); \(holderText(permission))\(creatorText(permission, creator: creator))",
                            recordID: recordID)
    }

    /// Who the caller is and who created the record, when `_creator` would allow it: the usual
    /// surprise is acting as another user than the one who created the record (another login,
    /// or another engine's default user after a copy).
    ///
    /// Never for a read, nor for a caller who may not read the record: who created a record is
    /// part of what a reader is shown, so a refusal must not tell it to one who may not read it.
    private func creatorText(_ permission: RecordPermissions, creator: Record.ID?) -> String {
        guard let userRecordName, let creator, permission != .read, everyRecord.contains(.read),
              holders[.creator]?.contains(permission) == true else { return "" }
        return ", and the caller (user record \(userRecordName)) did not create the record (its creator is \(creator.recordName))"
    }

    /// Who may do `permission` on the type, for messages.
    private func holderText(_ permission: RecordPermissions) -> String {
        let roles = holders.filter { $0.value.contains(permission) }.keys.sorted().map(\.name)
        // The usual cause: a schema file whose type has no GRANT lines, which CloudKit also
        // leaves unusable in the public database.
        let who = roles.isEmpty
            ? (holders.values.allSatisfy(\.isEmpty) ? "no role (it grants nothing, as a schema's type without GRANT lines; grant to _world, _icloud or _creator in the schema, or use the private database)" : "no role")
            : roles.joined(separator: ", ")
        return userRecordName == nil ? "the type grants \(permission) to \(who), and the caller is not signed in" : "the type grants \(permission) to \(who)"
    }

    private static func subject(_ recordID: Record.ID?, _ recordType: String) -> String {
        recordID.map { " on record '\($0.recordName)' of type \(recordType)" } ?? " on records of type \(recordType)"
    }
}
