import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// MagicCloud's version-conflict handling (jalingo/MagicCloud, BSD 3-Clause, Copyright (c) 2018
// Jimmy Lingo), ported mechanically: MagicCloud/Protocols/API/MCRecordable.swift (commit
// 5ae8571d6a65a60df5a816384fed7ae786350073), Protocols/MCDatabaseModifier.swift (6b14ff9b),
// Protocols/Error Handling Strategies/VersionConflictKeys.swift (ea0eed5a),
// VersionConflictResolver.swift (8eb303b8) and PartialErrorResolver.swift (ea0eed5a).
//
// Its CloudKit habits that other ported code does not have: uploads are records built afresh
// from an app object's field dictionary (`[String: CKRecordValue]`) under an existing record ID,
// so a save over a stored record is a conflict with no ancestor values; the conflict is read
// from the error's `userInfo` by the literal key constants (`CKRecordChangedErrorAncestorRecordKey`,
// `…ServerRecordKey`, `…ClientRecordKey`); `.allKeys` resolves by resaving the client record,
// `.changedKeys` by a field-wise three-way merge onto the server record whose comparisons switch
// on the field's class (`case is NSNumber`, `is NSData`, `is NSDate`, `is CKAsset`, `is CLLocation`,
// `is CKReference`, else `String`) and compare `as? NSData == as? NSData`; the resave hands the
// wrapper's Foundation `completionBlock` on to the `CKModifyRecordsOperation`; and a partial
// failure is walked as `userInfo[CKPartialErrorsByItemIDKey] as? NSDictionary` with each value
// cast `as? CKError`.
//
// What the port changes, besides the README's substitutions (`CKRecordValue` → `RecordValue`,
// `CKRecordID` → `RecordID`, `CKReference` → `Reference`, `CLLocation` → `Location`, `CKError` →
// `StratusError`, the key constants without `CK`): MagicCloud's protocols reach the database
// through its `MCDatabase` enum (`.privateDB.db` is `CKContainer.default().privateCloudDatabase`)
// and its receivers (`MCMirrorAbstraction`); here `MCDatabase` holds the test's database, and the
// modifier's `R` is the recordable type itself. `MCErrorHandler`'s dispatch (an operation of its
// own, with logging and notifications) is the `handle` below, with its default policy
// `.changedKeys`. The CloudKit original is in the comments where a line differs.

// MARK: - MCRecordable.swift

public protocol MCRecordable {
    var recordType: String { get }
    var recordFields: Dictionary<String, RecordValue> { get set }   // Dictionary<String, CKRecordValue>
    var recordID: RecordID { get set }                              // CKRecordID
    init()
}

extension MCRecordable {
    /// Builds an appropriate recordable based on type.
    func prepare(from record: Record) -> Self {
        var newFromRecord = Self()

        // Overwrites default recordable with data from recovered record.
        // Order of these two lines is important.
        newFromRecord.recordID = record.recordID
        for (key, _) in newFromRecord.recordFields { newFromRecord.recordFields[key] = record[key] }

        return newFromRecord
    }
}

func ==(lhs: MCRecordable, rhs: MCRecordable) -> Bool {
    return lhs.recordID.recordName == rhs.recordID.recordName
}

// MARK: - MCDatabase (MagicCloud's enum of the three databases, holding the test's one)

struct MCDatabase {
    let db: Database
}

// MARK: - MCDatabaseModifier.swift

protocol MCDatabaseModifier {
    associatedtype R: MCRecordable
    var recordables: [R] { get }
    var database: MCDatabase { get }
}

extension MCDatabaseModifier {

    /// This read-only, computed property returns an array of `CKRecord`s for each entry in `recordables` property.
    var records: [Record] {
        var recs = [Record]()

        // This loop converts recordables into CKRecord's for array
        for recordable in recordables {
            let rec = Record(recordType: recordable.recordType, recordID: recordable.recordID)
            for entry in recordable.recordFields { rec[entry.key] = entry.value }
            recs.append(rec)
        }

        return recs
    }

    /// This read-only, computed property returns an array of `CKRecordID`s for each entry in `recordables` property.
    var recordIDs: [RecordID] {
        return recordables.map { $0.recordID }
    }
}

// MARK: - MCCloudErrorHandler (MCErrorHandler's dispatch, for the cases this port exercises)

protocol MCCloudErrorHandler {
    func handle(_ error: Error?, in op: Operation, whileIgnoringUnknownItem: Bool)
}

// MARK: - VersionConflictKeys.swift

/// !!
protocol VersionConflictKeys { }

extension VersionConflictKeys {

    /**
     * This method is used during cloud error handling, to repair version conflicts (reported as
     * `ServerRecordChanged` CKError), under CKRecordSavePolicy.allKeys.
     */
    func allKeys(for error: StratusError) -> Record? {
        return error.userInfo[RecordChangedErrorClientRecordKey] as? Record
    }

    /**
     * This method is used during cloud error handling, to repair version conflicts (reported as
     * `ServerRecordChanged` CKError), under CKRecordSavePolicy.changedKeys.
     */
    func changedKeys(for error: StratusError, with recordables: [MCRecordable]) -> Record? {
        guard let original = error.userInfo[RecordChangedErrorAncestorRecordKey] as? Record,
            let current = error.userInfo[RecordChangedErrorServerRecordKey] as? Record,
            let attempt = error.userInfo[RecordChangedErrorClientRecordKey] as? Record
            else {
                print("recordableIsNil @ VersionConflict:0")
                return nil
        }

        var recordable: MCRecordable?
        for instance in recordables {
            if instance.recordID.recordName == current.recordID.recordName { recordable = instance }
        }

        guard recordable != nil else { print("recordableIsNil @ VersionConflict:1"); return nil }

        for entry in recordable!.recordFields {
            if let originalValue = original[entry.key],
                let currentValue = current[entry.key],
                let attemptValue = attempt[entry.key] {

                switch entry.value {
                case is NSNumber:
                    if currentValue as? NSNumber == originalValue as? NSNumber &&
                        currentValue as? NSNumber != attemptValue as? NSNumber {
                        current[entry.key] = attemptValue
                    }
                case is NSData:
                    if currentValue as? NSData == originalValue as? NSData &&
                        currentValue as? NSData != attemptValue as? NSData {
                        current[entry.key] = attemptValue
                    }
                case is NSDate:
                    if currentValue as? NSDate == originalValue as? NSDate &&
                        currentValue as? NSDate != attemptValue as? NSDate {
                        current[entry.key] = attemptValue
                    }
                case is Asset:
                    if currentValue as? Asset == originalValue as? Asset &&
                        currentValue as? Asset != attemptValue as? Asset {
                        current[entry.key] = attemptValue
                    }
                case is Location:
                    if currentValue as? Location == originalValue as? Location &&
                        currentValue as? Location != attemptValue as? Location {
                        current[entry.key] = attemptValue
                    }
                case is Reference:
                    if currentValue as? Reference == originalValue as? Reference &&
                        currentValue as? Reference != attemptValue as? Reference {
                        current[entry.key] = attemptValue
                    }
                default:    // <-- String
                    if currentValue as? String == originalValue as? String &&
                        currentValue as? String != attemptValue as? String {
                        current[entry.key] = attemptValue
                    }
                }
            }
        }

        return current
    }
}

// MARK: - VersionConflictResolver.swift

/// Types conforming to this protocol can call the `resolveVersionConflict:error:accordingTo` method that deals with serverRecordChanged CKErrors based on specified policy.
protocol VersionConflictResolver: VersionConflictKeys { }

extension VersionConflictResolver {

    /// This method determines approach to use (based on policy).
    /// !!
    fileprivate func conflictResolution(for error: StratusError, accordingTo policy: RecordSavePolicy, with recordables: [MCRecordable]) -> Record? {
        guard error.code == .serverRecordChanged else { return nil }

        switch policy {
        case .changedKeys:              return changedKeys(for: error, with: recordables)
        case .allKeys:                  return allKeys(for: error)
        case .ifServerRecordUnchanged:  return nil          // <-- Any resolution will be skipped.
        }
    }
}

extension VersionConflictResolver where Self: Operation & MCDatabaseModifier & MCCloudErrorHandler {

    /// This void method deals with serverRecordChanged CKErrors based on specified policy.
    /// !!
    func resolveVersionConflict(_ error: StratusError, accordingTo policy: RecordSavePolicy) {
        guard let record = conflictResolution(for: error, accordingTo: policy, with: self.recordables) else { return }

        // Uploads current record with changes made and latest changeTag.
        let op = ModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: nil)
        op.savePolicy = policy
        op.modifyRecordsCompletionBlock = { _, _, error in
            guard error == nil else { self.handle(error, in: op, whileIgnoringUnknownItem: false); return }
        }

        op.completionBlock = self.completionBlock
        self.completionBlock = nil

        self.database.db.add(op)
    }
}

// MARK: - PartialErrorResolver.swift

/// Types conforming to this protocol can call the `resolvePartial:error:in` method that takes partial errors (resulting from batch attempt) and isolates to the failed transactions. After isolation, they can be passed back to through the error handling system individually.
protocol PartialErrorResolver: MCCloudErrorHandler {
    var ignoreUnknownItem: Bool { get set }
    func resolvePartial(_ error: StratusError, in operation: Operation)
}

extension PartialErrorResolver where Self: Operation & MCDatabaseModifier {

    func resolvePartial(_ error: StratusError, in operation: Operation) {
        if let dictionary = error.userInfo[PartialErrorsByItemIDKey] as? NSDictionary {
            for entry in dictionary {
                if let partialError = entry.value as? StratusError {
                    if ignoreUnknownItem && partialError.code == .unknownItem { return }

                    self.handle(partialError,
                                in: operation,
                                whileIgnoringUnknownItem: self.ignoreUnknownItem)
                }
            }
        }
    }
}

// MARK: - The app's side: a recordable, and MCUpload with MCErrorHandler's dispatch

/// A MagicCloud recordable as an app writes one: its fields in the dictionary, the record ID
/// made from its own identifier.
struct MockRecordable: MCRecordable {
    var recordType: String { return "MockRecordable" }
    var recordFields: Dictionary<String, RecordValue> = ["title": "untitled", "count": 0,
                                                         "notes": Data(), "due": Date(timeIntervalSince1970: 0)]
    var recordID: RecordID = RecordID(recordName: "mock-" + UUID().uuidString)
    init() { }
}

/// MCUpload's `main()` (a `CKModifyRecordsOperation` of `records`, added and waited for) with
/// the error dispatch of MCErrorHandler: a partial failure is split into its items, a version
/// conflict resolved by `conflictResolutionPolicy` (MagicCloud's default, `.changedKeys`).
final class MCUpload<R: MCRecordable>: Operation, MCDatabaseModifier, MCCloudErrorHandler, VersionConflictResolver, PartialErrorResolver, @unchecked Sendable {
    let recordables: [R]
    let database: MCDatabase
    var conflictResolutionPolicy: RecordSavePolicy = .changedKeys
    var ignoreUnknownItem = false

    init(_ recs: [R], to db: MCDatabase) {
        recordables = recs
        database = db
        super.init()
    }

    override func main() {
        guard recordables.count != 0 else { return }
        if isCancelled { return }

        let op = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        op.modifyRecordsCompletionBlock = { _, _, error in
            guard error == nil else { self.handle(error, in: self, whileIgnoringUnknownItem: false); return }
        }
        database.db.add(op)
        op.waitUntilFinished()
    }

    func handle(_ error: Error?, in op: Operation, whileIgnoringUnknownItem: Bool) {
        guard let cloudError = error as? StratusError else { return }
        switch cloudError.code {
        case .partialFailure: resolvePartial(cloudError, in: op)
        case .serverRecordChanged: resolveVersionConflict(cloudError, accordingTo: conflictResolutionPolicy)
        default: break
        }
    }
}

// MARK: - Tests

@Suite("MagicCloud's version-conflict handling, ported")
struct MagicCloudVersionConflictTests {
    /// Runs an upload on a queue of its own and waits for the completion block MagicCloud hands
    /// on to the resolving save (or the upload's own, when nothing needed resolving).
    private func upload(_ recordables: [MockRecordable], to database: Database, policy: RecordSavePolicy) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let upload = MCUpload(recordables, to: MCDatabase(db: database))
            upload.conflictResolutionPolicy = policy
            upload.completionBlock = { continuation.resume() }
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperation(upload)
        }
    }

    /// The stored record of `recordable`, once any resave has been committed.
    private func stored(_ recordable: MockRecordable, in database: Database) async throws -> Record {
        try await database.record(for: recordable.recordID)
    }

    @Test("a fresh upload saves every field of the recordable, and prepare(from:) reads them back", arguments: TestEngine.all)
    func freshUpload(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            var item = MockRecordable()
            item.recordFields["title"] = "Groceries"
            item.recordFields["count"] = 3
            item.recordFields["notes"] = Data("milk".utf8)
            await upload([item], to: database, policy: .changedKeys)

            let record = try await stored(item, in: database)
            let read = MockRecordable().prepare(from: record)
            #expect(read == item)
            #expect(read.recordFields["title"] as? String == "Groceries")
            #expect(read.recordFields["count"] as? Int == 3)
            #expect(read.recordFields["notes"] as? Data == Data("milk".utf8))
        }
    }

    @Test("uploading over a stored record is a conflict: .allKeys resaves the client record, which wins", arguments: TestEngine.all)
    func allKeysResavesTheClientRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            var item = MockRecordable()
            item.recordFields["title"] = "First"
            await upload([item], to: database, policy: .allKeys)

            item.recordFields["title"] = "Second"
            item.recordFields["count"] = 9
            await upload([item], to: database, policy: .allKeys)

            let record = try await stored(item, in: database)
            #expect(record["title"] as? String == "Second")
            #expect(record["count"] as? Int == 9)
        }
    }

    @Test("the conflict of a record built afresh has an ancestor without fields, so .changedKeys keeps the server's values", arguments: TestEngine.all)
    func changedKeysOfAFreshRecordKeepsTheServer(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            var item = MockRecordable()
            item.recordFields["title"] = "First"
            await upload([item], to: database, policy: .changedKeys)

            // What the resolver reads: the error's userInfo by CloudKit's literal keys.
            item.recordFields["title"] = "Second"
            let fresh = MagicCloudModifier(recordables: [item], database: MCDatabase(db: database)).records
            let result = try await database.modifyRecords(saving: fresh, deleting: [], savePolicy: .ifServerRecordUnchanged)
            guard case .failure(let failure)? = result.saveResults[item.recordID], let error = failure as? StratusError else {
                Issue.record("saving a record built afresh over a stored one did not conflict")
                return
            }
            #expect(error.code == .serverRecordChanged)
            let ancestor = try #require(error.userInfo[RecordChangedErrorAncestorRecordKey] as? Record)
            #expect(ancestor.allKeys().isEmpty && ancestor.recordID == item.recordID)
            #expect((error.userInfo[RecordChangedErrorServerRecordKey] as? Record)?["title"] as? String == "First")
            #expect((error.userInfo[RecordChangedErrorClientRecordKey] as? Record)?["title"] as? String == "Second")

            await upload([item], to: database, policy: .changedKeys)
            #expect(try await stored(item, in: database)["title"] as? String == "First")
        }
    }

    @Test(".changedKeys merges field by field: what the client changed from the ancestor, where the server kept the ancestor's value", arguments: TestEngine.all)
    func changedKeysThreeWayMerge(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            var item = MockRecordable()
            item.recordFields["title"] = "Groceries"
            item.recordFields["count"] = 3
            item.recordFields["notes"] = Data("milk".utf8)
            item.recordFields["due"] = Date(timeIntervalSince1970: 1_000)
            await upload([item], to: database, policy: .changedKeys)

            // This device fetched the record; another device then changed its title and count.
            let mine = try await stored(item, in: database)
            let theirs = try await stored(item, in: database)
            theirs["title"] = "Shopping"
            theirs["count"] = 4
            _ = try await database.save(theirs)

            // This device changes every field of its stale copy; the save conflicts.
            mine["title"] = "Errands"
            mine["count"] = 5
            mine["notes"] = Data("bread".utf8)
            mine["due"] = Date(timeIntervalSince1970: 2_000)
            let result = try await database.modifyRecords(saving: [mine], deleting: [], savePolicy: .ifServerRecordUnchanged)
            guard case .failure(let failure)? = result.saveResults[item.recordID], let error = failure as? StratusError else {
                Issue.record("the stale save did not conflict")
                return
            }

            struct Resolver: VersionConflictResolver {}
            let merged = try #require(Resolver().changedKeys(for: error, with: [item]))
            // The server changed title and count: its values stay. It kept notes and due as the
            // ancestor had them: the client's values are taken, compared as NSData and NSDate.
            #expect(merged["title"] as? String == "Shopping")
            #expect(merged["count"] as? Int == 4)
            #expect(merged["notes"] as? Data == Data("bread".utf8))
            #expect(merged["due"] as? Date == Date(timeIntervalSince1970: 2_000))

            let saved = try await database.modifyRecords(saving: [merged], deleting: [], savePolicy: .changedKeys)
            #expect(saved.saveResults.count == 1)
            let record = try await stored(item, in: database)
            #expect(record["title"] as? String == "Shopping" && record["notes"] as? Data == Data("bread".utf8))
        }
    }

    @Test("a partial failure is walked as an NSDictionary of CKErrors: the conflicting item is resolved, the new one saved", arguments: TestEngine.all)
    func partialFailureResolvesTheConflictingItem(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            var existing = MockRecordable()
            existing.recordFields["title"] = "one"
            await upload([existing], to: database, policy: .allKeys)

            existing.recordFields["title"] = "one, edited"
            var added = MockRecordable()
            added.recordFields["title"] = "two"
            await upload([existing, added], to: database, policy: .allKeys)
            let resolved = try await stored(existing, in: database), saved = try await stored(added, in: database)
            #expect(resolved["title"] as? String == "one, edited")
            #expect(saved["title"] as? String == "two")
        }
    }

}

/// The modifier MagicCloud's operations are, for reading the records an upload builds.
struct MagicCloudModifier: MCDatabaseModifier {
    let recordables: [MockRecordable]
    let database: MCDatabase
}
