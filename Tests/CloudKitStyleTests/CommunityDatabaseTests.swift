import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The public-database store of a community app (its CommunityDatabase.swift: `CommunityQuery`,
// `CommunityRecordValue`, `CloudKitCommunityDatabase`), ported mechanically. Its CloudKit
// habits: a field value kept as `CKRecordValue` (`s as NSString`, `d as NSDate`, a reference)
// and handed to `NSPredicate(format: "%K == %@", field, value.ckValue as! CVarArg)` and, for
// membership, `NSPredicate(format: "%K IN %@", field, values.map(\.ckValue) as NSArray)`; an
// upsert through `modifyRecords(saving:deleting:savePolicy: .allKeys, atomically: false)`; a
// "create" that relies on `.ifServerRecordUnchanged` failing a fresh record whose name exists
// with `serverRecordChanged`, caught either as the thrown error or from the per-record result;
// a query read page by page with `records(matching:resultsLimit:)` and
// `records(continuingMatchFrom:resultsLimit:)`; `unknownItem` for a missing record or record
// type taken as "nothing". The CloudKit original is in the comments.

enum CommunityError: Error, Equatable {
    case unavailable
    case alreadyExists
}

enum CommunityRecordValue: Equatable {
    case string(String)
    case reference(String)
    case date(Date)

    // var ckValue: CKRecordValue {
    //     case .string(let s): return s as NSString
    //     case .date(let d): return d as NSDate
    //     case .reference(let name): return CKRecord.Reference(recordID: CKRecord.ID(recordName: name), action: .none)
    var ckValue: RecordValue {
        switch self {
        case .string(let s): return s
        case .date(let d): return d as NSDate
        case .reference(let name):
            return Record.Reference(recordID: Record.ID(recordName: name), action: .none)
        }
    }

    init?(_ raw: Any?) {
        switch raw {
        case let s as String: self = .string(s)
        case let d as Date: self = .date(d)
        case let r as Record.Reference: self = .reference(r.recordID.recordName)
        default: return nil
        }
    }
}

struct CommunityQuery: Equatable {
    enum Filter: Equatable {
        case equals(String, CommunityRecordValue)
        case isIn(String, [CommunityRecordValue])
    }

    let type: String
    var filters: [Filter] = []
    var sortField: String? = nil
    var ascending: Bool = false
    var limit: Int = 100

    // var predicate: NSPredicate {
    //     case .equals(let field, let value):
    //         return NSPredicate(format: "%K == %@", field, value.ckValue as! CVarArg)
    //     case .isIn(let field, let values):
    //         return NSPredicate(format: "%K IN %@", field, values.map(\.ckValue) as NSArray)
    //     return parts.isEmpty ? NSPredicate(value: true) : NSCompoundPredicate(andPredicateWithSubpredicates: parts)
    var predicate: QueryPredicate {
        let parts: [QueryPredicate] = filters.map { filter in
            switch filter {
            case .equals(let field, let value):
                return try! QueryPredicate(format: "%K == %@", field, value.ckValue)
            case .isIn(let field, let values):
                return try! QueryPredicate(format: "%K IN %@", field, values.map(\.ckValue))
            }
        }
        return parts.isEmpty ? QueryPredicate(value: true) : QueryPredicate(andPredicateWithSubpredicates: parts)
    }

    var ckQuery: Query {
        let q = Query(recordType: type, predicate: predicate)
        if let sortField { q.sortDescriptors = [RecordSortDescriptor(key: sortField, ascending: ascending)] }
        return q
    }
}

final class CloudKitCommunityDatabase {
    private let container: Container
    private var db: Database { container.publicCloudDatabase }

    init(container: Container) { self.container = container }

    func currentUserRecordName() async throws -> String {
        guard try await container.accountStatus() == .available else { throw CommunityError.unavailable }
        return try await container.userRecordID().recordName
    }

    func save(_ record: Record) async throws -> Record {
        let (saved, _) = try await db.modifyRecords(saving: [record], deleting: [], savePolicy: .allKeys, atomically: false)
        guard let result = saved[record.recordID] else { return record }
        return try result.get()
    }

    // } catch let error as CKError where error.code == .serverRecordChanged {
    // } catch let error as CKError where error.code == .partialFailure {
    //     let item = error.partialErrorsByItemID?[record.recordID] as? CKError
    func create(_ record: Record) async throws -> Record {
        do {
            let (saved, _) = try await db.modifyRecords(saving: [record], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: false)
            guard let result = saved[record.recordID] else { throw CommunityError.alreadyExists }
            return try result.get()
        } catch let error as StratusError where error.code == .serverRecordChanged {
            throw CommunityError.alreadyExists
        } catch let error as StratusError where error.code == .partialFailure {
            let item = error.partialErrorsByItemID?[record.recordID] as? StratusError
            if item?.code == .serverRecordChanged { throw CommunityError.alreadyExists }
            throw item ?? error
        }
    }

    func fetch(_ recordName: String) async throws -> Record? {
        do {
            return try await db.record(for: Record.ID(recordName: recordName))
        } catch let error as StratusError where error.code == .unknownItem {
            return nil
        }
    }

    func query(_ query: CommunityQuery) async throws -> [Record] {
        do {
            return try await runQuery(query)
        } catch let error as StratusError where error.code == .unknownItem {
            return []
        }
    }

    private func runQuery(_ query: CommunityQuery) async throws -> [Record] {
        var out: [Record] = []
        var (matches, cursor) = try await db.records(matching: query.ckQuery, resultsLimit: query.limit)
        out += matches.compactMap { try? $0.1.get() }
        while let c = cursor, out.count < query.limit {
            (matches, cursor) = try await db.records(continuingMatchFrom: c, resultsLimit: query.limit - out.count)
            out += matches.compactMap { try? $0.1.get() }
        }
        return out
    }

    func delete(_ recordName: String) async throws {
        do {
            _ = try await db.deleteRecord(withID: Record.ID(recordName: recordName))
        } catch let error as StratusError where error.code == .unknownItem {
        }
    }
}

@Suite("A community app's public-database store, ported")
struct CommunityDatabaseTests {
    private func post(_ name: String, author: String, topic: String, at date: Date) -> Record {
        let record = Record(recordType: "Post", recordID: Record.ID(recordName: name))
        // record["author"] = CommunityRecordValue.reference(author).ckValue
        record["author"] = CommunityRecordValue.reference(author).ckValue
        record["topic"] = CommunityRecordValue.string(topic).ckValue
        record["createdAt"] = CommunityRecordValue.date(date).ckValue
        return record
    }

    @Test("a username is reserved once: creating a fresh record whose name exists is 'already exists', and the first stays", arguments: TestEngine.all)
    func reservation(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = CloudKitCommunityDatabase(container: container)
            let first = Record(recordType: "Username", recordID: Record.ID(recordName: "username-ada"))
            first["owner"] = "alice"
            _ = try await store.create(first)

            let second = Record(recordType: "Username", recordID: Record.ID(recordName: "username-ada"))
            second["owner"] = "mallory"
            await #expect(throws: CommunityError.alreadyExists) { try await store.create(second) }
            #expect(try await store.fetch("username-ada")?["owner"] as? String == "alice")
        }
    }

    @Test("an upsert with .allKeys overwrites a record rebuilt from scratch, where a plain save refuses it", arguments: TestEngine.all)
    func upsert(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = CloudKitCommunityDatabase(container: container)
            let block = Record(recordType: "Block", recordID: Record.ID(recordName: "block-1"))
            block["reason"] = "spam"
            _ = try await store.save(block)

            let rebuilt = Record(recordType: "Block", recordID: Record.ID(recordName: "block-1"))
            rebuilt["reason"] = "abuse"
            await #expect(throws: StratusError.self) { try await container.publicCloudDatabase.save(rebuilt) }
            let saved = try await store.save(rebuilt)
            #expect(saved["reason"] as? String == "abuse")
            #expect(try await store.fetch("block-1")?["reason"] as? String == "abuse")
        }
    }

    @Test("equality and membership filters built from record values, sorted, read page by page up to the limit", arguments: TestEngine.all)
    func filteredQuery(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = CloudKitCommunityDatabase(container: container)
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            for n in 0..<7 {
                _ = try await store.save(post("p\(n)", author: n % 2 == 0 ? "ada" : "bob", topic: ["a", "b", "c"][n % 3], at: start.addingTimeInterval(Double(n))))
            }
            let byAda = CommunityQuery(type: "Post", filters: [.equals("author", .reference("ada"))], sortField: "createdAt", ascending: false, limit: 3)
            #expect(try await store.query(byAda).map(\.recordID.recordName) == ["p6", "p4", "p2"])

            let inTopics = CommunityQuery(type: "Post", filters: [.isIn("topic", [.string("a"), .string("c")])], sortField: "createdAt", ascending: true)
            #expect(try await store.query(inTopics).map(\.recordID.recordName) == ["p0", "p2", "p3", "p5", "p6"])

            let byAuthors = CommunityQuery(type: "Post", filters: [.isIn("author", [.reference("bob")]), .equals("topic", .string("b"))])
            #expect(try await store.query(byAuthors).map(\.recordID.recordName) == ["p1"])

            let since = CommunityQuery(type: "Post", filters: [.equals("createdAt", .date(start.addingTimeInterval(5)))])
            #expect(try await store.query(since).map(\.recordID.recordName) == ["p5"])

            #expect(try await store.query(CommunityQuery(type: "NeverSaved")).isEmpty)
            try await store.delete("p0")
            try await store.delete("p0")
            #expect(try await store.fetch("p0") == nil)
        }
    }
}
