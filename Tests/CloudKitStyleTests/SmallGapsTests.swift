import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Smaller CloudKit spellings ported code uses: operations built empty and filled in, the
// reason of a zone deletion, `CKError(_nsError:)`, `CKLocationSortDescriptor`, the keys of
// `encryptedValues`, `allTokens()`, and the integer widths and `Float` CloudKit stores as
// `NSNumber`s. The CloudKit original is in the comment above each test.

@Suite("Smaller CloudKit spellings, as ported code writes them")
struct SmallGapsTests {
    // let query = CKQueryOperation(); query.query = …; let mark = CKMarkNotificationsReadOperation(); mark.notificationIDs = …
    @Test("CKQueryOperation() and CKMarkNotificationsReadOperation(), filled in before they run", arguments: TestEngine.all)
    func emptyOperations(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let task = Record(recordType: "Task", recordID: Record.ID(recordName: "t1"))
            task["done"] = false
            _ = try await database.save(task)
            let subscription = QuerySubscription(recordType: "Task", predicate: QueryPredicate(value: true), subscriptionID: "tasks",
                                                 options: [.firesOnRecordCreation])
            subscription.notificationInfo = NotificationInfo()
            try await database.save(subscription)
            _ = try await database.save(Record(recordType: "Task", recordID: Record.ID(recordName: "t2")))

            let query = QueryOperation()
            query.query = Query(recordType: "Task", predicate: try QueryPredicate(format: "done == 0"))
            let matched = Collected<[String]>([])
            await run(database) { finish in
                query.recordMatchedBlock = { id, _ in matched.value.append(id.recordName) }
                query.queryResultBlock = { _ in finish() }
                return query
            }
            #expect(matched.value == ["t1"])

            let failure = Collected<Error?>(nil)
            let empty = QueryOperation()
            await run(database) { finish in
                empty.queryResultBlock = { result in
                    if case .failure(let error) = result { failure.value = error }
                    finish()
                }
                return empty
            }
            #expect((failure.value as? StratusError)?.code == .invalidArguments, "a query operation without a query fails")

            let notifications = Collected<[StratusNotification]>([])
            let fetch = FetchNotificationChangesOperation()
            await run(database) { finish in
                fetch.notificationChangedBlock = { notifications.value.append($0) }
                fetch.fetchNotificationChangesResultBlock = { _ in finish() }
                return fetch
            }
            let mark = MarkNotificationsReadOperation()
            mark.notificationIDs = notifications.value.compactMap(\.notificationID)
            let marked = Collected<[StratusNotification.ID]?>(nil)
            await run(database) { finish in
                mark.markNotificationsReadCompletionBlock = { ids, _ in
                    marked.value = ids
                    finish()
                }
                return mark
            }
            #expect(mark.notificationIDs.count == 1 && marked.value == mark.notificationIDs)
        }
    }

    // for deletion in changes.deletions { if deletion.reason == .purged || deletion.purged { … } }
    @Test("a deleted zone's DatabaseChange.Deletion has reason .deleted and purged false", arguments: TestEngine.all)
    func deletionReason(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let photos = try await database.save(RecordZone(zoneName: "Photos"))
            let before = try await database.databaseChanges(since: nil)
            try await database.deleteRecordZone(withID: photos.zoneID)
            let after = try await database.databaseChanges(since: before.changeToken)
            let deletion = try #require(after.deletions.first { $0.zoneID == photos.zoneID })
            #expect(deletion.reason == .deleted && !deletion.purged)
            switch deletion.reason {
            case .deleted: break
            case .purged, .encryptedDataReset: Issue.record("Stratus deletes zones only")
            }
        }
    }

    // CKError(_nsError: NSError(domain: CKErrorDomain, code: …, userInfo: [CKErrorRetryAfterKey: 1.5]))
    @Test("CKError(_nsError:) → StratusError(_nsError:)")
    func errorFromNSError() {
        let fromNS = StratusError(_nsError: NSError(domain: ErrorDomain, code: StratusError.Code.networkFailure.rawValue, userInfo: [ErrorRetryAfterKey: 1.5]))
        #expect(fromNS.code == .networkFailure && fromNS.retryAfterSeconds == 1.5)
        let bridged = StratusError(.zoneBusy) as NSError
        #expect(StratusError(_nsError: bridged).code == .zoneBusy)
    }

    // query.sortDescriptors = [CKLocationSortDescriptor(key: "location", relativeLocation: here)]
    @Test("CKLocationSortDescriptor(key:relativeLocation:) sorts nearest first", arguments: TestEngine.all)
    func locationSort(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let places = [("far", 53.5), ("near", 52.53), ("middle", 53.0)].map { name, latitude -> Record in
                let place = Record(recordType: "Place", recordID: Record.ID(recordName: name))
                place["location"] = Location(latitude: latitude, longitude: 13.405)
                return place
            }
            _ = try await database.modifyRecords(saving: places, deleting: [])
            let here = Location(latitude: 52.52, longitude: 13.405)
            let query = Query(recordType: "Place", predicate: QueryPredicate(value: true))
            let descriptor = LocationSortDescriptor(key: "location", relativeLocation: here)
            query.sortDescriptors = [descriptor]
            #expect(descriptor.relativeLocation == here)
            let (matches, _) = try await database.records(matching: query)
            #expect(matches.map(\.0.recordName) == ["near", "middle", "far"])
        }
    }

    // note.encryptedValues.allKeys(), .changedKeys(); record.allTokens(); note["uint"] = UInt(12), Int16, UInt8, Float
    @Test("encryptedValues.allKeys()/changedKeys(), allTokens(), and the integer widths and Float CloudKit stores as NSNumber", arguments: TestEngine.all)
    func recordKeysTokensAndNumbers(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "note"))
            note["title"] = "The Café at Bob's"
            note.encryptedValues["secret"] = "s3cr3t"
            note.encryptedValues["pin"] = 1234
            #expect(note.encryptedValues.allKeys() == ["pin", "secret"])
            #expect(note.encryptedValues.changedKeys() == ["secret", "pin"])
            #expect(note.allTokens() == ["bob", "cafe", "s", "s3cr3t"])

            note["uint"] = UInt(12)
            note["uint64"] = UInt64(1) << 40
            note["int32"] = Int32(-7)
            note["small"] = Int16(-3)
            note["byte"] = UInt8(200)
            note["float"] = Float(0.25)
            note["uints"] = [UInt(1), UInt(2)]
            let saved = try await database.save(note)
            #expect(saved.encryptedValues.changedKeys().isEmpty)
            let fetched = try await database.record(for: note.recordID)
            #expect(fetched["uint"] as? UInt == 12)
            #expect(fetched["uint64"] as? UInt64 == UInt64(1) << 40)
            #expect(fetched["int32"] as? Int32 == -7)
            #expect(fetched["small"] as? Int16 == -3)
            #expect(fetched["byte"] as? UInt8 == 200)
            #expect(fetched["float"] as? Float == 0.25)
            #expect(fetched["uints"] as? [UInt] == [1, 2])
            let typed: UInt? = fetched["uint"]
            #expect(typed == 12)
            #expect(fetched.fieldValue(forKey: "uint64") == .int64(1 << 40), "stored as INT64")
            #expect(fetched.fieldValue(forKey: "float") == .double(0.25), "stored as DOUBLE")
            #expect(fetched.encryptedValues.allKeys() == ["pin", "secret"])

            fetched.encryptedValues["pin"] = nil
            fetched["title"] = "Tea"
            #expect(fetched.encryptedValues.changedKeys() == ["pin"])
            #expect(fetched.allTokens() == ["s3cr3t", "tea"])
        }
    }
}
