import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// CloudKit declares its operations' blocks as plain closures (`var recordMatchedBlock:
/// ((CKRecord.ID, Result<CKRecord, any Error>) -> Void)?`), and so does Stratus: this file is
/// compiled in Swift 6 language mode, and the CloudKit code in it (a captured `var` the blocks
/// share, a helper class that is not `Sendable` called from them) compiles unchanged.
@Suite("Operation blocks in Swift 6 language mode, as CloudKit's", .timeLimit(.minutes(30)))
struct Swift6OperationBlocksTests {
    /// A helper as CloudKit code writes one: a plain class, its state changed from the blocks.
    final class NoteLoader {
        private(set) var titles: [String] = []
        let database: Database

        init(database: Database) { self.database = database }

        func load(completion: @escaping ([String]) -> Void) {
            let op = QueryOperation(query: Query(recordType: "Note", predicate: QueryPredicate(value: true)))
            op.recordMatchedBlock = { _, result in
                if case .success(let record) = result, let title: String = record["title"] { self.titles.append(title) }
            }
            op.queryResultBlock = { _ in completion(self.titles.sorted()) }
            database.add(op)
        }
    }

    /// Saves records and counts them in a `var` the blocks share, read by the final block.
    static func save(_ records: [Record], to database: Database, completion: @escaping (Int, (any Error)?) -> Void) {
        var saved = 0
        let op = ModifyRecordsOperation(recordsToSave: records)
        op.perRecordSaveBlock = { _, result in if case .success = result { saved += 1 } }
        op.modifyRecordsResultBlock = { result in
            if case .failure(let error) = result { completion(saved, error) } else { completion(saved, nil) }
        }
        database.add(op)
    }

    @Test("a captured var shared by a save's blocks, and a plain class's state changed from a query's blocks, as CloudKit code has them")
    func capturedStateInBlocks() async throws {
        try await TemporaryStore.with(prefix: "swift6-blocks") { store in
            let database = try Container(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "alice").privateCloudDatabase
            let notes = ["b", "a", "c"].map { title -> Record in
                let note = Record(recordType: "Note")
                note["title"] = title
                return note
            }
            let (saved, error) = await withCheckedContinuation { (continuation: CheckedContinuation<(Int, String?), Never>) in
                Self.save(notes, to: database) { count, error in continuation.resume(returning: (count, error.map { "\($0)" })) }
            }
            #expect(saved == 3 && error == nil, "\(String(describing: error))")

            let titles = await withCheckedContinuation { (continuation: CheckedContinuation<[String], Never>) in
                NoteLoader(database: database).load { continuation.resume(returning: $0) }
            }
            #expect(titles == ["a", "b", "c"])
        }
    }
}
