import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// CloudKit spellings that the README's substitution table ports mechanically, in the shapes
// real CloudKit code has them: containers and predicates held in stored properties (`try!`),
// `CKOperation` as a parameter type, `NSPredicate` as a type and `NSCompoundPredicate`, and
// `CKNotification`. Each test is a ported program's piece; the CloudKit original is in the
// comment above it.

// static let shared = CloudStore(); let container = CKContainer(identifier: …);
// let openTasks = NSPredicate(format: "done == %@", NSNumber(value: false))
final class CloudStore {
    let container: Container
    lazy var database = container.publicCloudDatabase
    let openTasks = try! QueryPredicate(format: "done == %@", NSNumber(value: false))
    static let everything = QueryPredicate(value: true)

    init(path: String) {
        container = try! Container(identifier: "iCloud.com.example.extras", store: path, userName: "alice")
    }
}

// func configure(_ operation: CKOperation, group: CKOperationGroup)
func configure(_ operation: DatabaseOperation, group: OperationGroup) -> DatabaseOperation.ID {
    operation.qualityOfService = .userInitiated
    operation.group = group
    let configuration = DatabaseOperation.Configuration()
    configuration.timeoutIntervalForRequest = 30
    operation.configuration = configuration
    return operation.operationID
}

/// What an operation's blocks collect: they run one at a time, and it is read after the last.
final class Collected<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// Runs an operation to its end: `finish` is set as its final block's continuation.
func run(_ database: Database, _ make: (@escaping @Sendable () -> Void) -> DatabaseOperation) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        database.add(make { continuation.resume() })
    }
}

@Suite("The substitution table's spellings, as ported CloudKit code writes them")
struct PortingTableTests {
    // let store = CloudStore(); configure(query, group: group) with CKOperation.Configuration and CKOperation.ID
    @Test("try! in stored properties; CKOperation → DatabaseOperation (Configuration, ID)", arguments: TestEngine.all)
    func storedPropertiesAndOperationTypes(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let cloud = CloudStore(path: location)
            let database = cloud.database
            let task = Record(recordType: "Task", recordID: Record.ID(recordName: "t1"))
            task["done"] = false
            _ = try await database.save(task)

            let group = OperationGroup()
            group.name = "extras"
            let query = QueryOperation(query: Query(recordType: "Task", predicate: cloud.openTasks))
            query.resultsLimit = QueryOperation.maximumResults
            var ids: [DatabaseOperation.ID] = []
            ids.append(configure(query, group: group))
            let count = Collected(0)
            await run(database) { finish in
                query.recordMatchedBlock = { _, _ in count.value += 1 }
                query.queryResultBlock = { _ in finish() }
                return query
            }
            #expect(count.value == 1)
            #expect(ids == [query.operationID] && query.configuration.timeoutIntervalForRequest == 30 && query.group === group)
        }
    }

    // let books = NSPredicate(format: "category == %@", "books"); NSCompoundPredicate(andPredicateWithSubpredicates:),
    // NSCompoundPredicate(notPredicateWithSubpredicate:); `date as CVarArg` (the cast dropped)
    @Test("NSPredicate as a type and NSCompoundPredicate's AND and NOT, ported to QueryPredicate", arguments: TestEngine.all)
    func compoundPredicates(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            var products: [Record] = []
            for index in 0..<30 {
                let product = Record(recordType: "Product", recordID: Record.ID(recordName: String(format: "product-%03d", index)))
                product["category"] = ["books", "music", "games"][index % 3]
                product["price"] = Double(index) + 0.99
                product["releaseDate"] = Date(timeIntervalSince1970: 1_600_000_000 + Double(index) * 86_400)
                products.append(product)
            }
            _ = try await database.modifyRecords(saving: products, deleting: [])
            func count(_ predicate: QueryPredicate) async throws -> Int {
                try await database.records(matching: Query(recordType: "Product", predicate: predicate)).matchResults.count
            }
            let books: QueryPredicate = try QueryPredicate(format: "category == %@", "books")
            let cheap: QueryPredicate = try QueryPredicate(format: "price < %f", 10.0)
            #expect(try await count(QueryPredicate(andPredicateWithSubpredicates: [books, cheap])) == 4)
            #expect(QueryPredicate(andPredicateWithSubpredicates: [books, cheap]) == (books && cheap))
            #expect(try await count(QueryPredicate(notPredicateWithSubpredicate: books)) == 20)
            #expect(QueryPredicate(notPredicateWithSubpredicate: books) == !books)
            #expect(try await count(QueryPredicate(andPredicateWithSubpredicates: [])) == 30)
            let date = Date(timeIntervalSince1970: 1_600_000_000 + 10 * 86_400)
            #expect(try await count(QueryPredicate(format: "releaseDate < %@", date)) == 10)
        }
    }

    // var notifications: [CKNotification]; CKMarkNotificationsReadOperation(notificationIDsToMarkRead:) and its [CKNotification.ID]
    @Test("CKNotification → StratusNotification, CKNotification.ID → StratusNotification.ID", arguments: TestEngine.all)
    func notifications(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let subscription = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true), subscriptionID: "orders",
                                                 options: [.firesOnRecordCreation])
            subscription.notificationInfo = NotificationInfo(desiredKeys: ["total"])
            try await database.save(subscription)
            let order = Record(recordType: "Order")
            order["total"] = 12
            _ = try await database.save(order)

            let collected = Collected<[StratusNotification]>([])
            let fetch = FetchNotificationChangesOperation(previousServerChangeToken: nil)
            await run(database) { finish in
                fetch.notificationChangedBlock = { collected.value.append($0) }
                fetch.fetchNotificationChangesResultBlock = { _ in finish() }
                return fetch
            }
            let notifications: [StratusNotification] = collected.value
            #expect(notifications.count == 1 && notifications.first is QueryNotification)

            let ids: [StratusNotification.ID] = notifications.compactMap(\.notificationID)
            let mark = MarkNotificationsReadOperation(notificationIDsToMarkRead: ids)
            let marked = Collected<[StratusNotification.ID]?>(nil)
            await run(database) { finish in
                mark.markNotificationsReadCompletionBlock = { ids, _ in
                    marked.value = ids
                    finish()
                }
                return mark
            }
            #expect(marked.value?.count == 1)
        }
    }

}
