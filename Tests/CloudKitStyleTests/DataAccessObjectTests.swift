import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A data-access object in the style of EVCloudKitDao (evermeer/EVCloudKitDao,
// Source/EVCloudKitDao.swift), ported mechanically. Its CloudKit habits that other ported code
// does not have: a query that pages itself by starting a new `CKQueryOperation(cursor:)` from the
// older `queryCompletionBlock` (written as a closure cast to the block's type), with
// `resultsLimit = CKQueryOperationMaximumResults`, `qualityOfService = .userInitiated` and
// `queuePriority = .veryHigh`; a default sort `NSSortDescriptor(key: "creationDate",
// ascending: false)` when the query has none; references built with the pre-4.2 names
// (`CKReference`, `CKRecordID`, `CKReferenceAction.deleteSelf`); the account status read once
// with a semaphore; and errors sorted into "retry after", "fail" and "recoverable" by reading
// the retry delay from `error._userInfo as? NSDictionary` as an `NSNumber`, then switching over
// `CKError(_nsError:)`'s code. The CloudKit original is in the comments. What the port changes
// besides the substitutions, as current SDKs require on Apple's platforms too (CloudKit's blocks
// are `@Sendable` there): the results the blocks collect live in a `Collected` box, not a
// captured `var`, the closure is not cast to a non-Sendable function type, and the deprecated
// `Double(retry)` is `Double(truncating: retry)`.

@Suite("A data-access object in the style of EVCloudKitDao, ported")
struct DataAccessObjectTests {
    @Test("a query that pages itself from queryCompletionBlock returns every match, newest first", arguments: TestEngine.all)
    func pagedQuery(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let dao = MessageDao(container: container)
            #expect(dao.accountStatus == .available)
            let channel = Record(recordType: "Channel", recordID: Record.ID(recordName: "general"))
            _ = try await container.publicCloudDatabase.save(channel)
            var saved: [Record] = []
            for n in 1...130 {
                let message = Record(recordType: "Message", recordID: Record.ID(recordName: "m\(n)"))
                message["text"] = "message \(n)"
                message["channel"] = dao.referenceForId("general")
                saved.append(message)
            }
            _ = try await container.publicCloudDatabase.modifyRecords(saving: saved, deleting: [])

            let pages = Collected<[Int]>([])
            let everything: [String] = await awaitCallback { done in
                dao.query("Message", predicate: QueryPredicate(value: true)) { results, isFinished in
                    pages.value.append(results.count)
                    if isFinished { done(results.map { $0.recordID.recordName }) }
                    return true
                } errorHandler: { _ in done([]) }
            }
            #expect(everything.count == 130)
            #expect(Set(everything).count == 130)
            // Results accumulate page by page (the default page is 100 records), the last one
            // reported with isFinished.
            #expect(pages.value == [100, 130])
            // The default sort is creationDate, descending: the last saved comes first.
            let dates = try await container.publicCloudDatabase.records(for: everything.prefix(2).map { Record.ID(recordName: $0) })
            let first = try dates[Record.ID(recordName: everything[0])]!.get().creationDate!
            let second = try dates[Record.ID(recordName: everything[1])]!.get().creationDate!
            #expect(first >= second)
        }
    }

    @Test("a caller that stops paging gets no more pages", arguments: TestEngine.all)
    func stopPaging(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let dao = MessageDao(container: container)
            _ = try await container.publicCloudDatabase.modifyRecords(
                saving: (1...250).map { Record(recordType: "Message", recordID: Record.ID(recordName: "m\($0)")) }, deleting: [])
            let calls = Collected(0)
            let firstPage: Int = await awaitCallback { done in
                dao.query("Message", predicate: QueryPredicate(value: true)) { results, _ in
                    calls.value += 1
                    done(results.count)
                    return false
                } errorHandler: { _ in done(-1) }
            }
            #expect(firstPage == 100)
            #expect(calls.value == 1)
        }
    }

    @Test("errors are sorted as EVCloudKitDao sorts them: the retry delay from _userInfo first, then the code", arguments: TestEngine.all)
    func errorCategories(engine: TestEngine) async throws {
        // The delay CloudKit sends wins over the code.
        let busy = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 3])
        #expect(MessageDao.handleCloudKitErrorAs(busy) == .retry(afterSeconds: 3))
        // Without one, the code decides: exponential back-off for transient codes.
        #expect(MessageDao.handleCloudKitErrorAs(StratusError(.networkUnavailable), retryAttempt: 3) == .retry(afterSeconds: 8))
        #expect(MessageDao.handleCloudKitErrorAs(StratusError(.unknownItem)) == .fail)
        #expect(MessageDao.handleCloudKitErrorAs(StratusError(.limitExceeded)) == .fail)
        #expect(MessageDao.handleCloudKitErrorAs(StratusError(.serverRecordChanged)) == .recoverableError)
        #expect(MessageDao.handleCloudKitErrorAs(nil) == .success)

        // And an error the store really returned: a stale save.
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let record = Record(recordType: "Message", recordID: Record.ID(recordName: "stale"))
            let stored = try await database.save(record)
            let copy = stored.copy() as! Record
            stored["text"] = "first"
            _ = try await database.save(stored)
            copy["text"] = "second"
            let error: Error? = await awaitCallback { done in
                database.save(copy) { _, error in done(error) }
            }
            #expect(MessageDao.handleCloudKitErrorAs(error) == .recoverableError)
            #expect(error?._code == StratusError.Code.serverRecordChanged.rawValue)
        }
    }
}

// enum HandleCloudKitErrorAs { case success, retry(afterSeconds: Double), fail, recoverableError }
enum HandleCloudKitErrorAs: Equatable {
    case success
    case retry(afterSeconds: Double)
    case fail
    case recoverableError
}

/// EVCloudKitDao's shape, over one container's public database.
final class MessageDao: @unchecked Sendable {
    private var container: Container!
    private var database: Database!
    var accountStatus: AccountStatus?

    init(container: Container) {
        // container = CKContainer(identifier: identifier)  — opened by the caller here.
        self.container = container
        database = container.publicCloudDatabase
        // let sema = DispatchSemaphore(value: 0)
        // container.accountStatus(completionHandler: { status, error in … sema.signal() })
        // let _ = sema.wait(timeout: DispatchTime.distantFuture)
        let sema = DispatchSemaphore(value: 0)
        container.accountStatus(completionHandler: { status, error in
            if error == nil { self.accountStatus = status }
            sema.signal()
        })
        _ = sema.wait(timeout: DispatchTime.distantFuture)
    }

    // open func referenceForId(_ recordId: String) -> CKReference {
    //     return CKReference(recordID: CKRecordID(recordName: recordId), action: CKReferenceAction.deleteSelf)
    // }
    func referenceForId(_ recordId: String) -> Reference {
        return Reference(recordID: RecordID(recordName: recordId), action: ReferenceAction.deleteSelf)
    }

    func query(
        _ recordType: String, predicate: QueryPredicate,
        completionHandler: @escaping (_ results: [Record], _ isFinished: Bool) -> Bool,
        errorHandler: ((_ error: Error) -> Void)? = nil
    ) {
        let query = Query(recordType: recordType, predicate: predicate)
        queryRecords(query, completionHandler: completionHandler, errorHandler: errorHandler)
    }

    // internal func queryRecords<T>(_ type: T, query: CKQuery, completionHandler: …) -> CKQueryOperation {
    //     if !(query.sortDescriptors != nil) {
    //         query.sortDescriptors = [NSSortDescriptor(key: "creationDate", ascending: false)]
    //     }
    //     let operation = CKQueryOperation(query: query)
    //     operation.qualityOfService = .userInitiated
    //     operation.queuePriority = .veryHigh
    //     var results = [T]()
    //     operation.recordFetchedBlock = { record in results.append(record) }
    //     operation.queryCompletionBlock = { cursor, error in
    //         self.handleCallback(error, errorHandler: errorHandler, completionHandler: {
    //             if completionHandler(results, cursor == nil) {
    //                 if cursor != nil { self.queryRecords(cursor!, continueWithResults: results, …) }
    //             }
    //         })
    //     } as ((CKQueryCursor?, Error?) -> Void)
    //     operation.resultsLimit = CKQueryOperationMaximumResults
    //     database.add(operation)
    //     return operation
    // }
    @discardableResult
    func queryRecords(
        _ query: Query, completionHandler: @escaping (_ results: [Record], _ isFinished: Bool) -> Bool,
        errorHandler: ((_ error: Error) -> Void)? = nil
    ) -> QueryOperation {
        if !(query.sortDescriptors != nil) {
            query.sortDescriptors = [RecordSortDescriptor(key: "creationDate", ascending: false)]
        }
        let operation = QueryOperation(query: query)
        operation.qualityOfService = .userInitiated
        operation.queuePriority = .veryHigh
        let results = Collected<[Record]>([])
        operation.recordFetchedBlock = { record in
            results.value.append(record)
        }
        operation.queryCompletionBlock = { cursor, error in
            self.handleCallback(error, errorHandler: errorHandler, completionHandler: {
                if completionHandler(results.value, cursor == nil) {
                    if cursor != nil {
                        self.queryRecords(cursor!, continueWithResults: results.value, completionHandler: completionHandler, errorHandler: errorHandler)
                    }
                }
            })
        }
        operation.resultsLimit = QueryOperationMaximumResults
        database.add(operation)
        return operation
    }

    @discardableResult
    private func queryRecords(
        _ cursor: QueryCursor, continueWithResults: [Record],
        completionHandler: @escaping (_ results: [Record], _ isFinished: Bool) -> Bool,
        errorHandler: ((_ error: Error) -> Void)? = nil
    ) -> QueryOperation {
        let results = Collected(continueWithResults)
        let operation = QueryOperation(cursor: cursor)
        operation.qualityOfService = .userInitiated
        operation.recordFetchedBlock = { record in
            results.value.append(record)
        }
        operation.queryCompletionBlock = { cursor, error in
            self.handleCallback(error, errorHandler: errorHandler, completionHandler: {
                if completionHandler(results.value, cursor == nil) {
                    if cursor != nil {
                        self.queryRecords(cursor!, continueWithResults: results.value, completionHandler: completionHandler, errorHandler: errorHandler)
                    }
                }
            })
        }
        operation.resultsLimit = QueryOperationMaximumResults
        database.add(operation)
        return operation
    }

    func handleCallback(_ error: Error?, errorHandler: ((_ error: Error) -> Void)? = nil, completionHandler: () -> Void) {
        if error != nil {
            if let handler = errorHandler {
                handler(error!)
            }
        } else {
            completionHandler()
        }
    }

    // open static func handleCloudKitErrorAs(_ error: Error?, retryAttempt: Double = 1) -> HandleCloudKitErrorAs {
    //     if error == nil { return .success }
    //     if let userInfo = error?._userInfo as? NSDictionary {
    //         if let retry = userInfo[CKErrorRetryAfterKey] as? NSNumber {
    //             return .retry(afterSeconds: Double(retry))
    //         }
    //     }
    //     let errorCode: CKError = CKError(_nsError: error! as NSError)
    //     switch errorCode.code { … }
    // }
    static func handleCloudKitErrorAs(_ error: Error?, retryAttempt: Double = 1) -> HandleCloudKitErrorAs {
        if error == nil {
            return .success
        }
        if let userInfo = error?._userInfo as? NSDictionary {
            if let retry = userInfo[ErrorRetryAfterKey] as? NSNumber {
                let seconds = Double(truncating: retry)
                return .retry(afterSeconds: seconds)
            }
        }
        let errorCode: StratusError = StratusError(_nsError: error! as NSError)
        switch errorCode.code {
        case .notAuthenticated, .networkUnavailable, .networkFailure, .serviceUnavailable, .requestRateLimited, .zoneBusy, .resultsTruncated:
            var seconds = Double(pow(2, Double(retryAttempt)))
            if seconds > 1800 {
                seconds = 1800
            }
            return .retry(afterSeconds: seconds)
        case .unknownItem, .invalidArguments, .incompatibleVersion, .badContainer, .missingEntitlement, .permissionFailure, .badDatabase,
            .assetFileNotFound, .operationCancelled, .assetFileModified, .batchRequestFailed, .zoneNotFound, .userDeletedZone,
            .internalError, .serverRejectedRequest, .constraintViolation:
            return .fail
        case .quotaExceeded, .limitExceeded:
            return .fail
        case .changeTokenExpired, .serverRecordChanged:
            return .recoverableError
        default:
            return .fail
        }
    }
}
