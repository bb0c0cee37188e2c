import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A Sudoku app's private-database gateway (wei18/Sudoku,
// Packages/SudokuKit/Sources/Persistence/Live/LivePrivateCKGateway.swift, the revision with save
// policies and archived system fields, and the seam it implements,
// Persistence/PrivateCKGateway.swift and PersistenceError.swift), ported mechanically. Its CloudKit
// habits: an `actor` holding the container and database; `internal import CloudKit`; a zone made
// with `modifyRecordZones(saving:deleting: [])` and a `CKDatabaseSubscription` with
// `shouldSendContentAvailable` saved with `modifySubscriptions(saving:deleting: [])`;
// `record(for:)` whose `.unknownItem` means "not there"; `modifyRecords(saving:deleting:
// savePolicy:atomically: true)` with `CKModifyRecordsOperation.RecordSavePolicy` `.allKeys` or
// `.ifServerRecordUnchanged`, its `saveResults` read for the record and `serverRecordChanged`
// turned into the app's conflict error; a record rebuilt from `encodeSystemFields` archived with
// `NSKeyedArchiver(requiringSecureCoding: true)` and read with
// `NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.self, from:)`, so a save carries the
// fetched change tag; values stored `as any CKRecordValue` and read back through `as? String`,
// `as? Date`, `as? Data`, `as? [String]` and `as? NSNumber` in that order; queries with
// `BEGINSWITH` in the zone with `records(matching:inZoneWith:)`.
// Substitutions besides the README's: the app's own `RecordValue` and `RecordSavePolicy` meet
// Stratus's names once the prefix is dropped, so Stratus's are named by module where the app
// means CloudKit's (`any Stratus.RecordValue`; README "Dropping the CK prefix can meet a type of
// the app's own"); the types are nested in `Sudoku` (other ports declare `RecordPayload`-like
// names); the container is handed in (a store file per test) instead of `.default()`; the
// engine's `Mode.daily.rawValue` is its value, `"daily"`; `NSPredicate(format:)` in the
// non-throwing `translate` is `try! QueryPredicate(format:)` (README "two calls need try"). The protocol is taken at the revision
// the gateway implements (before `dailyCompletedAll`). `internal import CloudKit` and
// `internal import Foundation` are plain imports: Swift refuses an `internal import` of a module
// that another file of the same target imports without an access level, and this test target's
// other files do (the app's package imports that way in every file).

enum Sudoku {
    // MARK: - PrivateCKGateway.swift

    public enum RecordValue: Sendable, Equatable, Hashable {
        case string(String)
        case int(Int)
        case date(Date)
        case data(Data)
        case stringSet([String])
    }

    public struct RecordPayload: Sendable, Equatable, Hashable {
        public let recordType: String
        public let recordName: String
        public var fields: [String: RecordValue]
        public var encodedSystemFields: Data?

        public init(
            recordType: String,
            recordName: String,
            fields: [String: RecordValue],
            encodedSystemFields: Data? = nil
        ) {
            self.recordType = recordType
            self.recordName = recordName
            self.fields = fields
            self.encodedSystemFields = encodedSystemFields
        }

        public static func == (lhs: RecordPayload, rhs: RecordPayload) -> Bool {
            lhs.recordType == rhs.recordType
                && lhs.recordName == rhs.recordName
                && lhs.fields == rhs.fields
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(recordType)
            hasher.combine(recordName)
            hasher.combine(fields)
        }
    }

    public enum RecordPredicate: Sendable, Equatable, Hashable {
        case all(recordType: String)
        case statusEquals(recordType: String, status: String)
        case dailyCompletedOn(dayPrefix: String)   // puzzleId hasPrefix dayPrefix
    }

    public enum RecordSavePolicy: Sendable {
        case lastWriteWins
        case ifUnchanged
    }

    public protocol PrivateCKGateway: Sendable {
        func provisionZone() async throws
        func installSubscriptionIfNeeded() async throws
        func fetch(recordName: String) async throws -> RecordPayload?
        func save(_ payload: RecordPayload, policy: RecordSavePolicy) async throws
        func delete(recordName: String) async throws
        func query(_ predicate: RecordPredicate) async throws -> [RecordPayload]
    }

    public enum PrivateCKConstants {
        public static let savedGameRecordType = "SavedGame"
        public static let personalRecordRecordType = "PersonalRecord"
        public static let monetizationStateRecordType = "MonetizationState"
    }

    public struct PrivateCKConfig: Sendable, Equatable {
        public let zoneName: String
        public let subscriptionID: String

        public init(zoneName: String, subscriptionID: String) {
            self.zoneName = zoneName
            self.subscriptionID = subscriptionID
        }

        public static let sudoku = PrivateCKConfig(
            zoneName: "com.wei18.sudoku.userZone",
            subscriptionID: "com.wei18.sudoku.userZone.changes"
        )
    }

    // MARK: - PersistenceError.swift

    public enum PersistenceError: Error, Sendable, Equatable {
        case iCloudNotSignedIn
        case iCloudSignedOutDuringSession
        case iCloudAccountChanged
        case quotaExceeded
        case zoneNotProvisioned
        case syncConflict(recordName: String)
        case schemaVersionTooNew(expected: Int, found: Int)
        case underlying(domain: String, code: Int, description: String)
    }

    // MARK: - Live/LivePrivateCKGateway.swift

    internal actor LivePrivateCKGateway: PrivateCKGateway {

        private let container: Container
        private let database: Database
        private let config: PrivateCKConfig
        internal let zoneID: RecordZone.ID

        private var zoneProvisioned: Bool = false
        private var subscriptionInstalled: Bool = false

        init(config: PrivateCKConfig, container: Container = .default()) {
            self.container = container
            self.database = container.privateCloudDatabase
            self.config = config
            self.zoneID = RecordZone.ID(
                zoneName: config.zoneName,
                ownerName: CurrentUserDefaultName
            )
        }

        func provisionZone() async throws {
            guard !zoneProvisioned else { return }
            let zone = RecordZone(zoneID: zoneID)
            _ = try await database.modifyRecordZones(saving: [zone], deleting: [])
            zoneProvisioned = true
        }

        func installSubscriptionIfNeeded() async throws {
            guard !subscriptionInstalled else { return }
            let subscription = DatabaseSubscription(subscriptionID: config.subscriptionID)
            let notificationInfo = Subscription.NotificationInfo()
            notificationInfo.shouldSendContentAvailable = true
            subscription.notificationInfo = notificationInfo
            _ = try await database.modifySubscriptions(saving: [subscription], deleting: [])
            subscriptionInstalled = true
        }

        func fetch(recordName: String) async throws -> RecordPayload? {
            let id = Record.ID(recordName: recordName, zoneID: zoneID)
            do {
                let record = try await database.record(for: id)
                return Self.payload(from: record)
            } catch let ckError as StratusError where ckError.code == .unknownItem {
                return nil
            }
        }

        func save(_ payload: RecordPayload, policy: RecordSavePolicy) async throws {
            let record = Self.record(from: payload, zoneID: zoneID)
            let ckPolicy: ModifyRecordsOperation.RecordSavePolicy
            switch policy {
            case .lastWriteWins:
                ckPolicy = .allKeys
            case .ifUnchanged:
                ckPolicy = .ifServerRecordUnchanged
            }
            do {
                let result = try await database.modifyRecords(
                    saving: [record],
                    deleting: [],
                    savePolicy: ckPolicy,
                    atomically: true
                )
                if case .failure(let error) = result.saveResults[record.recordID] {
                    throw error
                }
            } catch {
                throw Self.translate(error, recordName: record.recordID.recordName)
            }
        }

        func delete(recordName: String) async throws {
            let id = Record.ID(recordName: recordName, zoneID: zoneID)
            _ = try await database.deleteRecord(withID: id)
        }

        func query(_ predicate: RecordPredicate) async throws -> [RecordPayload] {
            let (recordType, nsPredicate) = Self.translate(predicate)
            let query = Query(recordType: recordType, predicate: nsPredicate)
            do {
                let (matches, _) = try await database.records(matching: query, inZoneWith: zoneID)
                var results: [RecordPayload] = []
                for (_, result) in matches {
                    switch result {
                    case .success(let record):
                        results.append(Self.payload(from: record))
                    case .failure:
                        continue
                    }
                }
                return results
            } catch let ckError as StratusError where ckError.code == .unknownItem {
                return []
            }
        }

        // MARK: - Error translation

        static func translate(_ error: any Error, recordName: String) -> any Error {
            guard let ckError = error as? StratusError else { return error }
            switch ckError.code {
            case .serverRecordChanged:
                return PersistenceError.syncConflict(recordName: recordName)
            default:
                return error
            }
        }

        // MARK: - CKRecord <-> RecordPayload

        private static func record(from payload: RecordPayload, zoneID: RecordZone.ID) -> Record {
            let base: Record
            if let data = payload.encodedSystemFields,
               let unarchived = try? NSKeyedUnarchiver.unarchivedObject(
                   ofClass: Record.self, from: data
               ) {
                base = unarchived
            } else {
                let id = Record.ID(recordName: payload.recordName, zoneID: zoneID)
                base = Record(recordType: payload.recordType, recordID: id)
            }
            for (key, value) in payload.fields {
                switch value {
                case .string(let string):
                    base[key] = string as any Stratus.RecordValue
                case .int(let int):
                    base[key] = NSNumber(value: int) as any Stratus.RecordValue
                case .date(let date):
                    base[key] = date as any Stratus.RecordValue
                case .data(let data):
                    base[key] = data as any Stratus.RecordValue
                case .stringSet(let strings):
                    base[key] = strings as any Stratus.RecordValue
                }
            }
            return base
        }

        private static func payload(from record: Record) -> RecordPayload {
            var fields: [String: RecordValue] = [:]
            for key in record.allKeys() {
                guard let raw = record[key] else { continue }
                if let string = raw as? String {
                    fields[key] = .string(string)
                } else if let date = raw as? Date {
                    fields[key] = .date(date)
                } else if let data = raw as? Data {
                    fields[key] = .data(data)
                } else if let strings = raw as? [String] {
                    fields[key] = .stringSet(strings)
                } else if let number = raw as? NSNumber {
                    fields[key] = .int(number.intValue)
                }
            }
            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            record.encodeSystemFields(with: archiver)
            let encodedSystemFields = archiver.encodedData
            return RecordPayload(
                recordType: record.recordType,
                recordName: record.recordID.recordName,
                fields: fields,
                encodedSystemFields: encodedSystemFields.isEmpty ? nil : encodedSystemFields
            )
        }

        private static func translate(_ predicate: RecordPredicate) -> (String, QueryPredicate) {
            switch predicate {
            case .all(let type):
                return (type, QueryPredicate(value: true))
            case let .statusEquals(type, status):
                return (type, try! QueryPredicate(format: "status == %@", status))
            case .dailyCompletedOn(let dayPrefix):
                let predicate = try! QueryPredicate(
                    format: "mode == %@ AND status == %@ AND puzzleId BEGINSWITH %@",
                    "daily", "completed", dayPrefix
                )
                return (PrivateCKConstants.savedGameRecordType, predicate)
            }
        }
    }
}

// MARK: - Tests

@Suite struct SudokuPrivateGatewayTests {
    typealias Gateway = Sudoku.LivePrivateCKGateway
    typealias RecordPayload = Sudoku.RecordPayload

    static func game(_ name: String, mode: String = "daily", status: String = "completed", puzzleId: String,
                     seconds: Int = 300) -> RecordPayload {
        RecordPayload(recordType: Sudoku.PrivateCKConstants.savedGameRecordType, recordName: name, fields: [
            "mode": .string(mode), "status": .string(status), "puzzleId": .string(puzzleId),
            "elapsedSeconds": .int(seconds), "updatedAt": .date(Date(timeIntervalSince1970: 1_750_000_000)),
            "grid": .data(Data([1, 2, 3, 0])), "notes": .stringSet(["r1c1:4", "r2c2:7"]),
        ])
    }

    static func provisioned(_ container: Container) async throws -> Gateway {
        let gateway = Gateway(config: .sudoku, container: container)
        try await gateway.provisionZone()
        try await gateway.installSubscriptionIfNeeded()
        return gateway
    }

    @Test(arguments: TestEngine.all) func provisionMakesTheZoneAndTheDatabaseSubscription(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            _ = try await Self.provisioned(container)
            let database = container.privateCloudDatabase
            let zones = try await database.allRecordZones()
            #expect(zones.contains { $0.zoneID.zoneName == "com.wei18.sudoku.userZone" })
            let subscription = try await database.subscription(for: "com.wei18.sudoku.userZone.changes")
            #expect(subscription is DatabaseSubscription)
            #expect(subscription.notificationInfo?.shouldSendContentAvailable == true)
        }
    }

    /// Every value kind goes in `as any CKRecordValue` and comes back as the same case: the
    /// `as? String`, `Date`, `Data`, `[String]`, `NSNumber` chain picks each one's own type.
    @Test(arguments: TestEngine.all) func fieldsRoundTripThroughEveryValueKind(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            let game = Self.game("game-1", puzzleId: "2025-06-15#1")
            try await gateway.save(game, policy: .lastWriteWins)
            let fetched = try #require(try await gateway.fetch(recordName: "game-1"))
            #expect(fetched == game)
            #expect(fetched.fields["elapsedSeconds"] == .int(300))
            #expect(fetched.encodedSystemFields != nil)
        }
    }

    @Test(arguments: TestEngine.all) func fetchOfAMissingRecordIsNil(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            #expect(try await gateway.fetch(recordName: "never-saved") == nil)
        }
    }

    /// Last write wins: a payload without system fields (a fresh `CKRecord` of the same name)
    /// overwrites the stored record with `.allKeys`.
    @Test(arguments: TestEngine.all) func lastWriteWinsOverwritesWithoutAChangeTag(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            try await gateway.save(Self.game("game-1", puzzleId: "2025-06-15#1", seconds: 300), policy: .lastWriteWins)
            try await gateway.save(Self.game("game-1", puzzleId: "2025-06-15#1", seconds: 200), policy: .lastWriteWins)
            let fetched = try #require(try await gateway.fetch(recordName: "game-1"))
            #expect(fetched.fields["elapsedSeconds"] == .int(200))
        }
    }

    /// The `.ifUnchanged` path as the app wrote it (its header says it was never run against
    /// iCloud): `payload(from:)` writes `encodeSystemFields` into a keyed archiver with no root
    /// object, and `unarchivedObject(ofClass:from:)` reads the root object, so it answers `nil`
    /// (on Apple's Foundation too: the archive has no `root` key) and `record(from:)` falls back to
    /// a fresh record without a change tag. The server refuses it as `serverRecordChanged`; the
    /// request is atomic in a custom zone, so it throws the `partialFailure` holding that error,
    /// which `translate` does not map to `syncConflict`. Nothing is overwritten.
    @Test(arguments: TestEngine.all) func ifUnchangedAsWrittenSendsNoChangeTag(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            try await gateway.save(Self.game("best-daily", puzzleId: "2025-06-15#1", seconds: 300), policy: .lastWriteWins)
            let fetched = try #require(try await gateway.fetch(recordName: "best-daily"))
            let archive = try #require(fetched.encodedSystemFields)
            #expect((try? NSKeyedUnarchiver.unarchivedObject(ofClass: Record.self, from: archive)) == nil)

            var faster = fetched
            faster.fields["elapsedSeconds"] = .int(250)
            do {
                try await gateway.save(faster, policy: .ifUnchanged)
                Issue.record("a save without the change tag should be refused")
            } catch let error as StratusError {
                #expect(error.code == .partialFailure)
                let itemError = error.partialErrorsByItemID?.values.first as? StratusError
                #expect(itemError?.code == .serverRecordChanged)
                #expect(itemError?.serverRecord?["elapsedSeconds"] as? Int == 300)
            }
            #expect(try await gateway.fetch(recordName: "best-daily")?.fields["elapsedSeconds"] == .int(300))
        }
    }

    /// What the app's archive does hold: the system fields, read back with `CKRecord(coder:)`
    /// (CloudKit's documented reader of `encodeSystemFields`), carry the change tag, so a save
    /// with `.ifServerRecordUnchanged` goes through once and a second one from the same fields
    /// is refused.
    @Test(arguments: TestEngine.all) func theArchivedSystemFieldsCarryTheChangeTag(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            try await gateway.save(Self.game("best-daily", puzzleId: "2025-06-15#1", seconds: 300), policy: .lastWriteWins)
            let archive = try #require(try await gateway.fetch(recordName: "best-daily")?.encodedSystemFields)
            func rebuilt() throws -> Record {
                let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archive)
                unarchiver.requiresSecureCoding = true
                return try #require(Record(coder: unarchiver))
            }
            let database = container.privateCloudDatabase
            let first = try rebuilt()
            first["elapsedSeconds"] = 250
            _ = try await database.modifyRecords(saving: [first], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: true)
            let stale = try rebuilt()
            stale["elapsedSeconds"] = 280
            let refusal = await #expect(throws: StratusError.self) {
                _ = try await database.modifyRecords(saving: [stale], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: true)
            }
            let staleError = refusal?.partialErrorsByItemID?[stale.recordID] as? StratusError
            #expect(staleError?.code == .serverRecordChanged)
            #expect(staleError?.serverRecord?["elapsedSeconds"] as? Int == 250)
            #expect(try await gateway.fetch(recordName: "best-daily")?.fields["elapsedSeconds"] == .int(250))
        }
    }

    @Test(arguments: TestEngine.all) func queriesByStatusAndByDayPrefix(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            try await gateway.save(Self.game("d1", puzzleId: "2025-06-15#1"), policy: .lastWriteWins)
            try await gateway.save(Self.game("d2", puzzleId: "2025-06-16#1"), policy: .lastWriteWins)
            try await gateway.save(Self.game("d3", status: "inProgress", puzzleId: "2025-06-15#2"), policy: .lastWriteWins)
            try await gateway.save(Self.game("c1", mode: "classic", puzzleId: "2025-06-15#9"), policy: .lastWriteWins)

            let completedOn15 = try await gateway.query(.dailyCompletedOn(dayPrefix: "2025-06-15"))
            #expect(completedOn15.map(\.recordName) == ["d1"])
            let inProgress = try await gateway.query(.statusEquals(recordType: "SavedGame", status: "inProgress"))
            #expect(inProgress.map(\.recordName) == ["d3"])
            let all = try await gateway.query(.all(recordType: "SavedGame"))
            #expect(Set(all.map(\.recordName)) == ["d1", "d2", "d3", "c1"])
        }
    }

    /// A type never written: CloudKit answers `unknownItem` ("Did not find record type") in
    /// production, which the gateway reads as no records; either way the answer is empty.
    @Test(arguments: TestEngine.all) func queryOfATypeNeverWrittenIsEmpty(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            #expect(try await gateway.query(.all(recordType: Sudoku.PrivateCKConstants.personalRecordRecordType)).isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func deleteRemovesTheRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let gateway = try await Self.provisioned(container)
            try await gateway.save(Self.game("d1", puzzleId: "2025-06-15#1"), policy: .lastWriteWins)
            try await gateway.delete(recordName: "d1")
            #expect(try await gateway.fetch(recordName: "d1") == nil)
        }
    }
}
