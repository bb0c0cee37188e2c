import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// The start-up code of CloudKit sync libraries (IceCream's SyncEngine
// `resumeLongLivedOperationIfPossible`) that asks the container for its long-lived operations,
// gives each modify operation a new completion block and adds it again, ported mechanically.
// Stratus keeps no operation past its process, so a fresh process finds none; within a process
// a long-lived operation is listed from when it is added until its final blocks have run, and
// adding it again leaves it on its way instead of trapping.

/// IceCream's `DatabaseManager.resumeLongLivedOperationIfPossible`, with a completion so a test
/// knows when every fetched operation was handled.
final class LongLivedOperationResumer {
    let container: Container
    let database: Database
    private let lock = NSLock()
    private var resumedLog: [String] = []
    private var foundLog: [String] = []

    init(container: Container, database: Database) {
        self.container = container
        self.database = database
    }

    /// The IDs the last start-up found and re-added.
    var found: [String] { lock.lock(); defer { lock.unlock() }; return foundLog }
    /// One entry per resumed operation whose new completion block ran.
    var resumed: [String] { lock.lock(); defer { lock.unlock() }; return resumedLog }

    func resumeLongLivedOperationIfPossible(addThroughContainer: Bool, completion: @escaping () -> Void) {
        container.fetchAllLongLivedOperationIDs { [weak self] (opeIDs, error) in
            guard let self = self, error == nil, let ids = opeIDs else { return completion() }
            let group = DispatchGroup()
            for id in ids {
                group.enter()
                self.container.fetchLongLivedOperation(withID: id, completionHandler: { [weak self] (ope, error) in
                    defer { group.leave() }
                    guard let self = self, error == nil else { return }
                    if let modifyOp = ope as? ModifyRecordsOperation {
                        self.lock.lock(); self.foundLog.append(modifyOp.operationID); self.lock.unlock()
                        modifyOp.modifyRecordsCompletionBlock = { (_, _, _) in
                            self.lock.lock(); self.resumedLog.append(id); self.lock.unlock()
                        }
                        if addThroughContainer {
                            self.container.add(modifyOp)
                        } else {
                            self.database.add(modifyOp)
                        }
                    }
                })
            }
            group.notify(queue: .global()) { completion() }
        }
    }
}

/// Returns once `operation` has finished: its final blocks have run.
///
/// It watches `isFinished` (``waitUntilFinished(_:)``) rather than adding a dependency to the
/// operation: these operations are already queued or running, and swift-corelibs-foundation
/// can miss a dependency added while the operation is finishing, so the test would hang or
/// not depending on when the machine got round to the `addDependency`.
private func finished(_ operation: Operation) async {
    await waitUntilFinished([operation])
}

private func allIDs(_ container: Container) async -> ([String]?, Error?) {
    await awaitCallback { done in container.fetchAllLongLivedOperationIDs { ids, error in done((ids, error)) } }
}

private func operation(_ id: String, in container: Container) async -> (DatabaseOperation?, Error?) {
    await awaitCallback { done in container.fetchLongLivedOperation(withID: id) { operation, error in done((operation, error)) } }
}

/// A long-lived save, waiting for `gate` (when given) before it starts.
private func longLivedSave(_ name: String, after gate: Operation? = nil) -> ModifyRecordsOperation {
    let note = Record(recordType: "Note", recordID: Record.ID(recordName: name))
    note["text"] = "written while the app was away"
    let save = ModifyRecordsOperation(recordsToSave: [note], recordIDsToDelete: nil)
    let configuration = Operation.Configuration()
    configuration.isLongLived = true
    save.configuration = configuration
    if let gate = gate { save.addDependency(gate) }
    return save
}

@Suite("Long-lived operations, as sync libraries resume them")
struct LongLivedOperationTests {
    @Test("IceCream's start-up compiles and finds nothing in a fresh container", arguments: TestEngine.all)
    func startUpInAFreshContainer(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let (ids, error) = await allIDs(container)
            #expect(error == nil)
            #expect(ids == [])
            #expect(try await container.allLongLivedOperationIDs() == [])

            let resumer = LongLivedOperationResumer(container: container, database: container.privateCloudDatabase)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                resumer.resumeLongLivedOperationIfPossible(addThroughContainer: false) { done.resume() }
            }
            #expect(resumer.found.isEmpty)
        }
    }

    @Test("a long-lived operation waiting on a dependency is listed, fetched, resumed as IceCream does, and gone once finished", arguments: TestEngine.all)
    func waitingOperationIsResumed(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let database = container.privateCloudDatabase
            let gate = BlockOperation {}
            let save = longLivedSave("note-1", after: gate)
            database.add(save)

            let (ids, error) = await allIDs(container)
            #expect(error == nil)
            #expect(ids == [save.operationID])
            #expect(try await container.allLongLivedOperationIDs() == [save.operationID])
            let (fetched, fetchError) = await operation(save.operationID, in: container)
            #expect(fetchError == nil)
            #expect(fetched === save)
            #expect(try await container.longLivedOperation(for: save.operationID) === save)

            // IceCream's resume: a new completion block, and the operation added again.
            let resumer = LongLivedOperationResumer(container: container, database: database)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                resumer.resumeLongLivedOperationIfPossible(addThroughContainer: true) { done.resume() }
            }
            #expect(resumer.found == [save.operationID])
            #expect(!save.isExecuting && !save.isFinished)

            gate.start()
            await finished(save)
            // Enqueued once, so its final block ran once: the block the resume gave it.
            #expect(resumer.resumed == [save.operationID])
            let stored = try await database.record(for: Record.ID(recordName: "note-1"))
            #expect(stored["text"] as? String == "written while the app was away")

            let (after, afterError) = await allIDs(container)
            #expect(afterError == nil)
            #expect(after == [])
            let (gone, goneError) = await operation(save.operationID, in: container)
            #expect(gone == nil && goneError == nil)
            #expect(try await container.longLivedOperation(for: save.operationID) == nil)
            // Adding a finished operation again leaves it finished.
            container.add(save)
            database.add(save)
            #expect(try await container.allLongLivedOperationIDs() == [])
        }
    }

    @Test("a long-lived operation blocked mid-run is listed while it runs, survives being added again, and is gone once finished", arguments: TestEngine.all)
    func runningOperationIsListed(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let database = container.privateCloudDatabase
            let release = DispatchSemaphore(value: 0)
            let save = longLivedSave("note-2")
            await withCheckedContinuation { (entered: CheckedContinuation<Void, Never>) in
                save.perRecordSaveBlock = { _, _ in
                    entered.resume()
                    release.wait()
                }
                database.add(save)
            }

            #expect(save.isExecuting)
            #expect(try await container.allLongLivedOperationIDs() == [save.operationID])
            let (fetched, _) = await operation(save.operationID, in: container)
            #expect(fetched === save)
            // What a second start-up in this process does: add it again. Foundation would trap.
            database.add(save)
            container.add(save)
            container.publicCloudDatabase.add(save)
            #expect(save.database === database)

            release.signal()
            await finished(save)
            #expect(try await container.allLongLivedOperationIDs() == [])
            #expect(try await container.longLivedOperation(for: save.operationID) == nil)
        }
    }

    @Test("code that a long-lived operation's final block wakes no longer finds it listed", arguments: TestEngine.all)
    func finalBlockWakesCodeThatFindsItGone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let save = longLivedSave("note-final")
            await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
                save.modifyRecordsResultBlock = { _ in ended.resume() }
                container.privateCloudDatabase.add(save)
            }
            #expect(try await container.allLongLivedOperationIDs() == [])
            #expect(try await container.longLivedOperation(for: save.operationID) == nil)
        }
    }

    @Test("a long-lived operation on an app's own queue is listed from when it starts", arguments: TestEngine.all)
    func ownQueueOperationIsListedWhenItStarts(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            let release = DispatchSemaphore(value: 0)
            let save = longLivedSave("note-3")
            save.database = container.publicCloudDatabase
            await withCheckedContinuation { (entered: CheckedContinuation<Void, Never>) in
                save.perRecordSaveBlock = { _, _ in
                    entered.resume()
                    release.wait()
                }
                queue.addOperation(save)
            }
            #expect(try await container.allLongLivedOperationIDs() == [save.operationID])
            release.signal()
            await finished(save)
            #expect(try await container.allLongLivedOperationIDs() == [])
        }
    }

    @Test("an operation that is not long-lived is never listed", arguments: TestEngine.all)
    func shortLivedOperationIsNotListed(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let gate = BlockOperation {}
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "note-4"))
            let save = ModifyRecordsOperation(recordsToSave: [note], recordIDsToDelete: nil)
            save.addDependency(gate)
            container.privateCloudDatabase.add(save)

            let (ids, error) = await allIDs(container)
            #expect(error == nil)
            #expect(ids == [])
            let (fetched, fetchError) = await operation(save.operationID, in: container)
            #expect(fetched == nil && fetchError == nil)
            #expect(try await container.longLivedOperation(for: save.operationID) == nil)

            gate.start()
            await finished(save)
            #expect(try await container.allLongLivedOperationIDs() == [])
        }
    }

    @Test("a database configured long-lived lists its operations; another Container object on the store sees them, another user does not", arguments: TestEngine.all)
    func configuredDatabaseAndOtherContainerObjects(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store async throws in
            let alice = try Container(identifier: "iCloud.com.example.app", store: location, userName: "alice")
            let aliceAgain = try Container(identifier: "iCloud.com.example.app", store: location, userName: "alice")
            let bob = try Container(identifier: "iCloud.com.example.app", store: location, userName: "bob")
            let gate = BlockOperation {}
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "note-5"))
            let save = ModifyRecordsOperation(recordsToSave: [note], recordIDsToDelete: nil)
            save.addDependency(gate)
            let configuration = Operation.Configuration()
            configuration.isLongLived = true
            alice.privateCloudDatabase.configuredWith(configuration: configuration) { database in database.add(save) }

            #expect(try await alice.allLongLivedOperationIDs() == [save.operationID])
            #expect(try await aliceAgain.allLongLivedOperationIDs() == [save.operationID])
            #expect(try await aliceAgain.longLivedOperation(for: save.operationID) === save)
            #expect(try await bob.allLongLivedOperationIDs() == [])
            #expect(try await bob.longLivedOperation(for: save.operationID) == nil)

            gate.start()
            await finished(save)
            #expect(try await aliceAgain.allLongLivedOperationIDs() == [])
        }
    }

    @Test("a long-lived operation cancelled before it starts is no longer listed or fetched, as CloudKit answers for a cancelled one", arguments: TestEngine.all)
    func cancelledOperationIsNotListed(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let gate = BlockOperation {}
            let save = longLivedSave("note-cancelled", after: gate)
            container.privateCloudDatabase.add(save)
            #expect(try await container.allLongLivedOperationIDs() == [save.operationID])
            save.cancel()
            #expect(try await container.allLongLivedOperationIDs() == [])
            #expect(try await container.longLivedOperation(for: save.operationID) == nil)
            gate.start()
            await finished(save)
            #expect(try await container.allLongLivedOperationIDs() == [])
        }
    }

    @Test("an ID no operation has gives nil and no error, as CloudKit gives for one that finished", arguments: TestEngine.all)
    func unknownID(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container async throws in
            let (fetched, error) = await operation("no-such-operation", in: container)
            #expect(fetched == nil)
            #expect(error == nil)
            #expect(try await container.longLivedOperation(for: UUID().uuidString) == nil)
        }
    }
}
