import CloudKit
import Foundation
import Stratus
import StratusTestSupport
import Testing

// CloudKit code makes its queries and subscriptions with Foundation's `NSPredicate(format:)` and
// `NSPredicate(value: true)`, and sorts with `NSSortDescriptor(key:ascending:)`; under
// `import CloudKit` those lines stay as written.
@Suite struct FoundationPredicateTests {
    /// The titles of the records of `recordType` that `predicate` matches, in title order.
    private static func titles(of recordType: String, matching predicate: NSPredicate, in database: CKDatabase) async throws -> [String] {
        let query = CKQuery(recordType: recordType, predicate: predicate)
        query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
        let (results, _) = try await database.records(matching: query)
        return try results.map { try $0.1.get()["title"] as? String ?? "" }
    }

    private func savedNotes(_ titles: [String], in database: CKDatabase) async throws {
        for title in titles {
            let note = CKRecord(recordType: "Note")
            note["title"] = title as CKRecordValue
            _ = try await database.save(note)
        }
    }

    @Test func queriesTakeFoundationsValuePredicates() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            try await savedNotes(["Milk", "Bread", "Eggs"], in: database)
            func titles(_ predicate: NSPredicate) async throws -> [String] { try await Self.titles(of: "Note", matching: predicate, in: database) }
            #expect(try await titles(NSPredicate(value: true)) == ["Bread", "Eggs", "Milk"])
            #expect(try await titles(NSPredicate(value: false)) == [])
            let both = NSCompoundPredicate(andPredicateWithSubpredicates: [NSPredicate(value: true), NSCompoundPredicate(notPredicateWithSubpredicate: NSPredicate(value: false))])
            #expect(try await titles(both) == ["Bread", "Eggs", "Milk"])
            let either = NSCompoundPredicate(andPredicateWithSubpredicates: [NSPredicate(value: true), NSPredicate(value: false)])
            #expect(try await titles(either) == [])
            #expect(CKQuery(recordType: "Note", predicate: NSPredicate(value: true)).predicate == QueryPredicate(value: true))
        }
    }

    /// What Swift 6 code wraps a predicate in to send it across tasks (found in public code):
    /// its value is a copy.
    private struct SendablePredicate: @unchecked Sendable {
        private let predicate: NSPredicate
        init(_ predicate: NSPredicate) { self.predicate = predicate }
        var value: NSPredicate { predicate.copy() as! NSPredicate }
    }

    @Test func copiesOfFormatPredicatesQueryAsTheOriginals() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            try await savedNotes(["Milk", "Bread", "Butter"], in: database)
            func titles(_ predicate: NSPredicate) async throws -> [String] { try await Self.titles(of: "Note", matching: predicate, in: database) }
            let startsWithB = NSPredicate(format: "title BEGINSWITH %@", "B")
            #expect(try await titles(SendablePredicate(startsWithB).value) == ["Bread", "Butter"])
            let copies = NSCompoundPredicate(andPredicateWithSubpredicates: [startsWithB.copy() as! NSPredicate, SendablePredicate(NSPredicate(format: "title != %@", "Bread")).value])
            #expect(try await titles(copies) == ["Butter"])
            let copy = startsWithB.copy() as! NSPredicate
            let butter = CKRecord(recordType: "Note")
            butter["title"] = "Butter"
            #expect(copy.evaluate(with: butter))
            let subscription = CKQuerySubscription(recordType: "Note", predicate: SendablePredicate(startsWithB).value, subscriptionID: "b")
            #expect(subscription.predicate == (try QueryPredicate(format: "title BEGINSWITH %@", "B")))
        }
    }

    @Test func queriesTakeFormatPredicates() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            try await savedNotes(["Milk", "Bread", "Butter", "Eggs"], in: database)
            func titles(_ predicate: NSPredicate) async throws -> [String] { try await Self.titles(of: "Note", matching: predicate, in: database) }
            #expect(try await titles(NSPredicate(format: "title BEGINSWITH %@", "B")) == ["Bread", "Butter"])
            #expect(try await titles(NSPredicate(format: "title IN %@", argumentArray: [["Eggs", "Milk", "Tea"]])) == ["Eggs", "Milk"])
            #expect(try await titles(NSPredicate(format: "%K == %@", "title", "Tea")) == [])
            // A placeholder replaced in a branch, and compounds of format predicates.
            var predicate = NSPredicate(value: true)
            predicate = NSPredicate(format: "title > %@", "Bread")
            #expect(try await titles(predicate) == ["Butter", "Eggs", "Milk"])
            let butterOnly = NSCompoundPredicate(andPredicateWithSubpredicates: [NSPredicate(format: "title BEGINSWITH %@", "B"), NSPredicate(format: "title != %@", "Bread")])
            #expect(try await titles(butterOnly) == ["Butter"])
            let notMilk = NSCompoundPredicate(notPredicateWithSubpredicate: NSPredicate(format: "title == %@", "Milk"))
            #expect(try await titles(notMilk) == ["Bread", "Butter", "Eggs"])
            #expect(CKQuery(recordType: "Note", predicate: NSPredicate(format: "title == %@", "Milk")).predicate == (try QueryPredicate(format: "title == %@", "Milk")))
        }
    }

    @Test func argumentsCastToCVarArgQueryAsTheirValues() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.tasks", storePath: store.path(), userName: "ada").privateCloudDatabase
            let list = CKRecord(recordType: "List", recordID: CKRecord.ID(recordName: "groceries"))
            _ = try await database.save(list)
            let start = Date(timeIntervalSince1970: 1_700_000_000)
            for (offset, title) in ["Milk", "Bread", "Eggs"].enumerated() {
                let task = CKRecord(recordType: "Task")
                task["title"] = title as CKRecordValue
                task["due"] = start.addingTimeInterval(Double(offset) * 86_400) as CKRecordValue
                task["done"] = (offset == 1) as CKRecordValue
                task["place"] = CLLocation(latitude: 52.52 + Double(offset), longitude: 13.405)
                if offset < 2 { task["list"] = CKRecord.Reference(recordID: list.recordID, action: .none) }
                _ = try await database.save(task)
            }
            func titles(_ predicate: NSPredicate) async throws -> [String] { try await Self.titles(of: "Task", matching: predicate, in: database) }
            // Written as CloudKit code writes them for Apple's platforms, casts and all.
            #expect(try await titles(NSPredicate(format: "due > %@", start as CVarArg)) == ["Bread", "Eggs"])
            #expect(try await titles(NSPredicate(format: "due <= %@", NSDate(timeIntervalSince1970: 1_700_000_000) as CVarArg)) == ["Milk"])
            #expect(try await titles(NSPredicate(format: "done == %@", NSNumber(value: true) as CVarArg)) == ["Bread"])
            #expect(try await titles(NSPredicate(format: "list == %@", list.recordID as CVarArg)) == ["Bread", "Milk"])
            #expect(try await titles(NSPredicate(format: "list == %@", CKRecord.Reference(recordID: list.recordID, action: .none) as CVarArg)) == ["Bread", "Milk"])
            #expect(try await titles(NSPredicate(format: "list == %@", list as CVarArg)) == ["Bread", "Milk"])
            let berlin = CLLocation(latitude: 52.52, longitude: 13.405)
            #expect(try await titles(NSPredicate(format: "distanceToLocation:fromLocation:(place, %@) < %f", berlin as CVarArg, 50.0)) == ["Milk"])
        }
        // A format prints such a value's description, as Foundation prints an object's.
        let noon = Date(timeIntervalSince1970: 43_200)
        #expect(String(format: "%@ | %@", noon as CVarArg, CKRecord.ID(recordName: "groceries") as CVarArg)
            == "\(noon) | \(CKRecord.ID(recordName: "groceries"))")
    }

    @Test func formatPredicatesEvaluateRecordsAsQueriesMatchThem() {
        let note = CKRecord(recordType: "Note")
        note["title"] = "Bread" as CKRecordValue
        note["count"] = 3 as CKRecordValue
        #expect(NSPredicate(format: "title BEGINSWITH %@ AND count >= %d", "Br", 2).evaluate(with: note))
        #expect(!NSPredicate(format: "count > %d", 3).evaluate(with: note))
        #expect(!NSPredicate(format: "missing == %@", "x").evaluate(with: note), "a record without the field does not match")
    }

    @Test func subscriptionsTakeFoundationsPredicates() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            let named = CKQuerySubscription(recordType: "Note", predicate: NSPredicate(format: "title != %@", "Spam"), subscriptionID: "every-note", options: [.firesOnRecordCreation])
            let unnamed = CKQuerySubscription(recordType: "Note", predicate: NSPredicate(value: true))
            let info = CKSubscription.NotificationInfo()
            info.shouldSendContentAvailable = true
            named.notificationInfo = info
            unnamed.notificationInfo = info
            _ = try await database.modifySubscriptions(saving: [named, unnamed], deleting: [])

            let fetched = try #require(try await database.subscription(for: "every-note") as? CKQuerySubscription)
            #expect(fetched.predicate == (try QueryPredicate(format: "title != %@", "Spam")))
            #expect(fetched.querySubscriptionOptions == [.firesOnRecordCreation])
            #expect(try await database.allSubscriptions().count == 2)
            #expect(!unnamed.subscriptionID.isEmpty && unnamed.subscriptionID != "every-note")
        }
    }
}
