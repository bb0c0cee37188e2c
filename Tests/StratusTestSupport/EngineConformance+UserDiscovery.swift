import Foundation
import Stratus
import Testing

// MARK: - User discovery

extension EngineConformance {
    static let userDiscoveryCases: [TestCase] = [
        TestCase("user discovery: a discoverable user is found by email address (in any case), phone number (with any punctuation) and user record ID, with their name; an unknown address finds no one", discoverableUserIsFound),
        TestCase("user discovery: an undiscoverable user is found by no one else, by address or record ID, but finds themself (also without a directory entry); requestApplicationPermission makes them found and revoking hides them again", undiscoverableUserFindsOnlyThemself),
        TestCase("user discovery: fetched share participants are added to a share and the invited user accepts it and reaches the shared records; an unknown address fails alone with unknownItem", fetchedParticipantAcceptsShare),
        TestCase("user directory: addresses, names and discoverability round-trip; an address of another login is constraintViolation, a malformed one invalidArguments, and discovery without a user notAuthenticated", directoryDiscoveryFields),
    ]

    /// Bob's directory entry: two addresses, a name, discoverable or not.
    private static func saveBob(_ env: Environment, discoverable: Bool) async throws -> UserDirectoryEntry {
        let bob = UserDirectoryEntry(login: "bob", userRecordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: Environment.containerIdentifier, login: "bob"),
                                     emailAddresses: ["bob@example.com"], phoneNumbers: ["+1 (555) 010-0100"],
                                     nameComponents: PersonNameComponents(givenName: "Bob", familyName: "Ross"), isDiscoverable: discoverable)
        try await env.container(user: "alice").saveUsers([bob])
        return bob
    }

    private static func discoverableUserIsFound(_ env: Environment) async throws {
        let bob = try await saveBob(env, discoverable: true)
        let alice = env.container(user: "alice")
        let byEmail = try #require(try await alice.userIdentity(forEmailAddress: "Bob@Example.COM"))
        #expect(byEmail.userRecordID?.recordName == bob.userRecordName && byEmail.hasiCloudAccount)
        #expect(byEmail.nameComponents?.givenName == "Bob" && byEmail.nameComponents?.familyName == "Ross")
        #expect(byEmail.lookupInfo?.emailAddress == "Bob@Example.COM", "the lookup that found them")
        #expect(try await alice.userIdentity(forPhoneNumber: "+15550100100")?.userRecordID?.recordName == bob.userRecordName)
        #expect(try await alice.userIdentity(forUserRecordID: Record.ID(recordName: bob.userRecordName))?.nameComponents?.givenName == "Bob")
        #expect(try await alice.userIdentity(forEmailAddress: "nobody@example.com") == nil)
        #expect(try await alice.userIdentity(forPhoneNumber: "+15550100199") == nil)
        #expect(try await alice.userIdentity(forUserRecordID: Record.ID(recordName: "_00000000000000000000000000000000")) == nil)

        // The operation reports each lookup that found someone, with that lookup, and no other.
        let lookups = [UserIdentity.LookupInfo(emailAddress: "nobody@example.com"), UserIdentity.LookupInfo(phoneNumber: "+1 555 010 0100"),
                       UserIdentity.LookupInfo(emailAddress: "bob@example.com")]
        let found = DiscoveredIdentities()
        let op = DiscoverUserIdentitiesOperation(userIdentityLookupInfos: lookups)
        op.userIdentityDiscoveredBlock = { identity, info in found.append(identity.userRecordID?.recordName, info.emailAddress ?? info.phoneNumber) }
        let result: Result<Void, any Error> = await withCheckedContinuation { continuation in
            op.discoverUserIdentitiesResultBlock = { continuation.resume(returning: $0) }
            alice.add(op)
        }
        #expect((try? result.get()) != nil, "\(result)")
        #expect(found.items.map(\.0) == [bob.userRecordName, bob.userRecordName] && found.items.map(\.1) == ["+1 555 010 0100", "bob@example.com"])
        // Lookups are values, as CloudKit's are: one made again keys the same dictionary entry.
        let again = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
        #expect(again == lookups[2] && again.hashValue == lookups[2].hashValue && again != lookups[0])
        #expect(Set(lookups + [again, UserIdentity.LookupInfo(userRecordID: Record.ID(recordName: bob.userRecordName))]).count == 4)
    }

    private static func undiscoverableUserFindsOnlyThemself(_ env: Environment) async throws {
        let bobEntry = try await saveBob(env, discoverable: false)
        let alice = env.container(user: "alice")
        let bob = env.container(user: "bob")
        #expect(try await alice.userIdentity(forEmailAddress: "bob@example.com") == nil)
        #expect(try await alice.userIdentity(forPhoneNumber: "+15550100100") == nil)
        #expect(try await alice.userIdentity(forUserRecordID: Record.ID(recordName: bobEntry.userRecordName)) == nil)
        #expect(try await bob.userIdentity(forEmailAddress: "bob@example.com")?.nameComponents?.givenName == "Bob", "a user finds themself")
        #expect(try await bob.applicationPermissionStatus(for: .userDiscoverability) == .initialState)

        #expect(try await bob.requestApplicationPermission(.userDiscoverability) == .granted)
        #expect(try await bob.applicationPermissionStatus(for: .userDiscoverability) == .granted)
        #expect(try await alice.userIdentity(forEmailAddress: "bob@example.com")?.userRecordID?.recordName == bobEntry.userRecordName)
        let kept = try #require(try await alice.users().first { $0.login == "bob" })
        #expect(kept.emailAddresses == bobEntry.emailAddresses && kept.nameComponents == bobEntry.nameComponents, "consent keeps the rest of the entry")

        try await bob.revokeApplicationPermission(.userDiscoverability)
        #expect(try await alice.userIdentity(forEmailAddress: "bob@example.com") == nil)
        #expect(try await bob.applicationPermissionStatus(for: .userDiscoverability) == .initialState)

        // Carol has no directory entry: she finds herself by her record ID or CloudKit's alias
        // for it, no one else finds her until she consents, which gives her an entry.
        let carol = env.container(user: "carol")
        let carolID = try await carol.userRecordID()
        #expect(try await carol.userIdentity(forUserRecordID: carolID)?.userRecordID == carolID)
        #expect(try await carol.userIdentity(forUserRecordID: Record.ID(recordName: CurrentUserDefaultName))?.userRecordID == carolID)
        #expect(try await alice.userIdentity(forUserRecordID: carolID) == nil)
        #expect(try await carol.requestApplicationPermission(.userDiscoverability) == .granted)
        #expect(try await alice.userIdentity(forUserRecordID: carolID)?.userRecordID == carolID)
        #expect(try await alice.users().first { $0.login == "carol" }?.userRecordName == carolID.recordName, "under the record name she had")
    }

    private static func fetchedParticipantAcceptsShare(_ env: Environment) async throws {
        _ = try await saveBob(env, discoverable: true)
        let alice = env.container(user: "alice")
        let bobEmail = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
        let stranger = UserIdentity.LookupInfo(emailAddress: "stranger@example.com")
        let participants = try await alice.shareParticipants(for: [bobEmail, stranger])
        let bob = try #require(try participants[bobEmail]?.get())
        #expect(bob.role == .privateUser && bob.acceptanceStatus == .pending && bob.userIdentity.nameComponents?.givenName == "Bob")
        if case .failure(let error)? = participants[stranger] {
            #expect(stratusError(error)?.code == .unknownItem, "\(error)")
        } else {
            Issue.record("an unknown address makes no participant: \(String(describing: participants[stranger]))")
        }

        let database = alice.privateCloudDatabase
        let zoneID = RecordZone.ID(zoneName: "Lists")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let root = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: zoneID))
        root["title"] = "Groceries"
        let storedRoot = try await database.save(root)
        let share = Share(rootRecord: storedRoot)
        bob.permission = .readWrite
        share.addParticipant(bob)
        let (saves, _) = try await database.modifyRecords(saving: [storedRoot, share], deleting: [])
        let saved = try #require(try saves[share.recordID]?.get() as? Share)

        let bobContainer = env.container(user: "bob")
        let metadata = try await bobContainer.shareMetadata(for: try #require(saved.url))
        #expect(metadata.participantStatus == .pending && metadata.participantPermission == .readWrite)
        try await bobContainer.accept(metadata)
        let owner = try await alice.userRecordID().recordName
        let shared = try await bobContainer.sharedCloudDatabase.record(for: Record.ID(recordName: "groceries", zoneID: RecordZone.ID(zoneName: "Lists", ownerName: owner)))
        #expect(shared["title"] as? String == "Groceries")
        let reread = try #require(try await database.record(for: share.recordID) as? Share)
        #expect(reread.participants.first { $0.role == .privateUser }?.acceptanceStatus == .accepted, "the owner reads Bob accepted")

        // An undiscoverable user is invited by record ID: the participant names the ID alone.
        let daveID = Record.ID(recordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: Environment.containerIdentifier, login: "dave"))
        let dave = try await alice.shareParticipant(forUserRecordID: daveID)
        #expect(dave.userIdentity.userRecordID == daveID && dave.userIdentity.nameComponents == nil)
        await expectDiscoveryCode(.unknownItem) { _ = try await alice.shareParticipant(forEmailAddress: "stranger@example.com") }
        await expectDiscoveryCode(.invalidArguments) { _ = try await alice.shareParticipant(forEmailAddress: "not an address") }
    }

    private static func directoryDiscoveryFields(_ env: Environment) async throws {
        let bob = try await saveBob(env, discoverable: true)
        let alice = env.container(user: "alice")
        #expect(try await alice.users().first { $0.login == "bob" } == bob, "every field round-trips, addresses as given")

        let thief = UserDirectoryEntry(login: "eve", userRecordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: Environment.containerIdentifier, login: "eve"),
                                       emailAddresses: ["BOB@example.com"])
        await expectDiscoveryCode(.constraintViolation) { try await alice.saveUsers([thief]) }
        #expect(try await alice.users().map(\.login) == ["bob"], "nothing saved")
        var malformed = thief
        malformed.emailAddresses = ["eve.example.com"]
        await expectDiscoveryCode(.invalidArguments) { try await alice.saveUsers([malformed]) }
        malformed.emailAddresses = []
        malformed.phoneNumbers = ["call me"]
        await expectDiscoveryCode(.invalidArguments) { try await alice.saveUsers([malformed]) }

        // Bob's entry replaced without addresses: his old address finds no one.
        var moved = bob
        moved.emailAddresses = ["robert@example.com"]
        try await alice.saveUsers([moved])
        #expect(try await alice.userIdentity(forEmailAddress: "bob@example.com") == nil)
        #expect(try await alice.userIdentity(forEmailAddress: "robert@example.com")?.userRecordID?.recordName == bob.userRecordName)

        let nobody = Container.anonymous(identifier: Environment.containerIdentifier, engine: env.engine)
        await expectDiscoveryCode(.notAuthenticated) { _ = try await nobody.userIdentity(forEmailAddress: "bob@example.com") }
        await expectDiscoveryCode(.notAuthenticated) { _ = try await nobody.requestApplicationPermission(.userDiscoverability) }
    }

    private static func expectDiscoveryCode(_ code: StratusError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        let error = stratusError(await caughtError(body))
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
    }
}

/// Identities a discovery block reports from an operation thread: record name and lookup.
private final class DiscoveredIdentities: @unchecked Sendable {
    // `@unchecked Sendable`: every access holds the lock.
    private let lock = NSLock()
    private var stored: [(String?, String?)] = []

    func append(_ recordName: String?, _ lookup: String?) { lock.withLock { stored.append((recordName, lookup)) } }
    var items: [(String?, String?)] { lock.withLock { stored } }
}
