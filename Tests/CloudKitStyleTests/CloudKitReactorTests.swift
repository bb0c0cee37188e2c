import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// CloudKitReactor (benjaminsnorris/CloudKitReactor, MIT, Copyright (c) 2017 Ben Norris), the
// CloudKit commands of a Reactor (unidirectional data flow) app, ported mechanically. The files,
// each as its stored revision has it: Sources/CloudKitSyncable.swift (commit
// bcb9bbd74ba61c048e3deebf2e48b2a0d1a9a20b), Constants.swift (2779bfe5), Events.swift (19b843d3),
// CreateCustomZone.swift (31fcf665), SaveCloudKitRecords.swift (19b843d3),
// FetchFromCloudKit.swift (3cadafea), FetchRecordZoneChanges.swift (19b843d3) and
// DeleteFromCloudKit.swift (2e32699a).
//
// Its CloudKit habits that other ported code does not have: model values turned into records
// through `[String: CKRecordValue?]` (a `nil` entry leaves the field unset) and edits kept as
// `[String: Any]`, applied with `value as? CKRecordValue` to a record rebuilt from system fields
// archived with `NSKeyedArchiver(forWritingWith: NSMutableData)` and `requiresSecureCoding`, read
// with the failable `CKRecord(coder:)`; a save with `queuePriority = .high`, `qualityOfService`
// set twice, and a fresh `CKOperation.Configuration()` with `isLongLived = true` assigned to
// the operation; a query on a custom zone (`operation.zoneID`) whose cursor is followed by a
// closure that refers to itself through a `var` declared before it; a zone-change fetch built
// with the empty `CKFetchRecordZoneChangesOperation()`, its `recordZoneIDs` and
// `configurationsByRecordZoneID` set after, each zone's `ZoneConfiguration()` given the zone's
// token (and the caller's configurations, for `desiredKeys`); and `switch` over
// `CKDatabase.Scope` both exhaustively (`.private`, `.shared`, `.public`) and with
// `@unknown default`, as the two eras of the files have it.
//
// What the port changes, besides the README's substitutions: the commands reach the database
// through `CKContainer.default()`, which a test process cannot point at a store of its own
// (Stratus's `Container.default()` reads the environment once, see ContainerDefaultTests), so
// `CKContainer.default()` is `ReactorContainer.default()`, the container the test sets. Reactor
// itself (`State`, `Event`, `Command`, `Core`) is the minimal stand-in below, which records the
// events fired and hands them to subscribers; `Reactor.Event` is `Event`. Two changes the
// Swift compiler asks for, not Stratus: `public` dropped from members of `public extension`s
// (redundant, a warning), and DeleteFromCloudKit's `objects.flatMap { $0.cloudKitRecordID }`
// (a `flatMap` over non-optional values, deprecated) written as the `map` it is.

// MARK: - Reactor, as the commands use it

public protocol State {}
public protocol Event {}

public protocol Command {
    associatedtype StateType: State
    func execute(state: StateType, core: Core<StateType>)
}

/// Reactor's `Core`: fires commands and hands the events they fire to its subscribers (the
/// app's reducers), one at a time as operation threads fire them; it keeps them for the tests.
public final class Core<StateType: State>: @unchecked Sendable {
    let state: StateType
    private let lock = NSLock()
    private var fired: [Event] = []
    private var subscribers: [(Event) -> Void] = []

    init(state: StateType) { self.state = state }

    func add(subscriber: @escaping (Event) -> Void) { lock.withLock { subscribers.append(subscriber) } }

    public func fire(event: Event) {
        let subscribers = lock.withLock { fired.append(event); return self.subscribers }
        subscribers.forEach { $0(event) }
    }

    func fire<C: Command>(command: C) where C.StateType == StateType { command.execute(state: state, core: self) }

    var events: [Event] { lock.withLock { fired } }

    /// Fires `command` and waits for the first event it fires that `matches`.
    func fire<C: Command>(command: C, until matches: @escaping (Event) -> Bool) async where C.StateType == StateType {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = Collected(true)
            let once = NSLock()
            add { event in
                once.withLock {
                    guard waiting.value, matches(event) else { return }
                    waiting.value = false
                    continuation.resume()
                }
            }
            fire(command: command)
        }
    }
}

/// Whether `event` reports that an operation of `type` ended (completed or errored).
func isOperationEnd(_ event: Event, _ type: CloudKitOperationType) -> Bool {
    (event as? CloudKitOperationUpdated)?.type == type
}

struct AppState: State {}

/// The container `CKContainer.default()` stands for in these tests.
enum ReactorContainer {
    nonisolated(unsafe) static var current: Container?
    static func `default`() -> Container { current! }
}

// MARK: - Constants.swift

public enum CloudKitReactorConstants {

    static let defaultCustomZoneName = "DefaultCustomZone"
    public static let zoneID = RecordZoneID(zoneName: defaultCustomZoneName, ownerName: CurrentUserDefaultName)

    public static let privateDatabaseSubscription = "privateDatabaseSubscription"
    public static let sharedDatabaseSubscription = "sharedDatabaseSubscription"

}

// MARK: - Events.swift (the events these commands fire)

public protocol CloudKitErrorEvent: Event {
    var error: Error { get }
}
public protocol CloudKitDataEvent: Event { }

public struct CloudKitUpdated<T>: CloudKitDataEvent {
    public var payload: T

    public init(_ payload: T) {
        self.payload = payload
    }
}

public struct CloudKitDeleted: CloudKitDataEvent {
    public var recordID: Record.ID
}

public struct CloudKitRecordError: CloudKitErrorEvent {
    public var error: Error
    public var record: Record

    public init(_ error: Error, for record: Record) {
        self.error = error
        self.record = record
    }
}

public enum CloudKitOperationType {
    case save
    case fetch
    case delete
}

public enum CloudKitOperationStatus {
    case started
    case completed
    case errored(Error)
}

public struct CloudKitOperationUpdated: CloudKitDataEvent {
    public var status: CloudKitOperationStatus
    public var type: CloudKitOperationType

    public init(status: CloudKitOperationStatus, type: CloudKitOperationType) {
        self.status = status
        self.type = type
    }
}

public struct CloudKitDefaultCustomZoneCreated: CloudKitDataEvent {
    public var zoneID: RecordZone.ID
}

public struct CloudKitServerChangeTokenUpdated: CloudKitDataEvent {
    public var zoneID: RecordZone.ID
    public var token: ServerChangeToken?
}

// MARK: - CloudKitSyncable.swift

public protocol CloudKitSyncable {
    init(record: Record) throws

    var encodedSystemFields: Data? { get }
    var cloudKitRecordProperties: [String: RecordValue?] { get }
    var cloudKitRecordChanges: [String: Any?] { get set }

    var cloudKitRecordID: RecordID { get }
    static var recordType: String { get }
    var cloudKitReference: Reference { get }
    var parentReference: Reference? { get }

    var needsSavingToCloudKit: Bool { get }
    var isSavedInCloudKit: Bool { get }
    var hasUnsavedChanges: Bool { get }
    var recordToSave: Record? { get }
    var recordWithChanges: Record? { get }
}

public extension CloudKitSyncable {

    static var recordType: String { return String(describing: self) }

    var needsSavingToCloudKit: Bool {
        return !isSavedInCloudKit || hasUnsavedChanges
    }

    var isSavedInCloudKit: Bool {
        return encodedSystemFields != nil
    }

    var hasUnsavedChanges: Bool {
        return !cloudKitRecordChanges.isEmpty
    }

    var cloudKitReference: Reference {
        return Reference(recordID: cloudKitRecordID, action: .none)
    }

    var parentReference: Reference? {
        return nil
    }

    var recordToSave: Record? {
        return isSavedInCloudKit ? recordWithChanges : Record(object: self)
    }

    var recordWithChanges: Record? {
        guard hasUnsavedChanges, let encodedSystemFields = encodedSystemFields else { return nil }
        let coder = NSKeyedUnarchiver(forReadingWith: encodedSystemFields)
        coder.requiresSecureCoding = true
        let record = Record(coder: coder)
        coder.finishDecoding()
        for (key, value) in cloudKitRecordChanges {
            record?[key] = value as? RecordValue
        }
        return record
    }

}

public protocol CloudKitIdentifiable {
    var identifier: String { get }
}

public extension CloudKitSyncable where Self: CloudKitIdentifiable {

    var cloudKitRecordID: RecordID {
        return RecordID(recordName: identifier, zoneID: CloudKitReactorConstants.zoneID)
    }

}

public protocol CloudKitDiffable: CloudKitSyncable {
    func diff(from original: Self) -> [String: Any]
    mutating func recordChanges(from original: Self)
}

public extension CloudKitDiffable {

    /// Records changes to an object in `cloudKitRecordChanges` to be persisted.
    ///
    /// - Parameter original: Original object before being modified
    mutating func recordChanges(from original: Self) {
        let changes = diff(from: original)
        for (key, value) in changes {
            cloudKitRecordChanges[key] = value
        }
    }

}

public extension Record {

    convenience init(object: CloudKitSyncable) {
        let recordId = object.cloudKitRecordID
        self.init(recordType: type(of: object).recordType, recordID: recordId)
        for (key, value) in object.cloudKitRecordProperties {
            self[key] = value
        }
        parent = object.parentReference
    }

    var encodedSystemFieldsData: Data {
        let encodedSystemFields = NSMutableData()
        let coder = NSKeyedArchiver.init(forWritingWith: encodedSystemFields)
        coder.requiresSecureCoding = true
        encodeSystemFields(with: coder)
        coder.finishEncoding()
        return encodedSystemFields as Data
    }

}

// MARK: - CreateCustomZone.swift

public struct CreateCustomZone<U: State>: Command {

    public var zoneName: String?

    public init(named zoneName: String? = nil) {
        self.zoneName = zoneName
    }

    public func execute(state: U, core: Core<U>) {
        let zoneID: RecordZoneID
        if let zoneName = zoneName {
            zoneID = RecordZoneID(zoneName: zoneName, ownerName: CurrentUserDefaultName)
        } else {
            zoneID = CloudKitReactorConstants.zoneID
        }
        let zone = RecordZone(zoneID: zoneID)
        let operation = ModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)
        operation.modifyRecordZonesCompletionBlock = { saved, _, error in
            if let error = error {
                core.fire(event: CloudKitOperationUpdated(status: .errored(error), type: .save))
            } else {
                core.fire(event: CloudKitOperationUpdated(status: .completed, type: .save))
                core.fire(event: CloudKitDefaultCustomZoneCreated(zoneID: CloudKitReactorConstants.zoneID))
            }
        }
        operation.qualityOfService = .userInitiated
        ReactorContainer.default().privateCloudDatabase.add(operation)   // CKContainer.default()
    }

}

// MARK: - SaveCloudKitRecords.swift

public struct SaveCloudKitRecords<U: State>: Command {

    public var records: [Record]
    public var objects: [CloudKitSyncable]
    public var savePolicy: ModifyRecordsOperation.RecordSavePolicy
    public var databaseScope: Database.Scope
    public var completion: ((Error?) -> Void)?

    public init(_ records: [Record] = [], objects: [CloudKitSyncable] = [], savePolicy: ModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged, databaseScope: Database.Scope = .private, completion: ((Error?) -> Void)? = nil) {
        self.records = records
        self.objects = objects
        self.savePolicy = savePolicy
        self.databaseScope = databaseScope
        self.completion = completion
    }

    public func execute(state: U, core: Core<U>) {
        var records = self.records
        records += objects.map { Record(object: $0) }
        guard !records.isEmpty else { return }
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = savePolicy
        operation.queuePriority = .high
        operation.qualityOfService = .userInteractive
        let configuration = DatabaseOperation.Configuration()   // CKOperation.Configuration()
        configuration.isLongLived = true
        operation.configuration = configuration
        operation.perRecordCompletionBlock = { record, error in
            if let error = error {
                core.fire(event: CloudKitRecordError(error, for: record))
            } else {
                core.fire(event: CloudKitUpdated(record))
            }
        }

        operation.modifyRecordsCompletionBlock = { savedRecords, _, error in
            if let error = error {
                core.fire(event: CloudKitOperationUpdated(status: .errored(error), type: .save))
            } else {
                core.fire(event: CloudKitOperationUpdated(status: .completed, type: .save))
            }
            self.completion?(error)
        }

        operation.qualityOfService = .userInitiated
        let container = ReactorContainer.default()   // CKContainer.default()
        switch databaseScope {
        case .private:
            container.privateCloudDatabase.add(operation)
        case .shared:
            container.sharedCloudDatabase.add(operation)
        case .public:
            container.publicCloudDatabase.add(operation)
        @unknown default:
            fatalError()
        }

    }

}

// MARK: - FetchFromCloudKit.swift

public struct FetchFromCloudKit<T: CloudKitSyncable, U: State>: Command {

    public var predicate: QueryPredicate
    public var databaseScope: DatabaseScope
    public var zoneID: RecordZoneID
    public var completion: ((Int?) -> Void)?
    let returnObjects: Bool

    public init(predicate: QueryPredicate = QueryPredicate(value: true), databaseScope: DatabaseScope = .private, zoneID: RecordZoneID = CloudKitReactorConstants.zoneID, returnObjects: Bool = true, completion: ((Int?) -> Void)? = nil) {
        self.predicate = predicate
        self.databaseScope = databaseScope
        self.zoneID = zoneID
        self.returnObjects = returnObjects
        self.completion = completion
    }

    public func execute(state: U, core: Core<U>) {
        let query = Query(recordType: T.recordType, predicate: predicate)
        let operation = QueryOperation(query: query)
        operation.zoneID = zoneID
        var fetchedObjects = [T]()
        var fetchedRecords = [Record]()

        let perRecordBlock = { (fetchedRecord: Record) -> Void in
            if self.returnObjects {
                do {
                    let object = try T(record: fetchedRecord)
                    core.fire(event: CloudKitUpdated(object))
                    fetchedObjects.append(object)
                } catch {
                    core.fire(event: CloudKitRecordError(error, for: fetchedRecord))
                }
            } else {
                fetchedRecords.append(fetchedRecord)
            }
        }
        operation.recordFetchedBlock = perRecordBlock

        var queryCompletionBlock: (QueryCursor?, Error?) -> Void = { (_, _) in }

        queryCompletionBlock = { queryCursor, error in
            if let queryCursor = queryCursor {
                let continuedQueryOperation = QueryOperation(cursor: queryCursor)
                continuedQueryOperation.recordFetchedBlock = perRecordBlock
                continuedQueryOperation.queryCompletionBlock = queryCompletionBlock

                let container = ReactorContainer.default()   // CKContainer.default()
                switch self.databaseScope {
                case .private:
                    container.privateCloudDatabase.add(continuedQueryOperation)
                case .shared:
                    container.sharedCloudDatabase.add(continuedQueryOperation)
                case .public:
                    container.publicCloudDatabase.add(continuedQueryOperation)
                }

            } else if let error = error {
                core.fire(event: CloudKitOperationUpdated(status: .errored(error), type: .fetch))
                self.completion?(nil)
            } else {
                core.fire(event: CloudKitOperationUpdated(status: .completed, type: .fetch))
                let count: Int
                if self.returnObjects {
                    count = fetchedObjects.count
                } else {
                    count = fetchedRecords.count
                }
                self.completion?(count)
            }
        }
        operation.queryCompletionBlock = queryCompletionBlock

        operation.qualityOfService = .userInitiated
        let container = ReactorContainer.default()   // CKContainer.default()
        switch databaseScope {
        case .private:
            container.privateCloudDatabase.add(operation)
        case .shared:
            container.sharedCloudDatabase.add(operation)
        case .public:
            container.publicCloudDatabase.add(operation)
        }

    }

}

// MARK: - FetchRecordZoneChanges.swift

public struct FetchRecordZoneChanges<U: State>: Command {

    public let objectTypes: [CloudKitSyncable.Type]
    public var recordZoneIDs: [RecordZone.ID]
    public var recordZoneChangesOptions: [FetchRecordZoneChangesOperation.ZoneConfiguration]
    public var zoneChangeTokens: [RecordZone.ID: ServerChangeToken]
    public var databaseScope: Database.Scope
    public var completion: ((_ changes: Bool) -> Void)?

    fileprivate var defaultZoneOnly: Bool {
        return recordZoneIDs == [CloudKitReactorConstants.zoneID] && recordZoneChangesOptions.isEmpty
    }

    public init(with objectTypes: [CloudKitSyncable.Type], recordZoneIDs: [RecordZone.ID] = [CloudKitReactorConstants.zoneID], recordZoneChangesOptions: [FetchRecordZoneChangesOperation.ZoneConfiguration] = [], zoneChangeTokens: [RecordZone.ID: ServerChangeToken] = [:], databaseScope: Database.Scope = .private, completion: ((_ changes: Bool) -> Void)? = nil) {
        self.objectTypes = objectTypes
        self.recordZoneIDs = recordZoneIDs
        self.recordZoneChangesOptions = recordZoneChangesOptions
        self.zoneChangeTokens = zoneChangeTokens
        self.databaseScope = databaseScope
        self.completion = completion
    }

    public func execute(state: U, core: Core<U>) {
        guard !recordZoneIDs.isEmpty else {
            completion?(false)
            return
        }
        let operation = FetchRecordZoneChangesOperation()
        operation.recordZoneIDs = recordZoneIDs
        if defaultZoneOnly {
            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration()
            configuration.previousServerChangeToken = zoneChangeTokens[CloudKitReactorConstants.zoneID]
            operation.configurationsByRecordZoneID = [CloudKitReactorConstants.zoneID: configuration]
        } else {
            var allConfigurations = [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration]()
            for (index, zoneID) in recordZoneIDs.enumerated() {
                let configuration: FetchRecordZoneChangesOperation.ZoneConfiguration
                if index < recordZoneChangesOptions.count {
                    configuration = recordZoneChangesOptions[index]
                } else {
                    configuration = FetchRecordZoneChangesOperation.ZoneConfiguration()
                }
                configuration.previousServerChangeToken = zoneChangeTokens[zoneID]
                allConfigurations[zoneID] = configuration
            }
            operation.configurationsByRecordZoneID = allConfigurations
        }

        operation.recordZoneChangeTokensUpdatedBlock = { zoneID, serverToken, clientTokenData in
            core.fire(event: CloudKitServerChangeTokenUpdated(zoneID: zoneID, token: serverToken))
        }

        var changes = false

        operation.recordWithIDWasDeletedBlock = { recordID, _ in
            changes = true
            core.fire(event: CloudKitDeleted(recordID: recordID))
        }

        operation.recordChangedBlock = { record in
            changes = true
            if let share = record as? Share {
                core.fire(event: CloudKitUpdated(share))
            }
            guard let ObjectType = self.objectType(for: record) else { return }
            do {
                let object = try ObjectType.init(record: record)
                core.fire(event: CloudKitUpdated(object))
            } catch {
                core.fire(event: CloudKitRecordError(error, for: record))
            }
        }

        operation.recordZoneFetchCompletionBlock = { zoneID, serverToken, clientToken, moreComing, error in
            core.fire(event: CloudKitServerChangeTokenUpdated(zoneID: zoneID, token: serverToken))
            if let error = error {
                core.fire(event: CloudKitOperationUpdated(status: .errored(error), type: .fetch))
            } else {
                core.fire(event: CloudKitOperationUpdated(status: .completed, type: .fetch))
            }
            self.completion?(changes)
        }

        operation.qualityOfService = .userInitiated

        let container = ReactorContainer.default()   // CKContainer.default()
        switch databaseScope {
        case .private:
            container.privateCloudDatabase.add(operation)
        case .shared:
            container.sharedCloudDatabase.add(operation)
        case .public:
            container.publicCloudDatabase.add(operation)
        @unknown default:
            fatalError()
        }

    }

    fileprivate func objectType(for record: Record) -> CloudKitSyncable.Type? {
        let filtered = objectTypes.filter { $0.recordType == record.recordType }
        return filtered.first
    }

}

// MARK: - DeleteFromCloudKit.swift

public struct DeleteFromCloudKit<T: CloudKitSyncable, U: State>: Command {

    public var objects: [T]
    public var databaseScope: DatabaseScope

    public init(_ objects: [T], privateDatabase: DatabaseScope = .private) {
        self.objects = objects
        self.databaseScope = privateDatabase
    }

    public func execute(state: U, core: Core<U>) {
        let recordIDs = objects.map { $0.cloudKitRecordID }   // objects.flatMap { $0.cloudKitRecordID }
        guard !recordIDs.isEmpty else { return }
        let operation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: recordIDs)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.modifyRecordsCompletionBlock = { _, _, error in
            if let error = error {
                core.fire(event: CloudKitOperationUpdated(status: .errored(error), type: .delete))
            } else {
                core.fire(event: CloudKitOperationUpdated(status: .completed, type: .delete))
            }
        }
        operation.qualityOfService = .userInitiated

        let container = ReactorContainer.default()   // CKContainer.default()
        switch databaseScope {
        case .private:
            container.privateCloudDatabase.add(operation)
        case .shared:
            container.sharedCloudDatabase.add(operation)
        case .public:
            container.publicCloudDatabase.add(operation)
        }

    }

}

// MARK: - The app's model

/// A model object as a CloudKitReactor app declares one.
struct ReactorTodo: CloudKitSyncable, CloudKitIdentifiable, CloudKitDiffable {
    var identifier: String
    var title: String
    var notes: String?
    var priority: Int
    var encodedSystemFields: Data?
    var cloudKitRecordChanges: [String: Any?] = [:]

    init(identifier: String, title: String, notes: String? = nil, priority: Int = 0) {
        self.identifier = identifier
        self.title = title
        self.notes = notes
        self.priority = priority
    }

    enum DecodingError: Error { case missing(String) }

    init(record: Record) throws {
        guard let title = record["title"] as? String else { throw DecodingError.missing("title") }
        identifier = record.recordID.recordName
        self.title = title
        notes = record["notes"] as? String
        priority = record["priority"] as? Int ?? 0
        encodedSystemFields = record.encodedSystemFieldsData
    }

    var cloudKitRecordProperties: [String: RecordValue?] {
        return ["title": title, "notes": notes, "priority": priority]
    }

    func diff(from original: ReactorTodo) -> [String: Any] {
        var changes = [String: Any]()
        if title != original.title { changes["title"] = title }
        if notes != original.notes { changes["notes"] = notes as Any }
        if priority != original.priority { changes["priority"] = priority }
        return changes
    }
}

// MARK: - Tests

@Suite("CloudKitReactor's commands, ported", .serialized, .timeLimit(.minutes(30)))
struct CloudKitReactorTests {
    /// Runs `body` with `CKContainer.default()` answering a container on a fresh store, its
    /// default custom zone made by CreateCustomZone.
    private func withDefaultContainer(on engine: TestEngine, _ body: (Container, Core<AppState>) async throws -> Void) async throws {
        try await withContainer(on: engine) { container in
            ReactorContainer.current = container
            defer { ReactorContainer.current = nil }
            let core = Core(state: AppState())
            // The zone is reported made after the operation's completion event: wait for it (or a failure).
            await core.fire(command: CreateCustomZone<AppState>()) { event in
                if event is CloudKitDefaultCustomZoneCreated { return true }
                guard let update = event as? CloudKitOperationUpdated, case .errored = update.status else { return false }
                return true
            }
            #expect(core.events.contains { ($0 as? CloudKitDefaultCustomZoneCreated)?.zoneID == CloudKitReactorConstants.zoneID })
            try await body(container, core)
        }
    }

    private func save(_ objects: [CloudKitSyncable], records: [Record] = [], policy: RecordSavePolicy = .ifServerRecordUnchanged, core: Core<AppState>) async -> Error? {
        await awaitCallback { done in
            core.fire(command: SaveCloudKitRecords<AppState>(records, objects: objects, savePolicy: policy) { done($0) })
        }
    }

    @Test("objects are saved as records of their type in the default custom zone, each reported, the operation long-lived", arguments: TestEngine.all)
    func saveObjects(engine: TestEngine) async throws {
        try await withDefaultContainer(on: engine) { container, core in
            let items = [ReactorTodo(identifier: "t1", title: "Write", notes: "draft", priority: 2), ReactorTodo(identifier: "t2", title: "Read")]
            #expect(await save(items, core: core) == nil)

            let saved = core.events.compactMap { ($0 as? CloudKitUpdated<Record>)?.payload }
            #expect(Set(saved.map(\.recordID.recordName)) == ["t1", "t2"])
            #expect(saved.allSatisfy { $0.recordType == "ReactorTodo" && $0.recordID.zoneID == CloudKitReactorConstants.zoneID && $0.recordChangeTag != nil })
            let stored = try await container.privateCloudDatabase.record(for: RecordID(recordName: "t2", zoneID: CloudKitReactorConstants.zoneID))
            #expect(stored["title"] as? String == "Read")
            #expect(stored["notes"] == nil, "a nil property leaves the field unset")
            #expect(stored["priority"] as? Int == 0)
            #expect(core.events.contains { event in
                guard let update = event as? CloudKitOperationUpdated, case .completed = update.status else { return false }
                return update.type == .save
            })
            #expect(try await container.allLongLivedOperationIDs().isEmpty, "a long-lived operation is listed only while it runs")
        }
    }

    @Test("an edit is applied to the record rebuilt from archived system fields; a stale copy then conflicts, reported per record", arguments: TestEngine.all)
    func editsFromSystemFields(engine: TestEngine) async throws {
        try await withDefaultContainer(on: engine) { container, core in
            #expect(await save([ReactorTodo(identifier: "t1", title: "Write", notes: "draft", priority: 1)], core: core) == nil)
            let stored = try await container.privateCloudDatabase.record(for: RecordID(recordName: "t1", zoneID: CloudKitReactorConstants.zoneID))

            let original = try ReactorTodo(record: stored)
            #expect(original.isSavedInCloudKit && !original.needsSavingToCloudKit)
            var edited = original
            edited.title = "Rewrite"
            edited.notes = nil
            edited.priority = 3
            edited.recordChanges(from: original)
            #expect(edited.needsSavingToCloudKit)
            let record = try #require(edited.recordToSave)
            #expect(record.recordChangeTag == stored.recordChangeTag)
            #expect(Set(record.changedKeys()) == ["title", "notes", "priority"])
            #expect(await save([], records: [record], core: core) == nil)

            let updated = try await container.privateCloudDatabase.record(for: record.recordID)
            #expect(updated["title"] as? String == "Rewrite" && updated["priority"] as? Int == 3)
            #expect(updated["notes"] == nil, "a change to nil removes the field")

            // The same edit again, from the system fields of the version it replaced.
            let stale = try #require(edited.recordToSave)
            let error = try #require(await save([], records: [stale], core: core))
            #expect((error as? StratusError)?.code == .partialFailure)
            let recordError = try #require(core.events.compactMap { $0 as? CloudKitRecordError }.first)
            #expect((recordError.error as? StratusError)?.code == .serverRecordChanged)
            #expect(recordError.record.recordID == record.recordID)
        }
    }

    @Test("a fetch follows the query's cursors through every page of the custom zone, and only that zone", arguments: TestEngine.all)
    func fetchFollowsCursors(engine: TestEngine) async throws {
        try await withDefaultContainer(on: engine) { container, core in
            let items = (0..<250).map { ReactorTodo(identifier: String(format: "item-%03d", $0), title: "Item \($0)") }
            #expect(await save(items, core: core) == nil)
            let elsewhere = Record(recordType: "ReactorTodo", recordID: RecordID(recordName: "elsewhere"))
            elsewhere["title"] = "in the default zone"
            _ = try await container.privateCloudDatabase.save(elsewhere)

            let count: Int? = await awaitCallback { done in
                core.fire(command: FetchFromCloudKit<ReactorTodo, AppState>(completion: { done($0) }))
            }
            #expect(count == 250)
            let fetched = core.events.compactMap { ($0 as? CloudKitUpdated<ReactorTodo>)?.payload }
            #expect(fetched.count == 250 && Set(fetched.map(\.identifier)).count == 250)
            #expect(fetched.allSatisfy { $0.isSavedInCloudKit })
            #expect(core.events.filter { isOperationEnd($0, .fetch) }.count == 1)
        }
    }

    @Test("zone changes with a configuration per zone: changes, deletions and tokens as events; from the tokens, nothing new", arguments: TestEngine.all)
    func zoneChanges(engine: TestEngine) async throws {
        try await withDefaultContainer(on: engine) { container, core in
            let archive = RecordZoneID(zoneName: "Archive", ownerName: CurrentUserDefaultName)
            await core.fire(command: CreateCustomZone<AppState>(named: "Archive")) { isOperationEnd($0, .save) }
            #expect(await save([ReactorTodo(identifier: "t1", title: "Write", notes: "long notes"), ReactorTodo(identifier: "t2", title: "Read")], core: core) == nil)
            let archived = Record(recordType: "ReactorTodo", recordID: RecordID(recordName: "old", zoneID: archive))
            archived["title"] = "Filed"
            archived["notes"] = "kept out of the fetch"
            _ = try await container.privateCloudDatabase.save(archived)
            func fetch(tokens: [RecordZone.ID: ServerChangeToken]) async -> Core<AppState> {
                let fetchCore = Core(state: AppState())
                let titlesOnly = FetchRecordZoneChangesOperation.ZoneConfiguration(desiredKeys: ["title"])
                let zonesDone = Collected(0)
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    // The command's completion runs once per zone.
                    fetchCore.fire(command: FetchRecordZoneChanges<AppState>(
                        with: [ReactorTodo.self], recordZoneIDs: [CloudKitReactorConstants.zoneID, archive],
                        recordZoneChangesOptions: [FetchRecordZoneChangesOperation.ZoneConfiguration(), titlesOnly],
                        zoneChangeTokens: tokens) { _ in
                            zonesDone.value += 1
                            if zonesDone.value == 2 { continuation.resume() }
                        })
                }
                return fetchCore
            }

            func tokens(from core: Core<AppState>) -> [RecordZone.ID: ServerChangeToken] {
                var tokens: [RecordZone.ID: ServerChangeToken] = [:]
                for case let update as CloudKitServerChangeTokenUpdated in core.events { tokens[update.zoneID] = update.token }
                return tokens
            }

            let first = await fetch(tokens: [:])
            let items = first.events.compactMap { ($0 as? CloudKitUpdated<CloudKitSyncable>)?.payload as? ReactorTodo }
            #expect(Set(items.map(\.identifier)) == ["t1", "t2", "old"])
            #expect(items.first { $0.identifier == "t1" }?.notes == "long notes")
            #expect(items.first { $0.identifier == "old" }?.notes == nil, "the archive's configuration asked for titles only")
            #expect(Set(tokens(from: first).keys) == [CloudKitReactorConstants.zoneID, archive])

            await core.fire(command: DeleteFromCloudKit<ReactorTodo, AppState>([ReactorTodo(identifier: "t2", title: "Read")])) { isOperationEnd($0, .delete) }
            let second = await fetch(tokens: tokens(from: first))
            #expect(second.events.compactMap { ($0 as? CloudKitDeleted)?.recordID.recordName } == ["t2"])
            #expect(!second.events.contains { $0 is CloudKitUpdated<CloudKitSyncable> })

            let third = await fetch(tokens: tokens(from: second))
            #expect(!third.events.contains { $0 is CloudKitUpdated<CloudKitSyncable> || $0 is CloudKitDeleted })
        }
    }
}
