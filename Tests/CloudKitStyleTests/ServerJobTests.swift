import Foundation
import Stratus
import StratusTestSupport
import Testing

// A server-side job written against CloudKit's async/await API, ported mechanically: an
// operation group and configuration for the run, retries driven by CKError codes and
// retryAfterSeconds, a switch over every CKError code, and paging with query cursors.

enum JobError: Error { case gaveUp(StratusError.Code) }

struct NightlyCleanup {
    let database: Database

    /// How the job treats each CloudKit error code.
    static func disposition(of error: Error) -> String {
        guard let ckError = error as? StratusError else { return "fatal" }
        switch ckError.code {
        case .networkUnavailable, .networkFailure, .serviceUnavailable, .requestRateLimited, .zoneBusy,
             .serverResponseLost, .accountTemporarilyUnavailable:
            return "retry"
        case .partialFailure:
            return "per-item"
        case .serverRecordChanged:
            return "merge"
        case .unknownItem, .zoneNotFound, .userDeletedZone:
            return "skip"
        case .changeTokenExpired:
            return "reset"
        case .alreadyShared, .tooManyParticipants, .participantMayNeedVerification, .participantAlreadyInvited:
            return "sharing"
        case .internalError, .badContainer, .missingEntitlement, .notAuthenticated, .permissionFailure,
             .invalidArguments, .resultsTruncated, .serverRejectedRequest, .assetFileNotFound, .assetFileModified,
             .incompatibleVersion, .constraintViolation, .operationCancelled, .batchRequestFailed, .badDatabase,
             .quotaExceeded, .limitExceeded, .referenceViolation, .managedAccountRestricted, .assetNotAvailable:
            return "fatal"
        @unknown default:
            return "fatal"
        }
    }

    /// Runs `body`, retrying what CloudKit says to retry, after `retryAfterSeconds` if given.
    func withRetries<T>(_ attempts: Int = 3, _ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as StratusError where NightlyCleanup.disposition(of: error) == "retry" && attempt < attempts {
                attempt += 1
                try await Task.sleep(nanoseconds: UInt64((error.retryAfterSeconds ?? 0.01) * 1_000_000_000))
            }
        }
    }

    /// Deletes every finished task older than `cutoff`, page by page; returns how many.
    func run(olderThan cutoff: Date) async throws -> Int {
        let group = OperationGroup()
        group.name = "Nightly cleanup"
        group.expectedReceiveSize = .megabytes
        let configuration = Operation.Configuration()
        configuration.timeoutIntervalForRequest = 30
        configuration.qualityOfService = .utility

        return try await database.configuredWith(configuration: configuration, group: group) { database in
            let query = Query(recordType: "Task", predicate: try QueryPredicate(format: "done == %@ AND finishedAt < %@", 1, cutoff))
            query.sortDescriptors = [RecordSortDescriptor(key: "finishedAt", ascending: true)]
            var deleted = 0
            var page = try await self.withRetries { try await database.records(matching: query, resultsLimit: 2) }
            while true {
                let ids = page.matchResults.compactMap { id, result -> Record.ID? in (try? result.get()) != nil ? id : nil }
                if !ids.isEmpty {
                    let (_, deleteResults) = try await self.withRetries {
                        try await database.modifyRecords(saving: [], deleting: ids, savePolicy: .changedKeys, atomically: false)
                    }
                    deleted += deleteResults.values.filter { (try? $0.get()) != nil }.count
                }
                guard let cursor = page.queryCursor else { break }
                page = try await self.withRetries { try await database.records(continuingMatchFrom: cursor, resultsLimit: 2) }
            }
            return deleted
        }
    }
}

@Suite("A CloudKit server job, ported mechanically", .timeLimit(.minutes(30)))
struct ServerJobTests {
    @Test("the job pages with cursors inside configuredWith, deletes in batches, and classifies errors by code", arguments: TestEngine.all)
    func nightlyCleanup(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let now = Date()
            var records: [Record] = []
            for index in 0..<7 {
                let task = Record(recordType: "Task", recordID: Record.ID(recordName: "task-\(index)"))
                task["done"] = index < 5
                task["finishedAt"] = now.addingTimeInterval(Double(index - 10) * 86_400)
                records.append(task)
            }
            _ = try await database.modifyRecords(saving: records, deleting: [])
            let job = NightlyCleanup(database: database)
            #expect(try await job.run(olderThan: now) == 5)
            let left = try await database.records(matching: Query(recordType: "Task", predicate: QueryPredicate(value: true)))
            #expect(left.matchResults.map { $0.0.recordName }.sorted() == ["task-5", "task-6"])

            #expect(NightlyCleanup.disposition(of: StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 0.01])) == "retry")
            #expect(NightlyCleanup.disposition(of: StratusError(.participantAlreadyInvited)) == "sharing")
            #expect(NightlyCleanup.disposition(of: StratusError(.changeTokenExpired)) == "reset")
            let missing = await errorOf { try await database.record(for: Record.ID(recordName: "nope")) }
            #expect(NightlyCleanup.disposition(of: missing!) == "skip")
        }
    }

    @Test("a transient error is retried after retryAfterSeconds; the first non-transient one ends the job", arguments: TestEngine.all)
    func retries(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let job = NightlyCleanup(database: container.publicCloudDatabase)
            var calls = 0
            let answer = try await job.withRetries { () async throws -> Int in
                calls += 1
                if calls < 3 { throw StratusError(.requestRateLimited, userInfo: [ErrorRetryAfterKey: 0.001]) }
                return 42
            }
            #expect(answer == 42 && calls == 3)
            let fatal = await errorOf { try await job.withRetries { () async throws -> Int in throw StratusError(.quotaExceeded) } }
            #expect((fatal as? StratusError)?.code == .quotaExceeded)
        }
    }

    func errorOf<T>(_ body: () async throws -> T) async -> Error? {
        do {
            _ = try await body()
            return nil
        } catch {
            return error
        }
    }
}
