import Foundation

/// One of a container's databases (public, private or shared), like `CKDatabase`.
///
/// Every call of the convenience API runs an operation on the database's queue; add your own
/// operations with ``add(_:)``.
///
/// ```swift
/// let database = container.privateCloudDatabase
/// let note = try await database.record(for: Record.ID(recordName: "note-1"))
/// ```
public final class Database: Sendable {
    /// Which database of a container.
    ///
    /// It prints as its case's name (`"\(scope)"` is `private`) but, as `CKDatabase.Scope`, is
    /// neither `CustomStringConvertible` nor `Codable`: apps make it so themselves
    /// (`extension CKDatabase.Scope: CustomStringConvertible`, `…: Codable`), and their
    /// `description` must be the one their logs print.
    ///
    /// ```swift
    /// let notes = container.database(with: .private)
    /// ```
    public enum Scope: Int, Hashable, Sendable {
        /// Everyone's records.
        case `public` = 1
        /// The current user's own records; other users never see them.
        case `private` = 2
        /// Zones other users share with the current user.
        case shared = 3

        /// The name Stratus writes for the scope in its files (`public`, `private`, `shared`),
        /// which an app's own `description` of the scope does not change.
        package var name: String {
            switch self {
            case .public: "public"
            case .private: "private"
            case .shared: "shared"
            }
        }
    }

    @_spi(StratusEngine) public let engine: any StorageEngine
    /// The database's container, environment and scope, with the user's derived record name
    /// (operations run in ``resolvedContext()``, which reads the user directory).
    @_spi(StratusEngine) public let context: DatabaseContext
    /// The queue ``add(_:)`` and the convenience API use.
    public let operationQueue: OperationQueue
    /// Where ``add(_:)`` puts the stages of a pipeline: they run at once, each waiting for the
    /// others' batches, so a queue of ``maximumConcurrentOperations`` would hang a pipeline of
    /// more stages, and a pipeline of as many would hold back every other operation.
    let pipelineQueue: OperationQueue
    /// The retry policy for operations that set none.
    public let retryPolicy: RetryPolicy

    /// Operations of one database that run at once on its queue.
    public static let maximumConcurrentOperations = 4

    /// Pipeline stages of one database that run at once, all of its pipelines together
    /// (``add(_:)`` gives them a queue of their own): more than the pipelines a program runs at
    /// once compose. A stage is put there when it is added, so create a pipeline's consumers
    /// before adding its producer.
    public static let maximumPipelineStages = 64

    /// Who the database's operations act as; `nil`: ``context`` as it is.
    let user: ContainerUser?
    /// Why no operation of a database without a user can run: the administrator's database of
    /// a container opened with an identifier CloudKit refuses.
    let refusal: StratusError?

    /// What `configuredWith(configuration:group:body:)` gives the
    /// operations this database runs.
    let operationConfiguration: OperationConfiguration?
    let operationGroup: OperationGroup?

    /// A database that acts exactly as `context` says (its user record name and roles; no user
    /// directory is read).
    @_spi(StratusEngine) public convenience init(engine: any StorageEngine, context: DatabaseContext, retryPolicy: RetryPolicy = RetryPolicy()) {
        self.init(engine: engine, context: context, user: nil, retryPolicy: retryPolicy)
    }

    init(engine: any StorageEngine, context: DatabaseContext, user: ContainerUser?, retryPolicy: RetryPolicy, refusal: StratusError? = nil) {
        // The shared database reaches what others share with its user, decided in the core.
        self.engine = context.scope == .shared && !(engine is SharedDatabaseEngine) ? SharedDatabaseEngine(base: engine) : engine
        self.context = context
        self.user = user
        self.refusal = refusal
        self.retryPolicy = retryPolicy
        let queue = OperationQueue()
        queue.name = "stratus.\(context.containerIdentifier).\(context.scope.name)"
        queue.maxConcurrentOperationCount = Database.maximumConcurrentOperations
        self.operationQueue = queue
        let pipelineQueue = OperationQueue()
        pipelineQueue.name = queue.name.map { $0 + ".pipelines" }
        pipelineQueue.maxConcurrentOperationCount = Database.maximumPipelineStages
        self.pipelineQueue = pipelineQueue
        self.operationConfiguration = nil
        self.operationGroup = nil
    }

    /// The same database (and queue), giving its operations a configuration and a group.
    init(_ database: Database, configuration: OperationConfiguration?, group: OperationGroup?) {
        self.engine = database.engine
        self.context = database.context
        self.user = database.user
        self.refusal = database.refusal
        self.retryPolicy = database.retryPolicy
        self.operationQueue = database.operationQueue
        self.pipelineQueue = database.pipelineQueue
        self.operationConfiguration = (configuration?.copy() as? OperationConfiguration) ?? database.operationConfiguration
        self.operationGroup = group ?? database.operationGroup
    }

    /// Which of the container's databases this is: public, private or shared.
    ///
    /// ```swift
    /// if database.databaseScope == .public { print("every user sees these records") }
    /// ```
    public var databaseScope: Scope { context.scope }

    /// The context operations run in: ``context`` with the user's record name and roles from
    /// the container's user directory (read once per container).
    ///
    /// - Throws: `notAuthenticated` for the private and shared databases of a container with no
    ///   user; store errors.
    @_spi(StratusEngine) public func resolvedContext() throws -> DatabaseContext {
        if let refusal { throw refusal }
        if let user { return try user.context(for: context, engine: engine) }
        if context.userRecordName == nil && context.scope != .public {
            throw StratusError(.notAuthenticated, "the \(context.scope.name) database needs a signed-in user")
        }
        return context
    }

    /// Runs an operation against this database on its queue.
    ///
    /// ```swift
    /// database.add(FetchRecordsOperation(recordIDs: ids))
    /// ```
    ///
    /// An operation that was already added to a database, or has started or finished, is left
    /// as it is: it is not enqueued again (Foundation traps on that) and keeps its database.
    /// This is what CloudKit code resuming its long-lived operations does with an operation
    /// ``Container/fetchLongLivedOperation(withID:completionHandler:)`` answers:
    ///
    /// ```swift
    /// container.fetchLongLivedOperation(withID: id) { operation, _ in
    ///     guard let modify = operation as? ModifyRecordsOperation else { return }
    ///     modify.modifyRecordsCompletionBlock = { _, _, error in print(error ?? "resumed") }
    ///     database.add(modify)   // already on its way: it calls the block when it finishes
    /// }
    /// ```
    ///
    /// A long-lived operation (``OperationConfiguration/isLongLived``) is listed by
    /// ``Container/fetchAllLongLivedOperationIDs(completionHandler:)`` from here until its final
    /// blocks have run.
    ///
    /// - Precondition: the operation is not waiting on an `OperationQueue` of the app's own
    ///   (Foundation traps when an operation is enqueued twice, as Apple's does).
    public func add(_ operation: DatabaseOperation) {
        // Re-adding an operation on its way must neither enqueue it twice nor move it.
        guard operation.claimSubmission() else { return }
        operation.database = self
        if operationConfiguration != nil || operationGroup != nil {
            operation.adopt(configuration: operationConfiguration, group: operationGroup)
        } else {
            // Set through `configuration.qualityOfService` (a class the setter never saw).
            operation.applyQualityOfService()
        }
        // Listed before it is enqueued, so it can never finish before it is listed.
        if operation.isLongLived { LongLivedOperations.shared.register(operation, on: self) }
        // A stage that waits for another's batches must not wait for a slot that one holds.
        (operation.pipeline == nil ? operationQueue : pipelineQueue).addOperation(operation)
    }

    /// Runs a blocking engine call on a thread of its own, not on the cooperative pool, for the
    /// few calls that are no operation (a store's inventory, a job's progress).
    /// Checks, writing nothing, that the store would take this database's record writes at
    /// all: for a dry run, which should fail where the real run would rather than call its
    /// input valid. ``RecordImporter``, ``RecordUpdater`` and ``RecordDeleter`` ask it before a
    /// dry run. Whether each record may be written (security roles, row-level security) is
    /// still the write's to say.
    ///
    /// ```swift
    /// try await database.checkWriteAccess()   // then simulate the job
    /// ```
    ///
    /// - Throws: ``StratusError`` `permissionFailure` saying what access is missing (an SQLite
    ///   file or folder this process may not write, a PostgreSQL role without INSERT and
    ///   UPDATE on the records table), `serviceUnavailable` for a PostgreSQL standby; the
    ///   message begins "the real run would fail".
    public func checkWriteAccess() async throws {
        do {
            try await engineCall { engine, context in try engine.checkWriteAccess(in: context) }
        } catch let error as StratusError {
            var error = error
            error.message = "the real run would fail, so the dry run does too: " + error.message
            throw error
        }
    }

    func engineCall<T: Sendable>(_ body: @escaping @Sendable (any StorageEngine, DatabaseContext) throws -> T) async throws -> T {
        // A container opened with an identifier or user CloudKit refuses reaches no engine.
        if let refusal = user?.refusal ?? refusal { throw refusal }
        let (engine, context) = (self.engine, self.context)
        return try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body(engine, context) }) }.start()
        }
    }
}
