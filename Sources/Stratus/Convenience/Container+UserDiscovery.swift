import Foundation

// MARK: - Application permissions

extension Container {
    /// The permissions an app asks its user for, as `CKContainer.ApplicationPermissions`: only
    /// ``userDiscoverability``.
    ///
    /// ```swift
    /// let status = try await container.requestApplicationPermission(.userDiscoverability)
    /// ```
    public struct ApplicationPermissions: OptionSet, Hashable, Sendable {
        public let rawValue: UInt

        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// Other users may find the user by email address, phone number or user record ID
        /// (``DiscoverUserIdentitiesOperation``, ``FetchShareParticipantsOperation``).
        public static let userDiscoverability = ApplicationPermissions(rawValue: 1)
    }

    /// Where a permission stands, as `CKContainer.ApplicationPermissionStatus`.
    ///
    /// ```swift
    /// if try await container.applicationPermissionStatus(for: .userDiscoverability) == .granted { showInBuddyList() }
    /// ```
    public enum ApplicationPermissionStatus: Int, Hashable, Sendable {
        /// Not granted (never asked for, or revoked with ``Container/revokeApplicationPermission(_:)``).
        case initialState = 0
        /// The status could not be found out (the completion handler's error says why).
        case couldNotComplete = 1
        /// Refused; never given by Stratus, where asking is consenting.
        case denied = 2
        /// Granted: other users find the user.
        case granted = 3
    }

    /// The completion handler of the permission calls, as `CKContainer.ApplicationPermissionBlock`.
    public typealias ApplicationPermissionBlock = @Sendable (ApplicationPermissionStatus, (any Error)?) -> Void

    /// Grants `permission` for the container's user, as `CKContainer.requestApplicationPermission(_:)`,
    /// and answers ``ApplicationPermissionStatus/granted``.
    ///
    /// CloudKit asks the user in a prompt; a server has no one to ask, so the call itself is the
    /// user's consent: call it when your user agreed to be found (a setting, a sign-up step).
    /// It records in the container's user directory that the user is discoverable (giving a
    /// login without an entry one, under the record name it already has); other users then find
    /// them by the email addresses and phone numbers the administrator gave their entry, and by
    /// user record ID. ``revokeApplicationPermission(_:)`` takes it back.
    ///
    /// ```swift
    /// let status = try await container.requestApplicationPermission(.userDiscoverability)   // .granted
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; `invalidArguments` for a
    ///   permission other than `.userDiscoverability`; store errors.
    public func requestApplicationPermission(_ permission: ApplicationPermissions) async throws -> ApplicationPermissionStatus {
        try await recordDiscoverability(permission, granted: true)
        return .granted
    }

    /// A Stratus extension: takes back `permission` for the container's user (what CloudKit's
    /// users do in Settings); other users stop finding them, and the status is
    /// ``ApplicationPermissionStatus/initialState`` again.
    ///
    /// ```swift
    /// try await container.revokeApplicationPermission(.userDiscoverability)
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; `invalidArguments` for a
    ///   permission other than `.userDiscoverability`; store errors.
    public func revokeApplicationPermission(_ permission: ApplicationPermissions) async throws {
        try await recordDiscoverability(permission, granted: false)
    }

    /// Where `permission` stands for the container's user, as
    /// `CKContainer.applicationPermissionStatus(for:)`: ``ApplicationPermissionStatus/granted``
    /// while the user is discoverable, else ``ApplicationPermissionStatus/initialState``.
    ///
    /// ```swift
    /// if try await container.applicationPermissionStatus(for: .userDiscoverability) != .granted { offerDiscoverability() }
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; `invalidArguments` for a
    ///   permission other than `.userDiscoverability`; store errors.
    public func applicationPermissionStatus(for permission: ApplicationPermissions) async throws -> ApplicationPermissionStatus {
        try Self.checkPermission(permission)
        return try await publicCloudDatabase.perform { engine, context in
            let me = try UserDiscovery.caller(in: context)
            let entry = try engine.fetchUserDirectory(containerIdentifier: context.containerIdentifier, logins: [me.login]).first { $0.hasLogin(me.login) }
            return entry?.isDiscoverable == true ? .granted : .initialState
        }
    }

    /// Calls `completionHandler` on a background queue with the status after granting
    /// `permission` (``requestApplicationPermission(_:)``), as
    /// `CKContainer.requestApplicationPermission(_:completionHandler:)`; on failure with
    /// ``ApplicationPermissionStatus/couldNotComplete`` and the error.
    ///
    /// ```swift
    /// container.requestApplicationPermission(.userDiscoverability) { status, error in print(status) }
    /// ```
    @preconcurrency public func requestApplicationPermission(_ permission: ApplicationPermissions, completionHandler: @escaping ApplicationPermissionBlock) {
        Task.detached {
            do {
                completionHandler(try await self.requestApplicationPermission(permission), nil)
            } catch {
                completionHandler(.couldNotComplete, error)
            }
        }
    }

    /// Calls `completionHandler` on a background queue with where `permission` stands
    /// (``applicationPermissionStatus(for:)``), as `CKContainer.status(forApplicationPermission:completionHandler:)`;
    /// on failure with ``ApplicationPermissionStatus/couldNotComplete`` and the error.
    ///
    /// ```swift
    /// container.status(forApplicationPermission: .userDiscoverability) { status, _ in print(status == .granted) }
    /// ```
    @preconcurrency public func status(forApplicationPermission permission: ApplicationPermissions, completionHandler: @escaping ApplicationPermissionBlock) {
        Task.detached {
            do {
                completionHandler(try await self.applicationPermissionStatus(for: permission), nil)
            } catch {
                completionHandler(.couldNotComplete, error)
            }
        }
    }

    private static func checkPermission(_ permission: ApplicationPermissions) throws(StratusError) {
        guard permission == .userDiscoverability else {
            throw StratusError(.invalidArguments, "application permission \(permission.rawValue) is not one Stratus knows: the only one is .userDiscoverability (1)")
        }
    }

    private func recordDiscoverability(_ permission: ApplicationPermissions, granted: Bool) async throws {
        try Self.checkPermission(permission)
        try await publicCloudDatabase.perform { engine, context in
            let me = try UserDiscovery.caller(in: context)
            try engine.saveUserDiscoverability(containerIdentifier: context.containerIdentifier, login: me.login, userRecordName: me.userRecordName, isDiscoverable: granted)
        }
    }
}

// MARK: - Discovering users

extension Container {
    /// The user with email address `emailAddress`, as `CKContainer.userIdentity(forEmailAddress:)`:
    /// their identity while they are discoverable (or the caller's own), else `nil`.
    ///
    /// ```swift
    /// if let bob = try await container.userIdentity(forEmailAddress: "bob@example.com") { print(bob.nameComponents?.givenName ?? "") }
    /// ```
    ///
    /// - Throws: `invalidArguments` for a malformed address; `notAuthenticated` for a container
    ///   with no user; store errors.
    public func userIdentity(forEmailAddress emailAddress: String) async throws -> UserIdentity? {
        try await discover(UserIdentity.LookupInfo(emailAddress: emailAddress))
    }

    /// The user with phone number `phoneNumber`, as `CKContainer.userIdentity(forPhoneNumber:)`:
    /// their identity while they are discoverable (or the caller's own), else `nil`.
    ///
    /// ```swift
    /// let bob = try await container.userIdentity(forPhoneNumber: "+1 555 010 0100")
    /// ```
    ///
    /// - Throws: `invalidArguments` for a malformed number; `notAuthenticated` for a container
    ///   with no user; store errors.
    public func userIdentity(forPhoneNumber phoneNumber: String) async throws -> UserIdentity? {
        try await discover(UserIdentity.LookupInfo(phoneNumber: phoneNumber))
    }

    /// The user with user record ID `userRecordID`, as `CKContainer.userIdentity(forUserRecordID:)`:
    /// their identity while they are discoverable (or the caller's own), else `nil`.
    ///
    /// ```swift
    /// let me = try await container.userIdentity(forUserRecordID: try await container.userRecordID())
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; store errors.
    public func userIdentity(forUserRecordID userRecordID: Record.ID) async throws -> UserIdentity? {
        try await discover(UserIdentity.LookupInfo(userRecordID: userRecordID))
    }

    /// Calls `completionHandler` on a background queue with the user of `email`
    /// (``userIdentity(forEmailAddress:)``), as `CKContainer.discoverUserIdentity(withEmailAddress:completionHandler:)`.
    ///
    /// ```swift
    /// container.discoverUserIdentity(withEmailAddress: "bob@example.com") { identity, error in print(identity?.userRecordID ?? "nobody") }
    /// ```
    @preconcurrency public func discoverUserIdentity(withEmailAddress email: String, completionHandler: @escaping @Sendable (UserIdentity?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.userIdentity(forEmailAddress: email) }
    }

    /// Calls `completionHandler` on a background queue with the user of `phoneNumber`
    /// (``userIdentity(forPhoneNumber:)``), as `CKContainer.discoverUserIdentity(withPhoneNumber:completionHandler:)`.
    ///
    /// ```swift
    /// container.discoverUserIdentity(withPhoneNumber: "+15550100100") { identity, _ in print(identity != nil) }
    /// ```
    @preconcurrency public func discoverUserIdentity(withPhoneNumber phoneNumber: String, completionHandler: @escaping @Sendable (UserIdentity?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.userIdentity(forPhoneNumber: phoneNumber) }
    }

    /// Calls `completionHandler` on a background queue with the user of `userRecordID`
    /// (``userIdentity(forUserRecordID:)``), as `CKContainer.discoverUserIdentity(withUserRecordID:completionHandler:)`.
    ///
    /// ```swift
    /// container.discoverUserIdentity(withUserRecordID: id) { identity, _ in print(identity?.nameComponents?.givenName ?? "?") }
    /// ```
    @preconcurrency public func discoverUserIdentity(withUserRecordID userRecordID: Record.ID, completionHandler: @escaping @Sendable (UserIdentity?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.userIdentity(forUserRecordID: userRecordID) }
    }

    private func discover(_ info: UserIdentity.LookupInfo) async throws -> UserIdentity? {
        let found = Collector<UserIdentity>()
        try await publicCloudDatabase.run { finish in
            let op = DiscoverUserIdentitiesOperation(userIdentityLookupInfos: [info])
            op.userIdentityDiscoveredBlock = { identity, _ in found.append(identity) }
            op.discoverUserIdentitiesResultBlock = { finish($0) }
            return op
        }
        return found.items.first
    }

    /// Runs `body` on a background task and hands its answer or error to `completionHandler`.
    private func calling<T: Sendable>(_ completionHandler: @escaping @Sendable (T?, (any Error)?) -> Void,
                                      _ body: @escaping @Sendable (Container) async throws -> T?) {
        Task.detached {
            do {
                completionHandler(try await body(self), nil)
            } catch {
                completionHandler(nil, error)
            }
        }
    }
}

// MARK: - Share participants

extension Container {
    /// Participants for `lookupInfos`, as `CKContainer.shareParticipants(for:)`: each lookup with
    /// its participant or its own error (see ``FetchShareParticipantsOperation`` for which
    /// lookups make one).
    ///
    /// ```swift
    /// let bob = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
    /// if case .success(let participant)? = try await container.shareParticipants(for: [bob])[bob] { share.addParticipant(participant) }
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; store errors (a lookup's own
    ///   failure is in its result).
    public func shareParticipants(for lookupInfos: [UserIdentity.LookupInfo]) async throws -> [UserIdentity.LookupInfo: Result<Share.Participant, any Error>] {
        let made = Collector<(UserIdentity.LookupInfo, Result<Share.Participant, any Error>)>()
        try await publicCloudDatabase.run { finish in
            let op = FetchShareParticipantsOperation(userIdentityLookupInfos: lookupInfos)
            op.perShareParticipantResultBlock = { info, result in made.append((info, result)) }
            op.fetchShareParticipantsResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(made.items, uniquingKeysWith: { first, _ in first })
    }

    /// A participant for the user with email address `emailAddress`, as
    /// `CKContainer.shareParticipant(forEmailAddress:)`.
    ///
    /// ```swift
    /// let bob = try await container.shareParticipant(forEmailAddress: "bob@example.com")
    /// bob.permission = .readWrite
    /// share.addParticipant(bob)
    /// ```
    ///
    /// - Throws: `unknownItem` when no discoverable user has the address; `invalidArguments` for
    ///   a malformed one; `notAuthenticated` for a container with no user; store errors.
    public func shareParticipant(forEmailAddress emailAddress: String) async throws -> Share.Participant {
        try await shareParticipant(UserIdentity.LookupInfo(emailAddress: emailAddress))
    }

    /// A participant for the user with phone number `phoneNumber`, as
    /// `CKContainer.shareParticipant(forPhoneNumber:)`.
    ///
    /// ```swift
    /// share.addParticipant(try await container.shareParticipant(forPhoneNumber: "+15550100100"))
    /// ```
    ///
    /// - Throws: `unknownItem` when no discoverable user has the number; `invalidArguments` for
    ///   a malformed one; `notAuthenticated` for a container with no user; store errors.
    public func shareParticipant(forPhoneNumber phoneNumber: String) async throws -> Share.Participant {
        try await shareParticipant(UserIdentity.LookupInfo(phoneNumber: phoneNumber))
    }

    /// A participant for the user `userRecordID`, as `CKContainer.shareParticipant(forUserRecordID:)`:
    /// with their name while they are discoverable.
    ///
    /// ```swift
    /// share.addParticipant(try await container.shareParticipant(forUserRecordID: bobID))
    /// ```
    ///
    /// - Throws: `notAuthenticated` for a container with no user; store errors.
    public func shareParticipant(forUserRecordID userRecordID: Record.ID) async throws -> Share.Participant {
        try await shareParticipant(UserIdentity.LookupInfo(userRecordID: userRecordID))
    }

    /// Calls `completionHandler` on a background queue with a participant for `emailAddress`
    /// (``shareParticipant(forEmailAddress:)``), as `CKContainer.fetchShareParticipant(withEmailAddress:completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchShareParticipant(withEmailAddress: "bob@example.com") { participant, error in if let participant { share.addParticipant(participant) } }
    /// ```
    @preconcurrency public func fetchShareParticipant(withEmailAddress emailAddress: String, completionHandler: @escaping @Sendable (Share.Participant?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.shareParticipant(forEmailAddress: emailAddress) }
    }

    /// Calls `completionHandler` on a background queue with a participant for `phoneNumber`
    /// (``shareParticipant(forPhoneNumber:)``), as `CKContainer.fetchShareParticipant(withPhoneNumber:completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchShareParticipant(withPhoneNumber: "+15550100100") { participant, _ in print(participant != nil) }
    /// ```
    @preconcurrency public func fetchShareParticipant(withPhoneNumber phoneNumber: String, completionHandler: @escaping @Sendable (Share.Participant?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.shareParticipant(forPhoneNumber: phoneNumber) }
    }

    /// Calls `completionHandler` on a background queue with a participant for `userRecordID`
    /// (``shareParticipant(forUserRecordID:)``), as `CKContainer.fetchShareParticipant(withUserRecordID:completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchShareParticipant(withUserRecordID: bobID) { participant, _ in print(participant?.userIdentity.userRecordID ?? "-") }
    /// ```
    @preconcurrency public func fetchShareParticipant(withUserRecordID userRecordID: Record.ID, completionHandler: @escaping @Sendable (Share.Participant?, (any Error)?) -> Void) {
        calling(completionHandler) { try await $0.shareParticipant(forUserRecordID: userRecordID) }
    }

    private func shareParticipant(_ info: UserIdentity.LookupInfo) async throws -> Share.Participant {
        guard let result = try await shareParticipants(for: [info])[info] else {
            throw StratusError(.internalError, "no share participant result for the lookup")
        }
        return try result.get()
    }
}
