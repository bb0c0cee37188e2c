import Foundation
import Stratus
import StratusTestSupport
import Testing

// The to-do model of a CloudKit tutorial, ported mechanically: completion handlers, the older
// operation blocks, `as CKRecordValue` casts, NSNumber-style reads and an NSError check.

struct TodoItem {
    static let recordType = "Todo"
    enum Keys: String { case title, createdAt, done, priority, tags }

    var recordID: Record.ID
    var title: String
    var createdAt: Date
    var done: Bool
    var priority: Int
    var tags: [String]

    init?(record: Record) {
        guard record.recordType == TodoItem.recordType,
              let title = record[Keys.title.rawValue] as? String,
              let createdAt = record[Keys.createdAt.rawValue] as? Date,
              let done = record[Keys.done.rawValue] as? Bool,
              let priority = record[Keys.priority.rawValue] as? Int
        else { return nil }
        self.recordID = record.recordID
        self.title = title
        self.createdAt = createdAt
        self.done = done
        self.priority = priority
        self.tags = record[Keys.tags.rawValue] as? [String] ?? []
    }
}

final class TodoModel {
    let database: Database
    private(set) var items: [TodoItem] = []
    private let lock = NSLock()

    init(container: Container) {
        database = container.publicCloudDatabase
    }

    func add(title: String, priority: Int, tags: [String], completion: @escaping (Record?, Error?) -> Void) {
        let record = Record(recordType: TodoItem.recordType)
        record[TodoItem.Keys.title.rawValue] = title as RecordValue
        record[TodoItem.Keys.createdAt.rawValue] = Date() as RecordValue
        record[TodoItem.Keys.done.rawValue] = false as RecordValue
        record[TodoItem.Keys.priority.rawValue] = priority as RecordValue
        record[TodoItem.Keys.tags.rawValue] = tags as RecordValue
        database.save(record) { saved, error in
            completion(saved, error)
        }
    }

    func markDone(_ recordID: Record.ID, completion: @escaping (Error?) -> Void) {
        database.fetch(withRecordID: recordID) { record, error in
            guard let record = record else {
                completion(error)
                return
            }
            record.setValue(true, forKey: TodoItem.Keys.done.rawValue)
            self.database.save(record) { _, error in completion(error) }
        }
    }

    /// Loads every to-do, newest first, page by page with cursors.
    func load(completion: @escaping (Error?) -> Void) {
        lock.lock()
        items = []
        lock.unlock()
        let query = Query(recordType: TodoItem.recordType, predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
        run(QueryOperation(query: query), completion: completion)
    }

    private func run(_ operation: QueryOperation, completion: @escaping (Error?) -> Void) {
        operation.resultsLimit = 2
        operation.recordFetchedBlock = { record in
            guard let item = TodoItem(record: record) else { return }
            self.lock.lock()
            self.items.append(item)
            self.lock.unlock()
        }
        operation.queryCompletionBlock = { cursor, error in
            if let cursor = cursor {
                self.run(QueryOperation(cursor: cursor), completion: completion)
            } else {
                completion(error)
            }
        }
        database.add(operation)
    }
}

@Suite("A CloudKit to-do tutorial, ported mechanically")
struct TodoTutorialTests {
    @Test("save, page through with cursors, update with key-value coding, read numbers and Booleans as CloudKit gives them", arguments: TestEngine.all)
    func todoApp(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let model = TodoModel(container: container)
            for (index, title) in ["Water the plants", "Buy milk", "Call mum", "Write report", "Pay rent"].enumerated() {
                let (saved, error): (Record?, Error?) = await awaitCallback { done in
                    model.add(title: title, priority: index, tags: index.isMultiple(of: 2) ? ["home"] : []) { done(($0, $1)) }
                }
                #expect(error == nil)
                #expect(saved?.recordChangeTag != nil)
                #expect(saved?["priority"] as? Int == index)
            }

            let loadError: Error? = await awaitCallback { done in model.load { done($0) } }
            #expect(loadError == nil)
            #expect(model.items.count == 5)
            #expect(model.items.map(\.title) == ["Pay rent", "Write report", "Call mum", "Buy milk", "Water the plants"])
            #expect(model.items.allSatisfy { !$0.done })
            #expect(model.items.first?.tags == ["home"])

            let first = try #require(model.items.last)
            let doneError: Error? = await awaitCallback { done in model.markDone(first.recordID) { done($0) } }
            #expect(doneError == nil)
            _ = await awaitCallback { done in model.load { done($0) } } as Error?
            #expect(model.items.first { $0.recordID == first.recordID }?.done == true)
        }
    }

    @Test("a missing record fails with CKErrorDomain code 11, as the tutorial's error check expects", arguments: TestEngine.all)
    func missingRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let (record, error): (Record?, Error?) = await awaitCallback { done in
                container.publicCloudDatabase.fetch(withRecordID: Record.ID(recordName: "nope")) { done(($0, $1)) }
            }
            #expect(record == nil)
            let nsError = try #require(error as NSError?)
            #expect(nsError.domain == "CKErrorDomain")
            #expect(nsError.code == StratusError.Code.unknownItem.rawValue)
            if let ckError = error as? StratusError {
                #expect(ckError.code == .unknownItem)
            } else {
                Issue.record("the error is a StratusError")
            }
        }
    }

    @Test("the account checks tutorials start with: accountStatus and fetchUserRecordID", arguments: TestEngine.all)
    func account(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let (status, error): (AccountStatus, Error?) = await awaitCallback { done in
                container.accountStatus { done(($0, $1)) }
            }
            #expect(status == .available && error == nil)
            switch status {
            case .available: break
            case .noAccount, .restricted, .couldNotDetermine, .temporarilyUnavailable: Issue.record("unexpected \(status)")
            @unknown default: Issue.record("unexpected")
            }
            let (userID, _): (Record.ID?, Error?) = await awaitCallback { done in container.fetchUserRecordID { done(($0, $1)) } }
            // CloudKit's user record names: _ and 32 hex digits, derived from container and login.
            #expect(userID?.recordName == UserDirectoryEntry.derivedRecordName(containerIdentifier: container.identifier, login: "alice"))
            let asyncStatus = try await container.accountStatus()
            #expect(asyncStatus == .available)
        }
    }
}
