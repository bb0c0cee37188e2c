import Foundation
import Stratus

/// A share for upgrade tests: Alice's zone `Lists` with the root `groceries`, shared with Bob
/// (pending, read-only), saved on `engine` in container `identifier`.
///
/// ```swift
/// let url = try await ShareInvitationFixture.save(on: engine, identifier: "com.example.lists")
/// let metadata = try await bob.shareMetadata(for: url)
/// ```
public enum ShareInvitationFixture {
    /// Saves the share and answers its URL.
    public static func save(on engine: any StorageEngine, identifier: String) async throws -> URL {
        let alice = Container(identifier: identifier, engine: engine, userName: "alice").privateCloudDatabase
        let bobID = try await Container(identifier: identifier, engine: engine, userName: "bob").userRecordID()
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        let root = try await alice.save(Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: lists)))
        let share = Share(rootRecord: root)
        share.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: bobID)))
        let saved = try await alice.modifyRecords(saving: [root, share], deleting: [])
        guard let url = (try saved.saveResults[share.recordID]?.get() as? Share)?.url else {
            throw StratusError(.internalError, "the fixture's share was saved without a URL")
        }
        return url
    }
}
