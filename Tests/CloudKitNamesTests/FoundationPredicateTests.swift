import CloudKit
import Foundation
import StratusTestSupport
import Testing

// CloudKit code makes its queries and subscriptions with Foundation's `NSPredicate(format:)` and
// `NSPredicate(value: true)`, and sorts with `NSSortDescriptor(key:ascending:)`; under
// `import CloudKit` those lines stay as written.
@Suite struct FoundationPredicateTests {
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
            func titles(_ predicate: NSPredicate) async throws -> [String] {
                let query = CKQuery(recordType: "Note", predicate: predicate)
                query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
                let (results, _) = try await database.records(matching: query)
                return try results.map { try $0.1.get()["title"] as? String ?? "" }
            }
            #expect(try await titles(NSPredicate(value: true)) == ["Bread", "Eggs", "Milk"])
            #expect(try await titles(NSPredicate(value: false)) == [])
            let both = NSCompoundPredicate(andPredicateWithSubpredicates: [NSPredicate(value: true), NSCompoundPredicate(notPredicateWithSubpredicate: NSPredicate(value: false))])
            #expect(try await titles(both) == ["Bread", "Eggs", "Milk"])
            let either = NSCompoundPredicate(andPredicateWithSubpredicates: [NSPredicate(value: true), NSPredicate(value: false)])
            #expect(try await titles(either) == [])
            #expect(CKQuery(recordType: "Note", predicate: NSPredicate(value: true)).predicate == QueryPredicate(value: true))
        }
    }

    @Test func queriesTakeFormatPredicates() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            try await savedNotes(["Milk", "Bread", "Butter", "Eggs"], in: database)
            func titles(_ predicate: NSPredicate) async throws -> [String] {
                let query = CKQuery(recordType: "Note", predicate: predicate)
                query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
                let (results, _) = try await database.records(matching: query)
                return try results.map { try $0.1.get()["title"] as? String ?? "" }
            }
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
