import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The attendee and message records of a meeting app (its CloudKitManager.swift:
// `fetchAttendeeStatusRecords(for:useSharedDB:)`, `upsertMessage(forMeetingRecordID:…)` and
// `fetchMessageRecords(for:useSharedDB:)`), ported mechanically without its sharing. Its
// CloudKit habits: child records hung on the meeting with `record.parent = CKRecord.Reference(…)`
// and found again by their parent, `NSPredicate(format: "%K == %@",
// CKRecord.SystemFieldKey.parent, parentRef)`, which CloudKit documents for `CKQuery`
// ("use … parent when creating an NSPredicate for a CKQuery"); a legacy fallback on a
// `.deleteSelf` reference field when the parent query finds nothing; `resultsLimit:
// CKQueryOperation.maximumResults`; a fetch-or-create on `unknownItem` and one merge retry on
// `serverRecordChanged`; the database chosen by `zoneID.ownerName == CKCurrentUserDefaultName`.
// And, from Apple's CloudKitCatalog (SaveRecordSample.swift), a zone ID written with the
// older `CKOwnerDefaultName`. The CloudKit original is in the comments.

final class MeetingStore {
    struct AttendeeKeys {
        static let type = "AttendeeStatus"
        static let meeting = "meeting"
        static let displayName = "displayName"
        static let appleUserID = "appleUserID"
    }

    struct MessageKeys {
        static let type = "Message"
        static let meeting = "meeting"
        static let appleUserID = "appleUserID"
        static let text = "text"
        static let timestamp = "timestamp"
        static let updatedAt = "updatedAt"
    }

    let privateDB: Database
    let sharedDB: Database

    init(container: Container) {
        privateDB = container.privateCloudDatabase
        sharedDB = container.sharedCloudDatabase
    }

    // let parentQ = CKQuery(recordType: AttendeeKeys.type,
    //                       predicate: NSPredicate(format: "%K == %@", CKRecord.SystemFieldKey.parent, parentRef))
    // let parentRes = try await db.records(matching: parentQ, inZoneWith: meetingRecordID.zoneID,
    //                                      desiredKeys: nil, resultsLimit: CKQueryOperation.maximumResults)
    func fetchAttendeeStatusRecords(for meetingRecordID: Record.ID, useSharedDB: Bool) async throws -> [Record] {
        let db = useSharedDB ? sharedDB : privateDB
        let parentRef = Record.Reference(recordID: meetingRecordID, action: .none)
        let parentQ = Query(recordType: AttendeeKeys.type,
                            predicate: try QueryPredicate(format: "%K == %@", Record.SystemFieldKey.parent, parentRef))
        let parentRes = try await db.records(matching: parentQ, inZoneWith: meetingRecordID.zoneID,
                                             desiredKeys: nil, resultsLimit: QueryOperation.maximumResults)
        var records = parentRes.matchResults.compactMap { try? $0.1.get() }

        if records.isEmpty {
            let meetingRef = Record.Reference(recordID: meetingRecordID, action: .deleteSelf)
            let legacyQ = Query(recordType: AttendeeKeys.type,
                                predicate: try QueryPredicate(format: "%K == %@", AttendeeKeys.meeting, meetingRef))
            let legacyRes = try await db.records(matching: legacyQ, inZoneWith: meetingRecordID.zoneID,
                                                 desiredKeys: nil, resultsLimit: QueryOperation.maximumResults)
            records = legacyRes.matchResults.compactMap { try? $0.1.get() }
        }
        records.sort { a, b in
            let an = (a[AttendeeKeys.displayName] as? String)?.lowercased()
            let bn = (b[AttendeeKeys.displayName] as? String)?.lowercased()
            if let an, let bn, an != bn { return an < bn }
            return a.recordID.recordName < b.recordID.recordName
        }
        return records
    }

    // let db: CKDatabase = (meetingRID.zoneID.ownerName == CKCurrentUserDefaultName) ? privateDB : sharedDB
    // do { rec = try await db.record(for: rid) } catch let err as CKError where err.code == .unknownItem {
    //     let r = CKRecord(recordType: MessageKeys.type, recordID: rid)
    //     r.parent = CKRecord.Reference(recordID: meetingRID, action: .none)
    // …
    // } catch let e as CKError where e.code == .serverRecordChanged {
    @discardableResult
    func upsertMessage(forMeetingRecordID meetingRID: Record.ID, appleUserID: String, text: String, timestamp: Date) async throws -> Record {
        let db: Database = (meetingRID.zoneID.ownerName == CurrentUserDefaultName) ? privateDB : sharedDB
        let ms = Int64(timestamp.timeIntervalSince1970 * 1000)
        let rid = Record.ID(recordName: "msg-\(meetingRID.recordName)-\(ms)-\(appleUserID)", zoneID: meetingRID.zoneID)

        let rec: Record
        do {
            rec = try await db.record(for: rid)
        } catch let err as StratusError where err.code == .unknownItem {
            let r = Record(recordType: MessageKeys.type, recordID: rid)
            r.parent = Record.Reference(recordID: meetingRID, action: .none)
            r[MessageKeys.meeting] = Record.Reference(recordID: meetingRID, action: .deleteSelf)
            rec = r
        }
        rec[MessageKeys.appleUserID] = appleUserID as RecordValue
        rec[MessageKeys.text] = text as RecordValue
        rec[MessageKeys.timestamp] = timestamp as RecordValue
        rec[MessageKeys.updatedAt] = Date() as RecordValue

        do {
            return try await db.save(rec)
        } catch let e as StratusError where e.code == .serverRecordChanged {
            let server = try await db.record(for: rid)
            server[MessageKeys.text] = text as RecordValue
            server[MessageKeys.updatedAt] = Date() as RecordValue
            return try await db.save(server)
        }
    }

    func fetchMessageRecords(for meetingRecordID: Record.ID, useSharedDB: Bool) async throws -> [Record] {
        let db = useSharedDB ? sharedDB : privateDB
        let parentRef = Record.Reference(recordID: meetingRecordID, action: .none)
        let predicate = try QueryPredicate(format: "%K == %@", Record.SystemFieldKey.parent, parentRef)
        let query = Query(recordType: MessageKeys.type, predicate: predicate)
        let result = try await db.records(matching: query, inZoneWith: meetingRecordID.zoneID,
                                          desiredKeys: nil, resultsLimit: QueryOperation.maximumResults)
        var records = result.matchResults.compactMap { try? $0.1.get() }
        records.sort {
            let a = ($0[MessageKeys.timestamp] as? Date) ?? Date.distantPast
            let b = ($1[MessageKeys.timestamp] as? Date) ?? Date.distantPast
            if a != b { return a < b }
            return $0.recordID.recordName < $1.recordID.recordName
        }
        return records
    }
}

@Suite("A meeting app's child records, found by their parent, ported")
struct MeetingChildRecordsTests {
    // let zoneID = CKRecordZoneID(zoneName: zoneName, ownerName: CKOwnerDefaultName)
    static let zoneID = RecordZoneID(zoneName: "Meetings", ownerName: OwnerDefaultName)

    private func setUp(_ database: Database) async throws -> (meeting: Record.ID, other: Record.ID) {
        #expect(Self.zoneID == RecordZone.ID(zoneName: "Meetings", ownerName: CurrentUserDefaultName))
        _ = try await database.save(RecordZone(zoneID: Self.zoneID))
        let meeting = Record(recordType: "Meeting", recordID: Record.ID(recordName: "standup", zoneID: Self.zoneID))
        let other = Record(recordType: "Meeting", recordID: Record.ID(recordName: "retro", zoneID: Self.zoneID))
        _ = try await database.modifyRecords(saving: [meeting, other], deleting: [])
        return (meeting.recordID, other.recordID)
    }

    @Test("messages hung on a meeting with record.parent are found by a parent predicate, and the merge retry keeps one per key", arguments: TestEngine.all)
    func messagesByParent(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = MeetingStore(container: container)
            let (meeting, other) = try await setUp(store.privateDB)
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            try await store.upsertMessage(forMeetingRecordID: meeting, appleUserID: "u1", text: "hello", timestamp: start.addingTimeInterval(1))
            try await store.upsertMessage(forMeetingRecordID: meeting, appleUserID: "u2", text: "hi", timestamp: start)
            try await store.upsertMessage(forMeetingRecordID: other, appleUserID: "u1", text: "elsewhere", timestamp: start)
            // The same key again updates the message instead of adding one.
            try await store.upsertMessage(forMeetingRecordID: meeting, appleUserID: "u1", text: "hello, edited", timestamp: start.addingTimeInterval(1))

            let messages = try await store.fetchMessageRecords(for: meeting, useSharedDB: false)
            #expect(messages.compactMap { $0[MeetingStore.MessageKeys.text] as? String } == ["hi", "hello, edited"])
            #expect(messages.allSatisfy { $0.parent?.recordID == meeting })
            #expect(try await store.fetchMessageRecords(for: other, useSharedDB: false).count == 1)
        }
    }

    @Test("attendees are found by parent, and rows with only the legacy reference field through the fallback", arguments: TestEngine.all)
    func attendeesByParentOrLegacyField(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = MeetingStore(container: container)
            let (meeting, other) = try await setUp(store.privateDB)
            let current = ["Bea", "al"].map { name -> Record in
                let record = Record(recordType: MeetingStore.AttendeeKeys.type, recordID: Record.ID(recordName: "att-\(name)", zoneID: Self.zoneID))
                record.setParent(meeting)
                record[MeetingStore.AttendeeKeys.displayName] = name
                return record
            }
            let legacy = Record(recordType: MeetingStore.AttendeeKeys.type, recordID: Record.ID(recordName: "att-legacy", zoneID: Self.zoneID))
            legacy[MeetingStore.AttendeeKeys.meeting] = Record.Reference(recordID: other, action: .deleteSelf)
            legacy[MeetingStore.AttendeeKeys.displayName] = "Old"
            _ = try await store.privateDB.modifyRecords(saving: current + [legacy], deleting: [])

            let attendees = try await store.fetchAttendeeStatusRecords(for: meeting, useSharedDB: false)
            #expect(attendees.map(\.recordID.recordName) == ["att-al", "att-Bea"])
            let legacyAttendees = try await store.fetchAttendeeStatusRecords(for: other, useSharedDB: false)
            #expect(legacyAttendees.map(\.recordID.recordName) == ["att-legacy"])
        }
    }

    @Test("a parent condition is answered by the record's parent: by record ID, by NOT, and never by a record without one", arguments: TestEngine.all)
    func parentConditionForms(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = MeetingStore(container: container)
            let (meeting, other) = try await setUp(store.privateDB)
            let child = Record(recordType: "Note", recordID: Record.ID(recordName: "child", zoneID: Self.zoneID))
            child.setParent(meeting)
            let sibling = Record(recordType: "Note", recordID: Record.ID(recordName: "sibling", zoneID: Self.zoneID))
            sibling.setParent(other)
            let orphan = Record(recordType: "Note", recordID: Record.ID(recordName: "orphan", zoneID: Self.zoneID))
            _ = try await store.privateDB.modifyRecords(saving: [child, sibling, orphan], deleting: [])

            func names(_ format: String, _ arguments: any Sendable...) async throws -> [String] {
                let query = Query(recordType: "Note", predicate: try QueryPredicate(format: format, argumentArray: arguments))
                return try await store.privateDB.records(matching: query, inZoneWith: Self.zoneID).matchResults.map(\.0.recordName).sorted()
            }
            // CKRecord.SystemFieldKey.parent is `___parent`, the name CloudKit's predicates know.
            #expect(try await names("%K == %@", Record.SystemFieldKey.parent, meeting) == ["child"])
            #expect(try await names("___parent IN %@", [meeting, other]) == ["child", "sibling"])
            #expect(try await names("NOT ___parent == %@", meeting) == ["sibling"])
            #expect(try await names("___parent != %@", other) == ["child"])
            #expect(try await names("parent == %@", meeting).isEmpty, "a plain parent is a field, which no note has")
        }
    }

    @Test("a query subscription on the parent fires for a new child of that meeting only", arguments: TestEngine.all)
    func subscriptionOnParent(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = MeetingStore(container: container)
            let (meeting, other) = try await setUp(store.privateDB)
            let predicate = try QueryPredicate(format: "%K == %@", Record.SystemFieldKey.parent, Record.Reference(recordID: meeting, action: .none))
            let subscription = QuerySubscription(recordType: MeetingStore.MessageKeys.type, predicate: predicate,
                                                 subscriptionID: "standup-messages", options: [.firesOnRecordCreation])
            subscription.zoneID = Self.zoneID
            let info = Subscription.NotificationInfo()
            info.shouldSendContentAvailable = true
            subscription.notificationInfo = info
            _ = try await store.privateDB.save(subscription)

            let start = Date(timeIntervalSince1970: 1_800_000_000)
            try await store.upsertMessage(forMeetingRecordID: other, appleUserID: "u1", text: "elsewhere", timestamp: start)
            try await store.upsertMessage(forMeetingRecordID: meeting, appleUserID: "u1", text: "hello", timestamp: start)

            let operation = FetchNotificationChangesOperation(previousServerChangeToken: nil)
            nonisolated(unsafe) var received: [StratusNotification] = []
            operation.notificationChangedBlock = { received.append($0) }
            let _: Bool = await awaitCallback { done in
                operation.fetchNotificationChangesResultBlock = { _ in done(true) }
                container.add(operation)
            }
            let fired = received.compactMap { ($0 as? QueryNotification)?.recordID?.recordName }
            #expect(fired == ["msg-standup-\(Int64(start.timeIntervalSince1970 * 1000))-u1"])
        }
    }
}
