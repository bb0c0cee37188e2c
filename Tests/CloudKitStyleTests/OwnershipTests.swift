import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// "Is this mine?" as CloudKit apps ask it, ported mechanically. CloudKit names the current user
// `CKCurrentUserDefaultName` ("__defaultOwner__") in `creatorUserRecordID` and
// `lastModifiedUserRecordID` of the records it hands that user, and other users by their user
// record names; apps compare with the constant, fetch the current user's record under it, and
// query their own records with `creatorUserRecordID == %@`. The CloudKit original is in the
// comments.

final class GameLobby {
    // let database = CKContainer(identifier: "iCloud.com.example.games").publicCloudDatabase
    let container: Container
    var database: Database { container.publicCloudDatabase }

    init(container: Container) {
        self.container = container
    }

    // var isOriginatingUser: Bool { gameRecord?.creatorUserRecordID?.recordName == CKCurrentUserDefaultName }
    static func isOriginatingUser(_ game: Record?) -> Bool {
        game?.creatorUserRecordID?.recordName == CurrentUserDefaultName
    }

    // let op = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: CKCurrentUserDefaultName)])
    // op.perRecordCompletionBlock = { record, recordID, error in … }
    func fetchProfile(completion: @escaping (Record?, Record.ID?, Error?) -> Void) {
        let operation = FetchRecordsOperation(recordIDs: [Record.ID(recordName: CurrentUserDefaultName)])
        operation.perRecordCompletionBlock = { record, recordID, error in
            completion(record, recordID, error)
        }
        database.add(operation)
    }

    // let reference = CKRecord.Reference(recordID: userRecordID, action: .none)
    // let query = CKQuery(recordType: "Game", predicate: NSPredicate(format: "creatorUserRecordID == %@", reference))
    func myGames() async throws -> [String] {
        let userRecordID = try await container.userRecordID()
        let reference = Record.Reference(recordID: userRecordID, action: .none)
        let query = Query(recordType: "Game", predicate: try QueryPredicate(format: "creatorUserRecordID == %@", reference))
        let (results, _) = try await database.records(matching: query)
        return results.compactMap { try? $0.1.get()["name"] as? String }.sorted()
    }
}

@Suite("Ownership as CloudKit tells it: the current user is __defaultOwner__")
struct OwnershipTests {
    @Test("the creator of one's own records reads as CKCurrentUserDefaultName, another user's as their user record name", arguments: TestEngine.all)
    func creatorAsCloudKitTellsIt(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let alice = GameLobby(container: try Container(identifier: "iCloud.com.example.games", store: location, userName: "alice"))
            let bob = GameLobby(container: try Container(identifier: "iCloud.com.example.games", store: location, userName: "bob"))
            let aliceID = try await alice.container.userRecordID()

            let game = Record(recordType: "Game", recordID: Record.ID(recordName: "chess-1"))
            game["name"] = "Chess" as RecordValue
            let saved = try await alice.database.save(game)
            #expect(GameLobby.isOriginatingUser(saved))
            #expect(saved.lastModifiedUserRecordID?.recordName == CurrentUserDefaultName)
            #expect(saved.systemFields.creatorUserRecordID == aliceID, "Stratus's system fields keep the record name")
            #expect(GameLobby.isOriginatingUser(try await alice.database.record(for: game.recordID)))

            // Bob sees alice by her user record name, and himself as __defaultOwner__ once he writes.
            let bobsCopy = try await bob.database.record(for: game.recordID)
            #expect(!GameLobby.isOriginatingUser(bobsCopy))
            #expect(bobsCopy.creatorUserRecordID == aliceID)
            #expect(bobsCopy.value(forKey: "creatorUserRecordID") as? Record.ID == aliceID)

            // Queries, change fetches and a conflict's server record tell it the same way.
            let query = Query(recordType: "Game", predicate: QueryPredicate(value: true))
            let matched = try await alice.database.records(matching: query).matchResults.compactMap { try? $0.1.get() }
            #expect(matched.count == 1 && GameLobby.isOriginatingUser(matched.first))
            let changes = try await alice.database.recordZoneChanges(inZoneWith: .default, since: nil)
            #expect(changes.modificationResultsByID.values.compactMap { try? $0.get().record }.filter(GameLobby.isOriginatingUser).count == 1)
            var aliceRecords: [Record] = []
            for try await record in alice.database.allRecords(matching: query) { aliceRecords.append(record) }
            #expect(aliceRecords.map(GameLobby.isOriginatingUser) == [true])
            do {
                _ = try await alice.database.save(Record(recordType: "Game", recordID: game.recordID))
                Issue.record("a new record with a taken name was saved")
            } catch let error as StratusError {
                #expect(error.code == .serverRecordChanged && GameLobby.isOriginatingUser(error.serverRecord))
            }

            // Archived system fields keep it (the sync libraries' way of keeping records).
            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            saved.encodeSystemFields(with: archiver)
            archiver.finishEncoding()
            let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)
            unarchiver.requiresSecureCoding = true
            #expect(GameLobby.isOriginatingUser(Record(coder: unarchiver)))
        }
    }

    @Test("CKRecord.ID(recordName: CKCurrentUserDefaultName) fetches the current user's record; creatorUserRecordID == %@ finds one's own records", arguments: TestEngine.all)
    func currentUserAlias(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let alice = GameLobby(container: try Container(identifier: "iCloud.com.example.games", store: location, userName: "alice"))
            let bob = GameLobby(container: try Container(identifier: "iCloud.com.example.games", store: location, userName: "bob"))
            let aliceID = try await alice.container.userRecordID()

            let (profile, askedID, error): (Record?, Record.ID?, String?) = await awaitCallback { done in
                alice.fetchProfile { record, id, error in done((record, id, error.map { "\($0)" })) }
            }
            #expect(error == nil, "\(error ?? "")")
            #expect(profile?.recordType == Record.SystemType.userRecord && profile?.recordID == aliceID)
            #expect(askedID?.recordName == CurrentUserDefaultName, "reported under the ID asked for")
            let me = try await alice.database.record(for: Record.ID(recordName: CurrentUserDefaultName))
            #expect(me.recordID == aliceID)

            for (lobby, name) in [(alice, "Chess"), (alice, "Go"), (bob, "Checkers")] {
                let game = Record(recordType: "Game")
                game["name"] = name as RecordValue
                _ = try await lobby.database.save(game)
            }
            #expect(try await alice.myGames() == ["Chess", "Go"])
            #expect(try await bob.myGames() == ["Checkers"])

            // A predicate built from a fetched record's creator (__defaultOwner__) means the caller too.
            let mine = try await alice.database.records(matching: Query(recordType: "Game", predicate: QueryPredicate(value: true)))
                .matchResults.compactMap { try? $0.1.get() }.first { GameLobby.isOriginatingUser($0) }
            let creator = try #require(mine?.creatorUserRecordID)
            let byCreator = try await alice.database.records(matching: Query(recordType: "Game", predicate: try QueryPredicate(format: "creatorUserRecordID == %@", creator)))
            #expect(byCreator.matchResults.count == 2)
            let modifiedByMe = try await bob.database.records(matching: Query(recordType: "Game", predicate: try QueryPredicate(format: "lastModifiedUserRecordID == %@", Record.Reference(recordID: Record.ID(recordName: CurrentUserDefaultName), action: .none))))
            #expect(modifiedByMe.matchResults.count == 1)
        }
    }
}
