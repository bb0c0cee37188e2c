import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A profile kept on the user record, as CloudKit apps do, ported mechanically: the app fetches
// the current user's record from the public database (async, then with
// `CKFetchRecordsOperation.fetchCurrentUserRecordOperation()` and its older blocks), stores
// profile fields on it and saves it back; another user reads the profile by the creator of a
// post. The CloudKit original is in the comments.

final class ProfileStore {
    // let container = CKContainer(identifier: "iCloud.com.example.forum")
    let container: Container
    var database: Database { container.publicCloudDatabase }

    init(container: Container) {
        self.container = container
    }

    // let id = try await container.userRecordID()
    // let me = try await container.publicCloudDatabase.record(for: id)
    // me["nickname"] = nickname as CKRecordValue
    // return try await container.publicCloudDatabase.save(me)
    func saveProfile(nickname: String, bio: String) async throws -> Record {
        let id = try await container.userRecordID()
        let me = try await database.record(for: id)
        guard me.recordType == Record.SystemType.userRecord else { throw StratusError(.internalError, "not a user record") }
        me["nickname"] = nickname as RecordValue
        me["bio"] = bio as RecordValue
        return try await database.save(me)
    }

    // let op = CKFetchRecordsOperation.fetchCurrentUserRecordOperation()
    // op.perRecordCompletionBlock = { record, id, error in … }
    // op.fetchRecordsCompletionBlock = { records, error in completion(record, error) }
    // container.publicCloudDatabase.add(op)
    func fetchMe(completion: @escaping (Record?, Error?) -> Void) {
        let op = FetchRecordsOperation.fetchCurrentUserRecordOperation()
        let found = Collected<Record?>(nil)
        op.perRecordCompletionBlock = { record, _, _ in found.value = record }
        op.fetchRecordsCompletionBlock = { _, error in completion(found.value, error) }
        database.add(op)
    }

    // database.fetch(withRecordID: post.creatorUserRecordID!) { record, error in
    //     completion(record?["nickname"] as? String, error)
    // }
    func authorNickname(of post: Record, completion: @escaping (String?, Error?) -> Void) {
        guard let author = post.creatorUserRecordID else { return completion(nil, nil) }
        database.fetch(withRecordID: author) { record, error in
            completion(record?["nickname"] as? String, error)
        }
    }
}

@Suite("A profile on the user record, ported from CloudKit")
struct UserProfileTests {
    @Test("profile fields saved on one's user record are read by another user through a post's creator; fetchCurrentUserRecordOperation answers it", arguments: TestEngine.all)
    func profileOnUserRecord(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let alice = ProfileStore(container: try Container(identifier: "iCloud.com.example.forum", store: location, userName: "alice"))
            let bob = ProfileStore(container: try Container(identifier: "iCloud.com.example.forum", store: location, userName: "bob"))

            let saved = try await alice.saveProfile(nickname: "Ada", bio: "Counts things")
            #expect(saved["nickname"] as? String == "Ada")
            let post = Record(recordType: "Post")
            post["title"] = "Hello" as RecordValue
            let stored = try await alice.database.save(post)
            // Alice reads herself as __defaultOwner__ (CKCurrentUserDefaultName), as in CloudKit …
            #expect(stored.creatorUserRecordID?.recordName == CurrentUserDefaultName)
            // … and others read her user record name: bob finds the post and its author.
            let seen = try await bob.database.record(for: stored.recordID)
            #expect(seen.creatorUserRecordID == (try await alice.container.userRecordID()))

            let nickname = await awaitCallback { (done: @escaping @Sendable ((String?, String?)) -> Void) in
                bob.authorNickname(of: seen) { nickname, error in done((nickname, error.map { "\($0)" })) }
            }
            #expect(nickname.0 == "Ada" && nickname.1 == nil, "\(nickname)")

            let me = await awaitCallback { (done: @escaping @Sendable ((Record?, String?)) -> Void) in
                alice.fetchMe { record, error in done((record, error.map { "\($0)" })) }
            }
            #expect(me.0?["bio"] as? String == "Counts things" && me.1 == nil, "\(me)")
            #expect(me.0?.recordID == (try await alice.container.userRecordID()))

            // bob's own record is empty on his first fetch; alice's is not his to change.
            let bobs = await awaitCallback { (done: @escaping @Sendable ((Record?, String?)) -> Void) in
                bob.fetchMe { record, error in done((record, error.map { "\($0)" })) }
            }
            #expect(bobs.0?.allKeys() == [] && bobs.1 == nil, "\(bobs)")
            let theirs = try await bob.database.record(for: try await alice.container.userRecordID())
            theirs["nickname"] = "Mallory" as RecordValue
            do {
                try await bob.database.save(theirs)
                Issue.record("bob changed alice's user record")
            } catch let error as StratusError {
                #expect(error.code == .permissionFailure)
            }
        }
    }
}
