import Foundation

/// Finds users by email address, phone number or user record ID, as
/// `CKDiscoverUserIdentitiesOperation`: ``userIdentityDiscoveredBlock`` runs once for each
/// lookup that finds a user, with the user's identity (user record ID, name); a lookup that finds
/// no one is not reported, as in CloudKit.
///
/// A user is found while discoverable (they granted `.userDiscoverability` with
/// ``Container/requestApplicationPermission(_:)``, or the administrator made their directory
/// entry discoverable); a caller always finds themself. The caller must be signed in
/// (`notAuthenticated` otherwise). A malformed address fails the whole operation with
/// `invalidArguments` before anything is looked up. Run it on any database of the container.
///
/// ```swift
/// let op = DiscoverUserIdentitiesOperation(userIdentityLookupInfos: [UserIdentity.LookupInfo(emailAddress: "bob@example.com")])
/// op.userIdentityDiscoveredBlock = { identity, lookupInfo in
///     print(lookupInfo.emailAddress ?? "", identity.userRecordID?.recordName ?? "", identity.nameComponents?.givenName ?? "")
/// }
/// op.discoverUserIdentitiesResultBlock = { print("done:", $0) }
/// container.add(op)
/// ```
open class DiscoverUserIdentitiesOperation: DatabaseOperation, @unchecked Sendable {
    /// Who to look for.
    public var userIdentityLookupInfos: [UserIdentity.LookupInfo] = []
    /// Each user found, with the lookup that found them, as
    /// `CKDiscoverUserIdentitiesOperation.userIdentityDiscoveredBlock`.
    ///
    /// ```swift
    /// op.userIdentityDiscoveredBlock = { identity, _ in found.append(identity) }
    /// ```
    public var userIdentityDiscoveredBlock: ((UserIdentity, UserIdentity.LookupInfo) -> Void)?
    /// Called once at the end: success (also when no one was found) or the error that failed
    /// the operation.
    ///
    /// ```swift
    /// op.discoverUserIdentitiesResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var discoverUserIdentitiesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block.
    public var discoverUserIdentitiesCompletionBlock: (((any Error)?) -> Void)?

    /// An operation that looks for `userIdentityLookupInfos`, as
    /// `CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos:)`.
    ///
    /// ```swift
    /// let op = DiscoverUserIdentitiesOperation(userIdentityLookupInfos: [UserIdentity.LookupInfo(phoneNumber: "+15550100100")])
    /// ```
    public convenience init(userIdentityLookupInfos: [UserIdentity.LookupInfo]) {
        self.init()
        self.userIdentityLookupInfos = userIdentityLookupInfos
    }

    /// An operation without lookups yet (set ``userIdentityLookupInfos``).
    ///
    /// ```swift
    /// let op = DiscoverUserIdentitiesOperation()
    /// op.userIdentityLookupInfos = infos
    /// ```
    public override init() {
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let infos = userIdentityLookupInfos
        var keys: [UserDiscovery.Key] = []
        for (index, info) in infos.enumerated() {
            do {
                keys.append(try UserDiscovery.key(of: info))
            } catch {
                var refused = error
                refused.message = "user identity lookup \(index + 1) of \(infos.count): \(error.message)"
                return refused
            }
        }
        return try findUsers(keys, engine: engine, context: context) { range, found in
            for (index, entry) in zip(range, found) {
                guard let entry else { continue }
                let info = infos[index]
                userIdentityDiscoveredBlock?(UserDiscovery.identity(of: entry, lookupInfo: info), info)
            }
        }
    }

    override func complete(with error: StratusError?) {
        discoverUserIdentitiesResultBlock?(error.map { .failure($0) } ?? .success(()))
        discoverUserIdentitiesCompletionBlock?(error)
    }
}
