import Foundation
import Synchronization

/// The base of every Stratus operation: an asynchronous `Operation` bound to a ``Database``.
///
/// Add an operation to its database with ``Database/add(_:)``, or set ``database`` and add it
/// to any `OperationQueue`; dependencies work across queues. Configure an operation before it
/// starts. Its blocks run one at a time on the operation's thread, the final block last.
/// Cancelling stops the work at the next item or batch boundary; the final block then reports
/// `operationCancelled`, and the per-item blocks have already reported what was done.
///
/// Each operation offers CloudKit's result blocks and, next to them, CloudKit's older blocks
/// (`recordFetchedBlock`, `queryCompletionBlock`, …) with their signatures; both may be set.
/// For each event the result block runs first, then the older one; per-item blocks run before
/// the final blocks. ``configuration`` and ``group`` behave as `CKOperation`'s.
///
/// It stands for both `CKOperation` and `CKDatabaseOperation`: code that takes a `CKOperation`
/// (to set its configuration or group) takes a `DatabaseOperation`, and `CKOperation.ID` and
/// `CKOperation.Configuration` are `DatabaseOperation.ID` and `DatabaseOperation.Configuration`.
///
/// ```swift
/// let fetch = FetchRecordsOperation(recordIDs: [id])
/// fetch.database = container.publicCloudDatabase
/// myQueue.addOperation(fetch)
/// ```
open class DatabaseOperation: Operation, @unchecked Sendable {
    // Operation is @unchecked Sendable in corelibs; the state below is guarded by `lock`, and
    // configuration properties are read once when the operation starts, as in CloudKit.

    /// The most records or changes one read of the store returns, whatever `resultsLimit` asks:
    /// as CloudKit's server, a fetch asking for more (`Int.max`) gets this many with
    /// `moreComing`, and the engines' `limit + 1` look-ahead cannot overflow.
    static let largestBatch = 100_000

    /// What one read of a change fetch asks the store for: `defaultLimit` for a `resultsLimit`
    /// of 0, at most ``largestBatch``.
    ///
    /// - Throws: `invalidArguments` naming `setting` for a negative limit.
    static func changeBatchSize(_ resultsLimit: Int, default defaultLimit: Int, setting: String) throws(StratusError) -> Int {
        guard resultsLimit >= 0 else {
            throw StratusError(.invalidArguments, "\(setting) is \(resultsLimit); it must be 0 (as many as a batch holds) or more")
        }
        return resultsLimit == 0 ? defaultLimit : min(resultsLimit, largestBatch)
    }

    /// The database the operation runs against. ``Database/add(_:)`` sets it.
    public var database: Database?

    /// How transient failures (a busy store) are retried. Defaults to the database's policy.
    public var retryPolicy: RetryPolicy?

    /// An operation's identifier, as `CKOperation.ID`: a string.
    ///
    /// ```swift
    /// var running: [DatabaseOperation.ID: DatabaseOperation] = [:]
    /// running[op.operationID] = op
    /// ```
    public typealias ID = String

    /// A unique identifier of the operation, as `CKOperation.operationID`.
    public let operationID: ID = UUID().uuidString

    /// Accepted for CloudKit code, never called: CloudKit calls it once its servers keep the
    /// operation for a later launch of the app, and Stratus keeps no operation beyond the
    /// process that runs it (see ``OperationConfiguration/isLongLived``).
    public var longLivedOperationWasPersistedBlock: (() -> Void)?

    private enum State { case pending, executing, finished }
    private let lock = NSLock()
    private var state = State.pending
    /// Whether ``main()`` did the work (guarded by `lock`).
    private var didRun = false
    /// Whether the operation was handed to a queue by ``Database/add(_:)`` or started (guarded
    /// by `lock`): a second `add` must not enqueue it again.
    private var wasSubmitted = false
    /// The error the final block reported (guarded by `lock`), for ``Database/run(_:)``.
    private var reportedError: StratusError?
    /// Called once the operation has finished (guarded by `lock`).
    private var finishObservers: [@Sendable () -> Void] = []

    /// Configuration, group and timeout state (see `DatabaseOperation+Configuration.swift`).
    let settings = Mutex(OperationSettings())

    /// The pipeline the operation is a stage of (see `DatabaseOperation+Pipeline.swift`).
    let pipelineMembership = Mutex(PipelineMembership())

    /// Stops the server statements the work runs when the operation is cancelled.
    let statementCancellation = StatementCancellation()

    public override init() { super.init() }

    public final override var isAsynchronous: Bool { true }
    public final override var isExecuting: Bool { lock.withLock { state == .executing } }
    public final override var isFinished: Bool { lock.withLock { state == .finished } }

    public final override func start() {
        let wasPending = lock.withLock { () -> Bool in
            guard state == .pending else { return false }
            wasSubmitted = true
            return true
        }
        precondition(wasPending, "\(type(of: self)) was started twice; an operation runs once")
        applyQualityOfService()
        // An operation the app put on a queue of its own is listed from here; one added to a
        // database was listed when it was added.
        if isLongLived, let runsOn = database ?? effectiveConfiguration.container?.privateCloudDatabase {
            LongLivedOperations.shared.register(self, on: runsOn)
        }
        transition(to: .executing, key: "isExecuting")
        // The work runs on a queue of its own, as CloudKit's operations run on theirs: an
        // `OperationQueue`'s threads on Linux are the dispatch threads Swift concurrency's
        // tasks run on (as many as the machine has cores), and two operations reading or
        // writing for seconds there would hold back every task of the process. A serial
        // queue gets a thread of its own while the shared ones are busy.
        DispatchQueue(label: "com.stratus.operation", qos: Self.dispatchQoS(qualityOfService)).async { [self] in
            main()
            // Also when a subclass's `main()` never reached the final block.
            LongLivedOperations.shared.remove(self)
            finish()
        }
    }

    /// Dispatch's class of service for an operation's quality of service.
    private static func dispatchQoS(_ quality: QualityOfService) -> DispatchQoS {
        switch quality {
        case .userInteractive: .userInteractive
        case .userInitiated: .userInitiated
        case .utility: .utility
        case .background: .background
        default: .default
        }
    }

    /// Marks the operation as handed to a queue; `false` when it was already added to a
    /// database, or has started or finished, so that adding it again leaves it where it is.
    func claimSubmission() -> Bool {
        lock.withLock {
            guard state == .pending, !wasSubmitted else { return false }
            wasSubmitted = true
            return true
        }
    }

    /// Whether the operation was added to a database or started, or has finished: something
    /// other than a new ``Database/run(_:)`` will run it or has run it.
    var isSubmittedOrDone: Bool { lock.withLock { wasSubmitted || state != .pending } }

    /// Does the operation's work and calls its blocks; ``start()`` calls it, and the operation
    /// finishes when it returns.
    ///
    /// As with CloudKit's operations, a subclass may override it to prepare the operation (set
    /// its blocks, its zones, its query) just before it runs, and then call `super.main()`:
    ///
    /// ```swift
    /// final class LoggingFetch: FetchRecordZoneChangesOperation, @unchecked Sendable {
    ///     override func main() {
    ///         recordChangedBlock = { record in print("changed", record.recordID.recordName) }
    ///         super.main()
    ///     }
    /// }
    /// ```
    ///
    /// The work runs once: a second call does nothing.
    open override func main() {
        let firstRun = lock.withLock { () -> Bool in
            guard state == .executing, !didRun else { return false }
            didRun = true
            return true
        }
        guard firstRun else { return }
        let (joined, producing) = pipelineMembership.withLock { ($0.pipeline, $0.output) }
        joined?.start(self)
        producing?.prepare(producer: self)
        var outcome: StratusError?
        let lateProducer = pipelineMembership.withLock { $0.attachedLateTo }
        if isCancelled {
            outcome = StratusError.cancelled(Pipeline.name(of: self), completed: 0)
        } else if let lateProducer {
            outcome = StratusError(.invalidArguments, "\(Pipeline.name(of: self)) was attached to its \(lateProducer) after that had started, so it would take only the batches sent after: make every consumer before adding its producer to a queue")
        } else if !needsDatabase {
            do {
                outcome = try executeStage()
            } catch {
                outcome = StratusError.wrap(error)
            }
        } else if let database = database ?? effectiveConfiguration.container?.privateCloudDatabase
                    ?? Container.defaultForOperations.withLock({ $0 })?.privateCloudDatabase {
            // Run through its configuration's container: that database is its own from here
            // (its retry policy, the client change tokens it keeps), as an added one's is.
            if self.database == nil { self.database = database }
            let timer = startResourceTimer()
            do {
                outcome = try statementCancellation.run { try execute(engine: database.engine, context: database.resolvedContext()) }
            } catch {
                outcome = StratusError.wrap(error)
            }
            timer?.cancel()
            outcome = outcome.map(timedOutError(for:))
        } else {
            outcome = StratusError(.invalidArguments, "\(type(of: self)) has no database: add it with database.add(_:), set its database property, or set configuration.container (an operation with none runs in the private database of Container.default(), CKContainer.default() under import CloudKit, once the program has asked for it)")
        }
        // A source with a checkpoint joins a pipeline of its own when it starts.
        let (pipeline, output) = pipelineMembership.withLock { ($0.pipeline, $0.output) }
        if let pipeline { outcome = pipeline.finish(self, outcome: outcome, output: output) }
        // Delisted before the final block runs: code the block wakes must not find the
        // operation still outstanding.
        LongLivedOperations.shared.remove(self)
        lock.withLock { reportedError = outcome }
        complete(with: outcome)
    }

    /// What the final block reported: `nil` for success (or for a subclass whose `main()` never
    /// reached it), once the operation has finished.
    var finalError: StratusError? { lock.withLock { reportedError } }

    /// Calls `body` once the operation has finished, after its final block (at once when it
    /// has finished already).
    func whenFinished(_ body: @escaping @Sendable () -> Void) {
        let finished = lock.withLock { () -> Bool in
            guard state != .finished else { return true }
            finishObservers.append(body)
            return false
        }
        if finished { body() }
    }

    /// Does the work. Returns the final error (`nil` for success). Subclasses override.
    func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        preconditionFailure("\(type(of: self)) must override execute(engine:context:)")
    }

    /// Calls the subclass's final block. Subclasses override.
    func complete(with error: StratusError?) {}

    /// Whether the operation needs a database: pipeline stages that only transform or hand
    /// batches to a closure do not, and run ``executeStage()`` instead.
    var needsDatabase: Bool { true }

    /// Whether the stage writes the store and records its pipeline's position in the same
    /// transactions (``PipelineCheckpoint``): a modify or delete stage.
    var recordsPipelinePositions: Bool { false }

    /// Does the work of a stage that needs no database. Such stages override.
    func executeStage() throws -> StratusError? {
        preconditionFailure("\(type(of: self)) must override executeStage()")
    }

    /// Cancels the operation and, when it is a stage of a pipeline, every stage of the
    /// pipeline: each stops at its next batch and reports what it did.
    public override func cancel() {
        super.cancel()
        // A statement waiting on the server (for another transaction's lock) stops now, and
        // its transaction writes nothing.
        statementCancellation.cancel()
        pipelineMembership.withLock { $0.pipeline }?.stop(cancelledBy: self)
    }

    private func finish() {
        willChangeValue(forKey: "isExecuting")
        willChangeValue(forKey: "isFinished")
        let observers = lock.withLock { () -> [@Sendable () -> Void] in
            state = .finished
            defer { finishObservers = [] }
            return finishObservers
        }
        didChangeValue(forKey: "isExecuting")
        didChangeValue(forKey: "isFinished")
        for observer in observers { observer() }
    }

    private func transition(to newState: State, key: String) {
        willChangeValue(forKey: key)
        lock.withLock { state = newState }
        didChangeValue(forKey: key)
    }

    // MARK: - Retrying

    /// Runs `body`, retrying transient failures as ``retryPolicy`` says; stops when cancelled.
    func withRetry<T>(_ body: () throws -> T) throws -> T {
        let policy = retryPolicy ?? database?.retryPolicy ?? RetryPolicy()
        let requestTimeout = effectiveConfiguration.timeoutIntervalForRequest
        let began = Date()
        var attempt = 1
        while true {
            do {
                return try body()
            } catch let error as StratusError where error.isTransient && attempt < policy.maximumAttempts && !isCancelled {
                let delay = policy.delay(beforeAttempt: attempt + 1, retryAfter: error.retryAfterSeconds)
                if Date().timeIntervalSince(began) + delay > requestTimeout {
                    throw Self.timeoutError("the store stayed busy beyond the request timeout (timeoutIntervalForRequest, \(requestTimeout) s) after \(attempt) attempt\(attempt == 1 ? "" : "s"): \(error.message)")
                }
                Thread.sleep(forTimeInterval: delay)
                attempt += 1
            } catch var error as StratusError where error.isTransient {
                // Cancelled while the store was busy: the work the caller gave up is not to be
                // retried, as a transient error's retryAfterSeconds would ask.
                if isCancelled {
                    throw StratusError(.operationCancelled, "\(type(of: self)) was cancelled while the store was busy (\(error.message)); the write it waited to make was not made")
                }
                error.message += " (after \(attempt) attempt\(attempt == 1 ? "" : "s"))"
                throw error
            }
        }
    }

    /// Reports per-item errors as CloudKit does: one `partialFailure` holding them all.
    static func partialFailure(_ errors: [Record.ID: StratusError], of total: Int) -> StratusError? {
        guard !errors.isEmpty else { return nil }
        return StratusError(.partialFailure, "\(errors.count) of \(total) item(s) failed", partialErrors: errors)
    }
}

/// How an operation retries transient failures: bounded attempts, exponential backoff with
/// jitter, and at least the `retryAfterSeconds` the store asked for.
///
/// ```swift
/// operation.retryPolicy = RetryPolicy(maximumAttempts: 6, initialDelay: 0.1)
/// ```
public struct RetryPolicy: Hashable, Sendable {
    /// Attempts in all, including the first. 1 means no retry.
    public var maximumAttempts: Int
    /// Delay before the second attempt, in seconds; doubled for each further attempt.
    public var initialDelay: Double
    /// The longest delay between attempts, in seconds.
    public var maximumDelay: Double

    /// A policy of `maximumAttempts` attempts in all (by default 5: the first and four
    /// retries), waiting `initialDelay` seconds before the second (by default 0.05), twice as
    /// long before each further one, and never more than `maximumDelay` seconds (by default 5);
    /// each wait is jittered to between half and all of that, and lasts at least what the
    /// store's `retryAfterSeconds` asks for.
    ///
    /// ```swift
    /// let noRetry = RetryPolicy(maximumAttempts: 1)
    /// ```
    ///
    /// - Precondition: `maximumAttempts` is at least 1 (a programmer error).
    public init(maximumAttempts: Int = 5, initialDelay: Double = 0.05, maximumDelay: Double = 5) {
        precondition(maximumAttempts >= 1, "RetryPolicy.maximumAttempts must be at least 1")
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// Seconds to wait before `attempt` (2 for the first retry).
    public func delay(beforeAttempt attempt: Int, retryAfter: Double?) -> Double {
        let exponential = min(maximumDelay, initialDelay * pow(2, Double(max(0, attempt - 2))))
        let jittered = exponential * Double.random(in: 0.5...1.0)
        return max(jittered, retryAfter ?? 0)
    }
}
