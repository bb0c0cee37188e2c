import Foundation

/// Turns lookups (email addresses, phone numbers, user record IDs) into participants to add to a
/// share, as `CKFetchShareParticipantsOperation`: each participant is a pending private user
/// who may read (``Share/Participant/init(userIdentity:)``) until given another permission, and
/// names the user by their user record ID, which is what accepting the share matches.
///
/// - An email address or phone number finds a discoverable user (see
///   ``DiscoverUserIdentitiesOperation``), or the caller; otherwise that lookup fails with
///   `unknownItem`, whether the address is an undiscoverable user's or no one's. CloudKit
///   makes participants for any address and invites by email; Stratus sends no email and
///   matches accepting users by user record ID, so it makes participants of users only.
/// - A user record ID always makes a participant: with the user's name when they are
///   discoverable, else with the ID alone (what ``Share/Participant/init(userIdentity:)``
///   makes of it), so that an undiscoverable user is invited by the ID their
///   ``Container/userRecordID()`` answers.
/// - A malformed address fails its lookup with `invalidArguments`.
///
/// Each lookup fails alone; the final result is then `partialFailure`. The caller must be signed
/// in (`notAuthenticated` otherwise). Run it on any database of the container.
///
/// ```swift
/// let op = FetchShareParticipantsOperation(userIdentityLookupInfos: [UserIdentity.LookupInfo(emailAddress: "bob@example.com")])
/// op.perShareParticipantResultBlock = { _, result in
///     if let participant = try? result.get() {
///         participant.permission = .readWrite
///         share.addParticipant(participant)
///     }
/// }
/// op.fetchShareParticipantsResultBlock = { _ in container.privateCloudDatabase.save(share) { _, _ in } }
/// container.add(op)
/// ```
open class FetchShareParticipantsOperation: DatabaseOperation, @unchecked Sendable {
    /// Who to make participants of.
    public var userIdentityLookupInfos: [UserIdentity.LookupInfo]?
    /// Each lookup with its participant or its own error, as
    /// `CKFetchShareParticipantsOperation.perShareParticipantResultBlock`.
    ///
    /// ```swift
    /// op.perShareParticipantResultBlock = { info, result in if case .failure(let error) = result { print(info.emailAddress ?? "", error) } }
    /// ```
    public var perShareParticipantResultBlock: ((UserIdentity.LookupInfo, Result<Share.Participant, any Error>) -> Void)?
    /// CloudKit's older per-participant block: each participant made (failed lookups are not
    /// reported to it).
    ///
    /// ```swift
    /// op.shareParticipantFetchedBlock = { share.addParticipant($0) }
    /// ```
    public var shareParticipantFetchedBlock: ((Share.Participant) -> Void)?
    /// Called once at the end: success, `partialFailure` when some lookup failed, or the error
    /// that failed the whole request.
    ///
    /// ```swift
    /// op.fetchShareParticipantsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchShareParticipantsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block.
    public var fetchShareParticipantsCompletionBlock: (((any Error)?) -> Void)?

    /// An operation that makes participants of `userIdentityLookupInfos`, as
    /// `CKFetchShareParticipantsOperation(userIdentityLookupInfos:)`.
    ///
    /// ```swift
    /// let op = FetchShareParticipantsOperation(userIdentityLookupInfos: [UserIdentity.LookupInfo(userRecordID: bobID)])
    /// ```
    public convenience init(userIdentityLookupInfos: [UserIdentity.LookupInfo]) {
        self.init()
        self.userIdentityLookupInfos = userIdentityLookupInfos
    }

    /// An operation without lookups yet (set ``userIdentityLookupInfos``).
    ///
    /// ```swift
    /// let op = FetchShareParticipantsOperation()
    /// op.userIdentityLookupInfos = infos
    /// ```
    public override init() {
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        _ = try UserDiscovery.caller(in: context)
        let infos = userIdentityLookupInfos ?? []
        var unaskable: [Int: StratusError] = [:]
        var keys: [UserDiscovery.Key?] = []
        for (index, info) in infos.enumerated() {
            do {
                keys.append(try UserDiscovery.key(of: info))
            } catch {
                unaskable[index] = error
                keys.append(nil)
            }
        }
        var failed: [String] = []
        let cancelled = try findUsers(keys, engine: engine, context: context) { range, found in
            for (index, entry) in zip(range, found) {
                let info = infos[index]
                let result: Result<Share.Participant, StratusError>
                if let error = unaskable[index] {
                    result = .failure(error)
                } else if let entry {
                    result = .success(Share.Participant(userIdentity: UserDiscovery.identity(of: entry, lookupInfo: info)))
                } else if let id = info.userRecordID, info.emailAddress == nil, info.phoneNumber == nil {
                    result = .success(Share.Participant(userIdentity: UserIdentity(userRecordID: id)))
                } else {
                    let what = info.emailAddress.map { "email address '\($0)'" } ?? "phone number '\(info.phoneNumber ?? "")'"
                    result = .failure(StratusError(.unknownItem, "no discoverable user of \(context.containerIdentifier) has \(what); invite an undiscoverable user by user record ID"))
                }
                switch result {
                case .success(let participant):
                    perShareParticipantResultBlock?(info, .success(participant))
                    shareParticipantFetchedBlock?(participant)
                case .failure(let error):
                    failed.append("lookup \(index + 1): \(error.code)")
                    perShareParticipantResultBlock?(info, .failure(error))
                }
            }
        }
        if let cancelled { return cancelled }
        guard !failed.isEmpty else { return nil }
        return StratusError(.partialFailure, "\(failed.count) of \(infos.count) share participant lookup(s) failed: \(failed.joined(separator: ", "))")
    }

    override func complete(with error: StratusError?) {
        fetchShareParticipantsResultBlock?(error.map { .failure($0) } ?? .success(()))
        fetchShareParticipantsCompletionBlock?(error)
    }
}
