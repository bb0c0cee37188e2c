import Foundation
@_spi(StratusEngine) import Stratus
import Testing

/// The subscription and notification behaviour every ``StorageEngine`` must show, as named
/// cases that run like ``EngineConformance``'s (the SQLite and PostgreSQL test targets run them
/// unchanged):
///
/// ```swift
/// @Test(arguments: SubscriptionConformance.cases)
/// func subscriptions(_ testCase: EngineConformance.TestCase) async throws {
///     try await testCase.run(with: { try SQLiteEngine(path: $0.appendingPathComponent("store.sqlite").path) })
/// }
/// ```
///
/// Every case drives the engine through ``Container``, ``Database`` and the operations.
public enum SubscriptionConformance {
    public typealias TestCase = EngineConformance.TestCase
    public typealias Environment = EngineConformance.Environment

    /// Every case, in a stable order.
    public static var cases: [TestCase] {
        ruleCases + firingCases + feedCases
    }

    static let photos = RecordZone.ID(zoneName: "Photos")

    /// A subscription's notification info with nothing set, as CloudKit requires one.
    static func info(_ desiredKeys: [String]? = nil) -> NotificationInfo {
        let info = NotificationInfo()
        info.desiredKeys = desiredKeys
        return info
    }

    static func query(_ id: String, _ type: String, _ format: String, _ options: QuerySubscription.Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion],
                      keys: [String]? = nil, zone: RecordZone.ID? = nil) throws -> QuerySubscription {
        let subscription = QuerySubscription(recordType: type, predicate: try QueryPredicate(format: format), subscriptionID: id, options: options)
        subscription.notificationInfo = info(keys)
        subscription.zoneID = zone
        return subscription
    }

    /// Every notification of the container's user after `token`, read in batches of `limit`.
    static func notifications(of container: Container, since token: ServerChangeToken? = nil, limit: Int = 400) async throws -> (notifications: [StratusNotification], token: ServerChangeToken) {
        var all: [StratusNotification] = []
        var token = token
        while true {
            let batch = try await NotificationFeed(database: container.privateCloudDatabase).nextBatch(after: token, limit: limit)
            all += batch.notifications
            token = batch.token
            if !batch.moreComing { return (all, batch.token) }
        }
    }

    /// A notification in a line: `query sub recordCreated r1`, `zone sub Photos`, `database sub`, `read 7`.
    static func describe(_ notification: StratusNotification) -> String {
        switch notification {
        case let query as QueryNotification:
            "query \(query.subscriptionID ?? "?") \(query.queryNotificationReason) \(query.recordID?.recordName ?? "?")"
        case let zone as RecordZoneNotification: "zone \(zone.subscriptionID ?? "?") \(zone.recordZoneID?.zoneName ?? "?")"
        case let database as DatabaseNotification: "database \(database.subscriptionID ?? "?") \(database.databaseScope)"
        default: "\(notification.notificationType) \(notification.notificationID.map(String.init(describing:)) ?? "?")"
        }
    }

    static func described(_ container: Container, since token: ServerChangeToken? = nil) async throws -> [String] {
        try await notifications(of: container, since: token).notifications.map(describe)
    }

    // MARK: - Rules

    static let ruleCases: [TestCase] = [
        TestCase("subscriptions: saved, fetched, listed and deleted per user and database, every property round-trips", roundTrip),
        TestCase("subscriptions: CloudKit's rules and errors, per item with partialFailure", rulesAndErrors),
        TestCase("subscriptions: saving an ID again replaces it; a duplicate definition is serverRejectedRequest", replaceAndDuplicate),
        TestCase("subscriptions: the completion-handler forms answer as the async forms", completionHandlers),
    ]

    static func roundTrip(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let database = alice.privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))

        let query = try query("big-orders", "Order", "total > 100 AND status == 'open'", [.firesOnRecordCreation, .firesOnce], zone: photos)
        let full = NotificationInfo(alertBody: "body", alertLocalizationKey: "key", alertLocalizationArgs: ["title"], title: "t", titleLocalizationKey: "tk",
                                    titleLocalizationArgs: ["a"], subtitle: "s", subtitleLocalizationKey: "sk", subtitleLocalizationArgs: ["b"],
                                    alertActionLocalizationKey: "ak", alertLaunchImage: "img", soundName: "ping", desiredKeys: ["total", "title"],
                                    shouldBadge: true, shouldSendContentAvailable: true, shouldSendMutableContent: true, category: "cat", collapseIDKey: "title")
        query.notificationInfo = full
        let zone = RecordZoneSubscription(zoneID: photos, subscriptionID: "photos")
        zone.recordType = "Photo"
        zone.notificationInfo = info()
        let whole = DatabaseSubscription(subscriptionID: "everything")
        whole.notificationInfo = info()

        let saved = try await database.save(query)
        #expect(saved.subscriptionID == "big-orders")
        let results = try await database.modifySubscriptions(saving: [zone, whole], deleting: [])
        #expect(try results.saveResults["photos"]?.get().subscriptionType == .recordZone)
        #expect(try results.saveResults["everything"]?.get().subscriptionType == .database)

        let fetched = try #require(try await database.subscription(for: "big-orders") as? QuerySubscription)
        #expect(fetched == query)
        #expect(fetched.recordType == "Order")
        #expect(fetched.predicate == query.predicate)
        #expect(fetched.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnce])
        #expect(fetched.zoneID == photos)
        #expect(fetched.notificationInfo == full)
        #expect(fetched.notificationInfo?.shouldSendMutableContent == true && fetched.notificationInfo?.collapseIDKey == "title")
        let fetchedZone = try #require(try await database.subscription(for: "photos") as? RecordZoneSubscription)
        #expect(fetchedZone.zoneID == photos && fetchedZone.recordType == "Photo")
        #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["big-orders", "everything", "photos"])

        // Subscriptions are per user and per database.
        #expect(try await env.container(user: "bob").privateCloudDatabase.allSubscriptions().isEmpty)
        #expect(try await alice.publicCloudDatabase.allSubscriptions().isEmpty)
        let bobs = await caughtError { try await env.container(user: "bob").privateCloudDatabase.subscription(for: "big-orders") }
        #expect(stratusError(bobs)?.code == .unknownItem)

        #expect(try await database.deleteSubscription(withID: "photos") == "photos")
        #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["big-orders", "everything"])
        #expect(stratusError(await caughtError { try await database.deleteSubscription(withID: "photos") })?.code == .unknownItem)
        #expect(stratusError(await caughtError { try await database.subscription(for: "photos") })?.code == .unknownItem)
        let some = try await database.subscriptions(for: ["everything", "nothing"])
        #expect(try some["everything"]?.get().subscriptionID == "everything")
        #expect(errorCode(some["nothing"]) == .unknownItem)
    }

    static func rulesAndErrors(_ env: Environment) async throws {
        let container = env.container()
        let privateDB = container.privateCloudDatabase
        try await privateDB.save(RecordZone(zoneID: RecordZone.ID(zoneName: "Plain"), capabilities: [.atomic]))

        func saving(_ subscription: Subscription, in database: Database) async -> StratusError? {
            stratusError(await caughtError { try await database.save(subscription) })
        }
        // Query subscriptions are not supported in the shared database; zone subscriptions neither.
        #expect(await saving(try query("q", "Order", "TRUEPREDICATE"), in: container.sharedCloudDatabase)?.code == .invalidArguments)
        let sharedZone = RecordZoneSubscription(zoneID: photos, subscriptionID: "z")
        sharedZone.notificationInfo = info()
        #expect(await saving(sharedZone, in: container.sharedCloudDatabase)?.code == .invalidArguments)
        // Database subscriptions: private and shared databases only.
        let database = DatabaseSubscription(subscriptionID: "d")
        database.notificationInfo = info()
        let publicRefusal = await saving(database, in: container.publicCloudDatabase)
        #expect(publicRefusal?.code == .invalidArguments)
        #expect(publicRefusal?.message.contains("private and shared") == true)
        #expect(try await container.sharedCloudDatabase.save(database).subscriptionID == "d")
        // Narrowed to CloudKit's own share type, as apps watch their shares (My Spot's
        // `subscription.recordType = "cloudkit.share"`); a dotted type of no one's is refused.
        for scoped in [container.sharedCloudDatabase, privateDB] {
            let shares = DatabaseSubscription(subscriptionID: "shares")
            shares.recordType = RecordTypeShare
            shares.notificationInfo = info()
            #expect((try await scoped.save(shares) as? DatabaseSubscription)?.recordType == "cloudkit.share")
            #expect((try await scoped.subscription(for: "shares") as? DatabaseSubscription)?.recordType == "cloudkit.share")
            _ = try await scoped.deleteSubscription(withID: "shares")
        }
        let zoneShares = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Plain"), subscriptionID: "zone-shares")
        zoneShares.recordType = RecordTypeShare
        zoneShares.notificationInfo = info()
        let plainRefusal = await saving(zoneShares, in: privateDB)
        #expect(plainRefusal?.message.contains("fetchChanges") == true, "the record type passes; the zone's capabilities do not")
        let dotted = DatabaseSubscription(subscriptionID: "dotted")
        dotted.recordType = "com.example.Note"
        dotted.notificationInfo = info()
        #expect(await saving(dotted, in: privateDB)?.code == .invalidArguments)
        // Subscriptions are a signed-in user's: a caller who is not signed in keeps none.
        let visitor = env.anonymousContainer().publicCloudDatabase
        #expect(await saving(try query("anon", "Order", "TRUEPREDICATE"), in: visitor)?.code == .notAuthenticated)
        #expect(stratusError(await caughtError { try await visitor.allSubscriptions() })?.code == .notAuthenticated)
        #expect(stratusError(await caughtError { try await visitor.deleteSubscription(withID: "anon") })?.code == .notAuthenticated)
        let visitorNotifications = FetchNotificationChangesOperation(previousServerChangeToken: nil)
        let visitorFeed = Box<(any Error)?>(nil)
        visitorNotifications.fetchNotificationChangesResultBlock = { result in if case .failure(let error) = result { visitorFeed.value = error } }
        await run(visitorNotifications, on: visitor)
        #expect(stratusError(visitorFeed.value)?.code == .notAuthenticated)
        // A notificationInfo is required, as CloudKit requires it.
        let bare = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true), subscriptionID: "bare")
        #expect(await saving(bare, in: privateDB)?.message.contains("notificationInfo") == true)
        // At least one firing option.
        #expect(await saving(try query("never", "Order", "TRUEPREDICATE", [.firesOnce]), in: privateDB)?.code == .invalidArguments)
        // A record type and predicate queries accept.
        #expect(await saving(try query("bad-type", "9Order", "TRUEPREDICATE"), in: privateDB)?.code == .invalidArguments)
        let badPredicate = QuerySubscription(recordType: "Order", predicate: .condition(.compare(.field("total"), .less, .reference(reference("x")))), subscriptionID: "bad")
        badPredicate.notificationInfo = info()
        #expect(await saving(badPredicate, in: privateDB)?.code == .invalidArguments)
        // Zones: a missing zone is zoneNotFound; a zone without fetchChanges is refused.
        let missing = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Nowhere"), subscriptionID: "missing")
        missing.notificationInfo = info()
        #expect(await saving(missing, in: privateDB)?.code == .zoneNotFound)
        #expect(await saving(try query("zoned", "Order", "TRUEPREDICATE", zone: RecordZone.ID(zoneName: "Nowhere")), in: privateDB)?.code == .zoneNotFound)
        let plain = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Plain"), subscriptionID: "plain")
        plain.notificationInfo = info()
        #expect(await saving(plain, in: privateDB)?.message.contains("fetchChanges") == true)
        // The default zone tracks changes in Stratus, so it takes zone subscriptions.
        let defaultZone = RecordZoneSubscription(zoneID: .default, subscriptionID: "default-zone")
        defaultZone.notificationInfo = info()
        #expect(try await privateDB.save(defaultZone).subscriptionID == "default-zone")
        // IDs.
        #expect(await saving(try query("", "Order", "TRUEPREDICATE"), in: privateDB)?.code == .invalidArguments)
        #expect(await saving(try query(String(repeating: "x", count: 256), "Order", "TRUEPREDICATE"), in: privateDB)?.code == .invalidArguments)
        #expect(await saving(try query("tab\there", "Order", "TRUEPREDICATE"), in: privateDB)?.code == .invalidArguments)

        // Per item: the good ones are saved, the operation ends with partialFailure.
        let good = try query("good", "Order", "total > 1")
        let results = try await privateDB.modifySubscriptions(saving: [good, bare], deleting: ["unknown"])
        #expect(try results.saveResults["good"]?.get().subscriptionID == "good")
        #expect(errorCode(results.saveResults["bare"]) == .invalidArguments)
        #expect(errorCode(results.deleteResults["unknown"]) == .unknownItem)
        let op = ModifySubscriptionsOperation(subscriptionsToSave: [bare], subscriptionIDsToDelete: [])
        let final = BlockLog<StratusError?>()
        op.modifySubscriptionsResultBlock = { result in
            if case .failure(let error) = result { final.record(error as? StratusError) } else { final.record(nil) }
        }
        await run(op, on: privateDB)
        let partial = try #require(final.events.first ?? nil)
        #expect(partial.code == .partialFailure)
        #expect(partial.partialErrorsBySubscriptionID["bare"]?.code == .invalidArguments)
        #expect(try await privateDB.allSubscriptions().map(\.subscriptionID) == ["default-zone", "good"])
    }

    static func replaceAndDuplicate(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await database.save(try query("orders", "Order", "total > 1"))
        // The same ID again replaces the subscription.
        try await database.save(try query("orders", "Order", "total > 2", [.firesOnRecordCreation]))
        let replaced = try #require(try await database.subscription(for: "orders") as? QuerySubscription)
        #expect(replaced.predicate == (try QueryPredicate(format: "total > 2")))
        #expect(replaced.querySubscriptionOptions == [.firesOnRecordCreation])
        // The same definition under another ID is a duplicate (CloudKit: "subscription is duplicate of …").
        let duplicate = await caughtError { try await database.save(try query("orders-2", "Order", "total > 2", [.firesOnRecordCreation], keys: ["total"])) }
        #expect(stratusError(duplicate)?.code == .serverRejectedRequest)
        #expect(stratusError(duplicate)?.message.contains("'orders'") == true)
        // Another user may have the same definition.
        try await env.container(user: "bob").publicCloudDatabase.save(try query("orders-2", "Order", "total > 2", [.firesOnRecordCreation]))
        // A different definition is not a duplicate; deleting the original frees its definition.
        try await database.save(try query("orders-3", "Order", "total > 3"))
        _ = try await database.modifySubscriptions(saving: [try query("orders-4", "Order", "total > 2", [.firesOnRecordCreation])], deleting: ["orders"])
        #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["orders-3", "orders-4"])
    }

    static func completionHandlers(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let subscription = try query("handled", "Note", "TRUEPREDICATE")
        let saved: Subscription? = try await withCheckedThrowingContinuation { continuation in
            database.save(subscription) { saved, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: saved) }
            }
        }
        #expect(saved?.subscriptionID == "handled")
        let fetched: Subscription? = try await withCheckedThrowingContinuation { continuation in
            database.fetch(withSubscriptionID: "handled") { found, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: found) }
            }
        }
        #expect(fetched == subscription)
        let all: [Subscription]? = try await withCheckedThrowingContinuation { continuation in
            database.fetchAllSubscriptions { found, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: found) }
            }
        }
        #expect(all?.map(\.subscriptionID) == ["handled"])
        let deleted: Subscription.ID? = try await withCheckedThrowingContinuation { continuation in
            database.delete(withSubscriptionID: "handled") { id, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: id) }
            }
        }
        #expect(deleted == "handled")
        let missing: (any Error)? = await withCheckedContinuation { continuation in
            database.fetch(withSubscriptionID: "handled") { _, error in continuation.resume(returning: error) }
        }
        #expect(stratusError(missing)?.code == .unknownItem)
    }

    // MARK: - What fires

    static let firingCases: [TestCase] = [
        TestCase("notifications: a query subscription fires as CloudKit's rule says when a record starts or stops matching", startAndStopMatching),
        TestCase("notifications: desiredKeys carry the allowed values; alerts copy their texts and arguments", desiredKeysAndAlerts),
        TestCase("notifications: a zone or database subscription fires once per transaction, filtered by record type; a zone's deletion fires them", zoneAndDatabaseSubscriptions),
        TestCase("notifications: firesOnce fires once and deletes the subscription in the same transaction", firesOnce),
        TestCase("notifications: public subscriptions of several users each get their own; private ones only their user's writes", usersAndDatabases),
        TestCase("notifications: creatorUserRecordID == __defaultOwner__ in a subscription means its subscriber, as a record's creator reads to its own user", ownRecordsByDefaultOwner),
        TestCase("notifications: a public query subscription fires only for records its subscriber may read (a creator-only type: their own)", onlyReadableRecords),
        TestCase("notifications: rolled-back writes record nothing; a partial failure only what committed; cascades notify", atomicityAndCascades),
        TestCase("notifications: indexed, IN, recordID and scanned predicates agree with the query oracle on bulk imports", agreesWithOracle),
        TestCase("notifications: string conditions compare code points as queries do: NFC café and NFD cafe\u{301} are different values", distinctNormalForms),
    ]

    static func startAndStopMatching(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("open", "Task", "done == 0"))
        try await database.save(try query("created-only", "Task", "done == 0", [.firesOnRecordCreation]))
        try await database.save(try query("deleted-only", "Task", "done == 0", [.firesOnRecordDeletion]))

        let a = try await database.save(makeRecord("Task", "a", ["done": .int64(0)]))     // created, matches
        let b = try await database.save(makeRecord("Task", "b", ["done": .int64(1)]))     // created, does not match
        a["done"] = Int64(1)
        let a2 = try await database.save(a)                                                // update: stops matching → nothing
        b["done"] = Int64(0)
        let b2 = try await database.save(b)                                                // update: starts matching → recordUpdated
        b2["title"] = "still open"
        _ = try await database.save(b2)                                                    // update: still matches → recordUpdated
        try await database.deleteRecord(withID: a2.recordID)                               // deleted, did not match → nothing
        try await database.deleteRecord(withID: b2.recordID)                               // deleted, matched → recordDeleted
        _ = try await database.save(makeRecord("Other", "c", ["done": .int64(0)]))        // another type → nothing
        // One write's notifications come in subscription ID order.
        let fired = try await described(container)
        #expect(fired == [
            "query created-only recordCreated a", "query open recordCreated a",
            "query open recordUpdated b",
            "query open recordUpdated b",
            "query deleted-only recordDeleted b", "query open recordDeleted b",
        ])
        // An unchanged save writes nothing and notifies nothing.
        let c = try await database.save(makeRecord("Task", "d", ["done": .int64(0)]))
        let (_, token) = try await notifications(of: container)
        _ = try await database.modifyRecords(saving: [c], deleting: [], savePolicy: .changedKeys)
        #expect(try await described(container, since: token).isEmpty)
    }

    static func distinctNormalForms(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("equal", "Cafe", "title == 'caf\u{E9}'"))
        try await database.save(try query("listed", "Cafe", "title IN {'caf\u{E9}', 'x'}"))
        _ = try await database.save(makeRecord("Cafe", "nfd", ["title": .string("cafe\u{301}")]))
        _ = try await database.save(makeRecord("Cafe", "nfc", ["title": .string("CAF\u{C9}")]))
        #expect(try await described(container) == ["query equal recordCreated nfc", "query listed recordCreated nfc"])
        let matched = try await TestDatabase.queryAll(try Query(recordType: "Cafe", format: "title == %@", "caf\u{E9}"), in: database)
        #expect(TestDatabase.names(matched) == ["nfc"], "the query and the subscription agree")
    }

    static func desiredKeysAndAlerts(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        let subscription = try query("orders", "Order", "TRUEPREDICATE", keys: ["title", "total", "price", "when", "owner", "place", "blob", "tags", "missing"])
        subscription.notificationInfo?.alertBody = "New order"
        subscription.notificationInfo?.alertLocalizationArgs = ["title", "total", "missing"]
        subscription.notificationInfo?.soundName = "ping"
        try await database.save(subscription)
        let when = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
        let place = Location(latitude: 48.85, longitude: 2.35)
        try await database.save(makeRecord("Order", "o1", [
            "title": .string("Chairs"), "total": .int64(3), "price": .double(9.5), "when": .date(when), "owner": .reference(reference("alice-card")),
            "place": .location(place), "blob": .bytes(Data([1, 2])), "tags": .stringList(["x"]), "ignored": .string("not desired"),
        ]))
        try await database.deleteRecord(withID: Record.ID(recordName: "o1"))
        let notes = try await notifications(of: container).notifications
        #expect(notes.count == 2)
        let created = try #require(notes.first as? QueryNotification)
        #expect(created.queryNotificationReason == .recordCreated)
        #expect(created.recordID == Record.ID(recordName: "o1"))
        #expect(created.recordType == "Order")
        #expect(created.databaseScope == .private && !created.isPublicDatabase)
        #expect(created.containerIdentifier == Environment.containerIdentifier)
        #expect(created.subscriptionID == "orders")
        #expect(created.subscriptionOwnerUserRecordID == (try await container.userRecordID()))
        // CloudKit's desired-key types: strings, numbers, dates, references, locations; not bytes or lists.
        #expect(created.recordFieldValues == [
            "title": .string("Chairs"), "total": .int64(3), "price": .double(9.5), "when": .date(when), "owner": .reference(reference("alice-card")),
            "place": .location(place),
        ])
        #expect(created.recordFields?["title"] as? String == "Chairs")
        #expect(created.alertBody == "New order" && created.soundName == "ping")
        #expect(created.alertLocalizationArgs == ["Chairs", "3", ""])
        #expect(created.notificationID != nil && created.notificationType == .query && !created.isPruned)
        let deleted = try #require(notes.last as? QueryNotification)
        #expect(deleted.queryNotificationReason == .recordDeleted)
        #expect(deleted.recordFields == nil && deleted.recordFieldValues.isEmpty)
    }

    static func zoneAndDatabaseSubscriptions(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        let zone = RecordZoneSubscription(zoneID: photos, subscriptionID: "photos")
        zone.notificationInfo = info()
        let albums = RecordZoneSubscription(zoneID: photos, subscriptionID: "albums")
        albums.recordType = "Album"
        albums.notificationInfo = info()
        let everything = DatabaseSubscription(subscriptionID: "everything")
        everything.notificationInfo = info()
        let notes = DatabaseSubscription(subscriptionID: "notes")
        notes.recordType = "Note"
        notes.notificationInfo = info()
        _ = try await database.modifySubscriptions(saving: [zone, albums, everything, notes], deleting: [])

        // One transaction with three photos: one zone notification, one database notification.
        _ = try await database.modifyRecords(saving: (1...3).map { makeRecord("Photo", "p\($0)", zoneID: photos) }, deleting: [])
        let first = try await described(container)
        #expect(first == ["zone photos Photos", "database everything private"])
        var token = try await notifications(of: container).token
        // An album fires the typed zone subscription too; a note in the default zone the typed
        // database one. Zone notifications come before database ones, each in ID order.
        _ = try await database.save(makeRecord("Album", "a1", zoneID: photos))
        _ = try await database.save(makeRecord("Note", "n1"))
        let second = try await described(container, since: token)
        #expect(second == [
            "zone albums Photos", "zone photos Photos", "database everything private",
            "database everything private", "database notes private",
        ])
        token = try await notifications(of: container).token
        // A deletion of an album is a change of its type.
        try await database.deleteRecord(withID: Record.ID(recordName: "a1", zoneID: photos))
        let third = try await described(container, since: token)
        #expect(third == ["zone albums Photos", "zone photos Photos", "database everything private"])
        // Other users' writes fire nothing of alice's (her private database is hers alone).
        token = try await notifications(of: container).token
        _ = try await env.container(user: "bob").privateCloudDatabase.save(makeRecord("Note", "n2"))
        #expect(try await described(container, since: token).isEmpty)
        // Deleting the zone deletes its records, of every type: its zone subscriptions and the
        // database's fire, in the deletion's transaction, so that a client that follows the
        // database's notifications learns of it.
        token = try await notifications(of: container).token
        try await database.deleteRecordZone(withID: photos)
        #expect(try await described(container, since: token) == [
            "zone albums Photos", "zone photos Photos", "database everything private", "database notes private",
        ])
    }

    static func firesOnce(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("first-big", "Order", "total > 100", [.firesOnRecordCreation, .firesOnce]))
        // Two matching records in one transaction: one notification, then the subscription is gone.
        _ = try await database.modifyRecords(saving: [
            makeRecord("Order", "small", ["total": .int64(5)]), makeRecord("Order", "big1", ["total": .int64(500)]),
            makeRecord("Order", "big2", ["total": .int64(600)]),
        ], deleting: [])
        _ = try await database.save(makeRecord("Order", "big3", ["total": .int64(700)]))
        #expect(try await described(container) == ["query first-big recordCreated big1"])
        // Its date is whole milliseconds, as CloudKit's timestamps and the record's own dates are.
        let notification = try #require(try await notifications(of: container).notifications.first)
        let milliseconds = notification.creationDate.timeIntervalSinceReferenceDate * 1000
        #expect(abs(milliseconds - milliseconds.rounded()) < 0.001, "\(notification.creationDate.timeIntervalSince1970)")
        #expect(try await database.allSubscriptions().isEmpty)
    }

    static func ownRecordsByDefaultOwner(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob")
        // As CloudKit code builds it: the creator a record of one's own shows, __defaultOwner__.
        let mine = try await alice.publicCloudDatabase.save(makeRecord("Post", "first"))
        let me = try #require(mine.creatorUserRecordID)
        #expect(me.recordName == CurrentUserDefaultName)
        for user in [alice, bob] {
            let subscription = QuerySubscription(recordType: "Post", predicate: try QueryPredicate(format: "creatorUserRecordID == %@", me),
                                                 subscriptionID: "mine", options: [.firesOnRecordCreation])
            subscription.notificationInfo = info()
            try await user.publicCloudDatabase.save(subscription)
        }
        _ = try await alice.publicCloudDatabase.save(makeRecord("Post", "alices"))
        _ = try await bob.publicCloudDatabase.save(makeRecord("Post", "bobs"))
        #expect(try await described(alice) == ["query mine recordCreated alices"])
        #expect(try await described(bob) == ["query mine recordCreated bobs"])
    }

    static func usersAndDatabases(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob"), carol = env.container(user: "carol")
        try await alice.publicCloudDatabase.save(try query("mine", "Post", "TRUEPREDICATE"))
        try await bob.publicCloudDatabase.save(try query("mine", "Post", "TRUEPREDICATE"))
        try await bob.privateCloudDatabase.save(try query("private-posts", "Post", "TRUEPREDICATE"))
        // Carol writes a public post: alice and bob each get theirs; carol (no subscription) nothing.
        _ = try await carol.publicCloudDatabase.save(makeRecord("Post", "hello"))
        // Alice writes a private post: bob's private subscription does not see it.
        _ = try await alice.privateCloudDatabase.save(makeRecord("Post", "diary"))
        _ = try await bob.privateCloudDatabase.save(makeRecord("Post", "bobs"))
        #expect(try await described(alice) == ["query mine recordCreated hello"])
        #expect(try await described(bob) == ["query mine recordCreated hello", "query private-posts recordCreated bobs"])
        #expect(try await described(carol).isEmpty)
        let bobs = try await notifications(of: bob).notifications
        #expect((bobs.first as? QueryNotification)?.databaseScope == .public)
        #expect((bobs.last as? QueryNotification)?.databaseScope == .private)
        // Feeds are per container too.
        let other = Container(identifier: "com.example.other", engine: env.engine, userName: "bob")
        #expect(try await described(other).isEmpty)
    }

    static func onlyReadableRecords(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob")
        // Only a note's creator reads it; anyone signed in creates notes.
        var note = RecordTypeSchema(recordType: "Note", grants: [.creator: [.read, .write], .authenticated: .create])
        note.addField("body", type: .string, indexes: [.queryable])
        _ = try await alice.saveSchema(note)
        try await bob.publicCloudDatabase.save(try query("secrets", "Note", "body BEGINSWITH 'secret'", keys: ["body"]))
        try await bob.publicCloudDatabase.save(try query("posts", "Post", "TRUEPREDICATE"))
        _ = try await alice.publicCloudDatabase.modifyRecords(saving: [
            makeRecord("Note", "alices", ["body": .string("secret: alice's diary")]), makeRecord("Post", "hello"),
        ], deleting: [])
        _ = try await alice.publicCloudDatabase.deleteRecord(withID: Record.ID(recordName: "alices"))
        _ = try await bob.publicCloudDatabase.save(makeRecord("Note", "bobs", ["body": .string("secret: bob's own")]))
        // Bob's subscription tells him of his own note, and of nothing of alice's he may not read.
        let notes = try await notifications(of: bob).notifications
        #expect(notes.map(describe) == ["query posts recordCreated hello", "query secrets recordCreated bobs"])
        #expect(!notes.contains { ($0 as? QueryNotification)?.recordFields?["body"] as? String == "secret: alice's diary" })

        // Zone subscriptions in a public zone (a Stratus extension) likewise: a change of a
        // record the subscriber may not read tells nothing, also by its timing.
        let board = try await alice.publicCloudDatabase.save(RecordZone(zoneName: "Board")).zoneID
        for (id, type) in [("board-notes", "Note"), ("board-all", nil)] as [(String, String?)] {
            let watch = RecordZoneSubscription(zoneID: board, subscriptionID: id)
            watch.recordType = type
            watch.notificationInfo = info()
            try await bob.publicCloudDatabase.save(watch)
        }
        let before = try await notifications(of: bob).token
        _ = try await alice.publicCloudDatabase.save(makeRecord("Note", "alice-board", zoneID: board, ["body": .string("hers")]))
        _ = try await alice.publicCloudDatabase.deleteRecord(withID: Record.ID(recordName: "alice-board", zoneID: board))
        #expect(try await described(bob, since: before).isEmpty, "alice's notes are not bob's to hear of")
        _ = try await alice.publicCloudDatabase.save(makeRecord("Post", "alice-post", zoneID: board))
        #expect(try await described(bob, since: before) == ["query posts recordCreated alice-post", "zone board-all Board"], "a post is everyone's to read")
        let afterPost = try await notifications(of: bob).token
        _ = try await bob.publicCloudDatabase.save(makeRecord("Note", "bob-board", zoneID: board, ["body": .string("his")]))
        #expect(try await described(bob, since: afterPost) == ["zone board-all Board", "zone board-notes Board"])
    }

    static func atomicityAndCascades(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        try await database.save(try query("items", "Item", "TRUEPREDICATE"))
        _ = try await database.save(makeRecord("Item", "existing"))
        let zone = try await database.save(RecordZone(zoneName: "Atomic")).zoneID
        _ = try await database.save(makeRecord("Item", "existing", zoneID: zone))
        var token = try await notifications(of: container).token
        // An atomic request (in a zone with the atomic capability) with a conflict writes
        // nothing, and records no notification.
        let atomicStale = makeRecord("Item", "existing", zoneID: zone)
        let atomic = try await database.modifyRecordsEachItem(saving: [makeRecord("Item", "new1", zoneID: zone), atomicStale], deleting: [],
                                                      savePolicy: .ifServerRecordUnchanged, atomically: true)
        #expect(errorCode(atomic.saveResults[atomicStale.recordID]) == .serverRecordChanged)
        #expect(try await described(container, since: token).isEmpty)
        let stale = makeRecord("Item", "existing")
        // Not atomic: what committed notifies, what failed does not.
        _ = try await database.modifyRecordsEachItem(saving: [makeRecord("Item", "new2"), stale], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: false)
        #expect(try await described(container, since: token) == ["query items recordCreated new2"])
        token = try await notifications(of: container).token
        // A deletion that cascades through .deleteSelf references notifies for every record deleted.
        _ = try await database.modifyRecordsEachItem(saving: [
            makeRecord("Item", "parent"), makeRecord("Item", "child", ["up": .reference(reference("parent", .deleteSelf))]),
        ], deleting: [])
        try await database.deleteRecord(withID: Record.ID(recordName: "parent"))
        #expect(try await described(container, since: token) == [
            "query items recordCreated parent", "query items recordCreated child",
            "query items recordDeleted parent", "query items recordDeleted child",
        ])
    }

    static func agreesWithOracle(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        let predicates: [(String, String)] = [
            ("eq", "category == 'c3'"), ("eq-folded", "category == 'C4'"), ("in", "category IN {'c1', 'c2'}"), ("number", "n == 7"),
            ("double", "n == 7.0"), ("range", "n > 15"), ("and", "category == 'c5' AND n < 10"), ("id", "recordID == 'r-00011'"),
            ("text", "name BEGINSWITH 'item-1'"), ("not", "NOT category == 'c0'"), ("ref", "owner == 'u2'"), ("all", "TRUEPREDICATE"),
        ]
        for (id, format) in predicates { try await database.save(try query(id, "Item", format, [.firesOnRecordCreation])) }
        let refPredicate = QuerySubscription(recordType: "Item", predicate: .condition(.compare(.field("ref"), .equal, .reference(reference("u1")))),
                                             subscriptionID: "reference", options: [.firesOnRecordCreation])
        refPredicate.notificationInfo = info()
        try await database.save(refPredicate)
        let records = makeRecords("Item", count: 40, prefix: "r") { i in
            var fields: [String: FieldValue] = ["category": .string(i % 7 == 4 ? "C4" : "c\(i % 7)"), "name": .string("item-\(i)"), "owner": .string("u\(i % 3)")]
            // One type per field: development enforces the type a field's first value gave it.
            fields["n"] = .int64(Int64(i % 20))
            if i % 5 == 0 { fields["ref"] = .reference(reference("u\(i % 3)")) }
            return fields
        }
        // Through the bulk path (new records without parents), as an import writes them.
        _ = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys, atomically: false)
        let fired = try await notifications(of: container).notifications.compactMap { $0 as? QueryNotification }
        var expected: [String: [String]] = [:]
        for (id, format) in predicates {
            expected[id] = TestDatabase.names(try QueryEvaluator.evaluate(Query(recordType: "Item", predicate: try QueryPredicate(format: format)), over: records))
        }
        expected["reference"] = TestDatabase.names(try QueryEvaluator.evaluate(Query(recordType: "Item", predicate: refPredicate.predicate), over: records))
        var actual: [String: [String]] = [:]
        for note in fired { actual[note.subscriptionID ?? "?", default: []].append(note.recordID?.recordName ?? "?") }
        for (id, names) in expected {
            #expect((actual[id] ?? []).sorted() == names.sorted(), "subscription \(id)")
        }
        #expect(expected["eq-folded"]?.isEmpty == false && expected["id"] == ["r-00011"] && expected["number"]?.isEmpty == false)
    }

    // MARK: - The feed

    static let feedCases: [TestCase] = [
        TestCase("feed: batches in commit order, each notification once; tokens of other users and kinds expire", feedOrderAndTokens),
        TestCase("feed: marking read appends readNotification entries once; unknown IDs are unknownItem", markRead),
        TestCase("feed: a notification sent on as CloudKit's push payload (remoteNotificationDictionary, JSON) reads back as its class with its values, and marks read; CloudKit's own payloads read too", remoteNotificationDictionaries),
        TestCase("feed: compaction removes old notifications and expires older tokens", compaction),
        TestCase("feed: updates follow new notifications as they commit", followLive),
        TestCase("feed: a commit wakes a waiting follower instead of leaving it to its timeout", commitWakesWaiter),
    ]

    static func feedOrderAndTokens(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("all", "Item", "TRUEPREDICATE"))
        for i in 0..<25 { _ = try await database.save(makeRecord("Item", recordName("i", i))) }
        let (first, token) = try await notifications(of: container, limit: 7)
        #expect(first.map { ($0 as? QueryNotification)?.recordID?.recordName ?? "?" } == (0..<25).map { recordName("i", $0) })
        let sequences = first.map(\.feedSequence)
        #expect(sequences == sequences.sorted() && Set(sequences).count == 25)
        // From the token: only what came after.
        _ = try await database.save(makeRecord("Item", "late"))
        #expect(try await described(container, since: token) == ["query all recordCreated late"])
        // The operation's blocks: moreComing and the older completion block.
        let op = FetchNotificationChangesOperation(previousServerChangeToken: nil)
        op.resultsLimit = 10
        let seen = BlockLog<String>()
        op.notificationChangedBlock = { seen.record(describe($0)) }
        op.fetchNotificationChangesCompletionBlock = { token, error in seen.record(token != nil && error == nil ? "completed" : "failed") }
        container.add(op)
        await waitUntilFinished([op])
        #expect(seen.events.count == 11 && seen.events.last == "completed" && op.moreComing)
        // A token is the user's, in the container: another's expires; so do zone tokens.
        let foreign = await caughtError { try await NotificationFeed(database: env.container(user: "bob").publicCloudDatabase).nextBatch(after: token, limit: 10) }
        #expect(stratusError(foreign)?.code == .changeTokenExpired)
        let zoneToken = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        #expect(stratusError(await caughtError { try await NotificationFeed(database: database).nextBatch(after: zoneToken, limit: 10) })?.code == .changeTokenExpired)
        #expect(stratusError(await caughtError { try await database.recordZoneChanges(inZoneWith: .default, since: token) })?.code == .changeTokenExpired)
        // A token from another store expires too.
        let otherStore = Container(identifier: Environment.containerIdentifier, engine: try env.makeAnotherEngine(), userName: "alice")
        try await otherStore.publicCloudDatabase.save(try query("all", "Item", "TRUEPREDICATE"))
        for i in 0..<30 { _ = try await otherStore.publicCloudDatabase.save(makeRecord("Item", recordName("o", i))) }
        #expect(stratusError(await caughtError { try await notifications(of: otherStore, since: token) })?.code == .changeTokenExpired)
        // Tokens serialize like change tokens.
        let again = try ServerChangeToken(serialized: token.serialized)
        #expect(again == token)
    }

    static func markRead(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("all", "Item", "TRUEPREDICATE"))
        _ = try await database.save(makeRecord("Item", "a"))
        _ = try await database.save(makeRecord("Item", "b"))
        let (notes, token) = try await notifications(of: container)
        let ids = notes.compactMap(\.notificationID)
        #expect(ids.count == 2)

        let marked = BlockLog<[StratusNotification.ID]>()
        let op = MarkNotificationsReadOperation(notificationIDsToMarkRead: [ids[0]])
        op.markNotificationsReadCompletionBlock = { ids, _ in marked.record(ids ?? []) }
        container.add(op)
        await waitUntilFinished([op])
        #expect(marked.events == [[ids[0]]])
        // Marking again succeeds and appends nothing more.
        let again = MarkNotificationsReadOperation(notificationIDsToMarkRead: [ids[0]])
        container.add(again)
        await waitUntilFinished([again])
        let after = try await notifications(of: container, since: token).notifications
        #expect(after.count == 1)
        #expect(after.first?.notificationType == .readNotification)
        #expect(after.first?.notificationID == ids[0])
        #expect(after.first.map { $0.feedSequence > ids[1].sequence } == true)

        // An ID that is not in the feed (another user's) fails alone.
        let bobs = env.container(user: "bob")
        try await bobs.publicCloudDatabase.save(try query("bobs", "Item", "TRUEPREDICATE"))
        _ = try await database.save(makeRecord("Item", "c"))
        let bobID = try #require(try await notifications(of: bobs).notifications.first?.notificationID)
        let mixed = MarkNotificationsReadOperation(notificationIDsToMarkRead: [ids[1], bobID])
        let results = BlockLog<String>()
        let final = BlockLog<StratusError?>()
        mixed.perNotificationIDResultBlock = { id, result in results.record("\(id) \(errorCode(result).map(String.init(describing:)) ?? "read")") }
        mixed.markNotificationsReadResultBlock = { result in if case .failure(let error) = result { final.record(error as? StratusError) } else { final.record(nil) } }
        container.add(mixed)
        await waitUntilFinished([mixed])
        #expect(results.events == ["\(ids[1]) read", "\(bobID) unknownItem"])
        let error = try #require(final.events.first ?? nil)
        #expect(error.code == .partialFailure && error.partialErrorsByNotificationID[bobID]?.code == .unknownItem)
    }

    static func remoteNotificationDictionaries(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        let subscription = try query("orders", "Order", "TRUEPREDICATE", keys: ["title", "total", "price", "when", "owner", "place"], zone: photos)
        subscription.notificationInfo?.alertBody = "New order"
        subscription.notificationInfo?.title = "Shop"
        subscription.notificationInfo?.soundName = "ping"
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(subscription)
        let zoneSubscription = RecordZoneSubscription(zoneID: photos, subscriptionID: "photos")
        zoneSubscription.notificationInfo = info()
        try await database.save(zoneSubscription)
        let databaseSubscription = DatabaseSubscription(subscriptionID: "everything")
        databaseSubscription.notificationInfo = info()
        try await database.save(databaseSubscription)
        let when = Date(timeIntervalSince1970: 1_700_000_000.5)
        try await database.save(makeRecord("Order", "o1", zoneID: photos, [
            "title": .string("Chairs"), "total": .int64(3), "price": .double(9.5), "when": .date(when),
            "owner": .reference(reference("alice-card", zoneID: photos)), "place": .location(Location(latitude: 1, longitude: 2)),
        ]))
        let (notes, token) = try await notifications(of: container)
        #expect(notes.count == 3)

        // Through JSON, as a server sends it on.
        func sentOn(_ note: StratusNotification) throws -> [AnyHashable: Any] {
            try #require(try JSONSerialization.jsonObject(with: try JSONSerialization.data(withJSONObject: note.remoteNotificationDictionary)) as? [AnyHashable: Any])
        }
        let original = try #require(notes.first { $0 is QueryNotification } as? QueryNotification)
        let payload = try sentOn(original)
        let read = try #require(StratusNotification(fromRemoteNotificationDictionary: payload) as? QueryNotification)
        #expect(read.queryNotificationReason == .recordCreated && read.recordID == original.recordID && read.recordType == "Order")
        #expect(read.databaseScope == .private && read.subscriptionID == "orders" && read.containerIdentifier == original.containerIdentifier)
        #expect(read.subscriptionOwnerUserRecordID == original.subscriptionOwnerUserRecordID)
        #expect(read.notificationID == original.notificationID && read.alertBody == "New order" && read.title == "Shop" && read.soundName == "ping")
        #expect(abs(read.creationDate.timeIntervalSince(original.creationDate)) < 0.001)
        // JSON's values: dates as milliseconds, references as record names; a location is left out.
        #expect(read.recordFieldValues == ["title": .string("Chairs"), "total": .int64(3), "price": .double(9.5),
                                           "when": .int64(1_700_000_000_500), "owner": .string("alice-card")], "\(read.recordFieldValues)")
        #expect(QueryNotification(fromRemoteNotificationDictionary: payload) != nil)
        #expect(RecordZoneNotification(fromRemoteNotificationDictionary: payload) == nil, "another class's payload reads as nil")

        let zone = try #require(notes.first { $0 is RecordZoneNotification })
        let readZone = try #require(RecordZoneNotification(fromRemoteNotificationDictionary: try sentOn(zone)))
        #expect(readZone.recordZoneID == photos && readZone.subscriptionID == "photos" && readZone.databaseScope == .private)
        let everything = try #require(notes.first { $0 is DatabaseNotification })
        let readDatabase = try #require(StratusNotification(fromRemoteNotificationDictionary: try sentOn(everything)) as? DatabaseNotification)
        #expect(readDatabase.subscriptionID == "everything" && readDatabase.databaseScope == .private)

        // The ID read back marks the notification read in its feed.
        let mark = MarkNotificationsReadOperation(notificationIDsToMarkRead: [try #require(read.notificationID)])
        container.add(mark)
        await waitUntilFinished([mark])
        let after = try await notifications(of: container, since: token).notifications
        #expect(after.map(\.notificationType) == [.readNotification] && after.first?.notificationID == original.notificationID)

        // A payload as CloudKit sends it: read, without an ID of a feed.
        let cloudKit: [AnyHashable: Any] = [
            "aps": ["alert": "Order placed", "content-available": 1],
            "ck": ["ce": 2, "cid": "iCloud.com.example.shop", "nid": "8d0c9a1e-2c1f-4a8b-9f3e-0b6c2f7d9e11", "ckuserid": "_0123456789abcdef0123456789abcdef",
                   "qry": ["dbs": 1, "fo": 2, "rid": "o9", "sid": "orders", "zid": "_defaultZone", "zoid": "_defaultOwner", "af": ["title": "Desk", "total": 4, "tags": ["a"]]]],
        ]
        let fromCloudKit = try #require(QueryNotification(fromRemoteNotificationDictionary: cloudKit))
        #expect(fromCloudKit.notificationID == nil && fromCloudKit.databaseScope == .public && fromCloudKit.queryNotificationReason == .recordUpdated)
        #expect(fromCloudKit.recordID?.recordName == "o9" && fromCloudKit.alertBody == "Order placed" && fromCloudKit.containerIdentifier == "iCloud.com.example.shop")
        #expect(fromCloudKit.recordFieldValues == ["title": .string("Desk"), "total": .int64(4), "tags": .stringList(["a"])])
        #expect(StratusNotification(fromRemoteNotificationDictionary: ["aps": ["alert": "not CloudKit's"]]) == nil)
        #expect(StratusNotification(fromRemoteNotificationDictionary: ["ck": ["cid": "x"]]) == nil, "no query, zone or database part")
    }

    static func compaction(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("all", "Item", "TRUEPREDICATE"))
        _ = try await database.save(makeRecord("Item", "a"))
        let (_, early) = try await notifications(of: container)
        _ = try await database.save(makeRecord("Item", "b"))
        let (_, late) = try await notifications(of: container)
        try await Task.sleep(for: .milliseconds(20))
        // Everything older than now goes: the early token (before b) expires, the late one (after b) goes on.
        #expect(try await container.compactNotifications(retention: 0) >= 2)
        #expect(stratusError(await caughtError { try await notifications(of: container, since: early) })?.code == .changeTokenExpired)
        #expect(try await described(container, since: late).isEmpty)
        _ = try await database.save(makeRecord("Item", "c"))
        #expect(try await described(container, since: late) == ["query all recordCreated c"])
        // From no token: what retention kept.
        #expect(try await described(container) == ["query all recordCreated c"])
        #expect(stratusError(await caughtError { try await container.compactNotifications(retention: -1) })?.code == .invalidArguments)
    }

    static func followLive(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("all", "Item", "TRUEPREDICATE"))
        _ = try await database.save(makeRecord("Item", "before"))
        let writer = Task {
            // Writes while the reader follows; each one is a separate commit.
            for i in 0..<5 {
                try await Task.sleep(for: .milliseconds(30))
                _ = try await database.save(makeRecord("Item", "live-\(i)"))
            }
        }
        var seen: [String] = []
        var token: ServerChangeToken?
        for try await batch in container.notificationUpdates(after: nil) {
            seen += batch.notifications.compactMap { ($0 as? QueryNotification)?.recordID?.recordName }
            token = batch.token
            if seen.count >= 6 { break }
        }
        try await writer.value
        #expect(seen == ["before"] + (0..<5).map { "live-\($0)" })
        #expect(try await described(container, since: token).isEmpty)
    }

    /// What `stratus watch` rests on: a waiter opened before a commit reports it. A waiter that
    /// misses commits answers false only when its (long) timeout ends, and the case fails.
    static func commitWakesWaiter(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await database.save(try query("all", "Item", "TRUEPREDICATE"))
        let feed = DatabaseContext(containerIdentifier: Environment.containerIdentifier, scope: .public, userName: "alice").notificationFeed
        let waiter = try env.engine.openNotificationWaiter(for: feed)
        defer { waiter.close() }
        for i in 0..<2 {
            _ = try await database.save(makeRecord("Item", "woken-\(i)"))
            let woken = try await Task.detached { try waiter.wait(timeout: 120) }.value
            #expect(woken, "commit \(i) woke the waiter")
        }
    }
}
