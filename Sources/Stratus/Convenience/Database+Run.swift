import Foundation
import Synchronization

/// Running several operations (a pipeline's stages) as one piece of work.
extension Database {
    /// Adds `operations` (the stages of a pipeline, or any operations) and waits until every
    /// one of them has finished and run its final block.
    ///
    /// Each operation's own blocks still run as they do with ``add(_:)``; this adds one answer
    /// for the whole: nothing when every operation succeeded, else the error that explains the
    /// outcome. Cancelling the calling task cancels every operation (a pipeline stops at its
    /// next batch).
    ///
    /// ```swift
    /// let query = QueryOperation(query: try Query(recordType: "Product", predicate: QueryPredicate(format: "discontinued == 0")))
    /// query.fetchAllResults = true
    /// let reprice = TransformOperation(transforming: query) { (products: [Record]) -> [Record] in
    ///     for product in products {
    ///         let price: Double = product["price"] ?? 0
    ///         product["price"] = price * 1.1
    ///     }
    ///     return products
    /// }
    /// let save = ModifyRecordsOperation(savingRecordsFrom: reprice)
    /// try await database.run([query, reprice, save])
    /// ```
    ///
    /// - Throws: `invalidArguments`, before anything runs, when a stage of a given operation's
    ///   pipeline is not among `operations` and was neither added to a database nor started
    ///   (the pipeline would wait for it forever); the error of the stage that stopped its pipeline (its failure, or
    ///   `operationCancelled` from the stage that was cancelled), with ``StratusError/pipelinePosition``
    ///   where a resumed run starts; else the first other error in the order given, an
    ///   `operationCancelled` after that, and a `partialFailure` (records a save stage could not
    ///   write, each with its own error) last.
    public func run(_ operations: [DatabaseOperation]) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                run(operations) { continuation.resume(with: $0) }
            }
        } onCancel: {
            for operation in operations { operation.cancel() }
        }
    }

    /// Adds `operations` and calls `completionHandler` once every one of them has finished and
    /// run its final block, with the error that explains the outcome (see ``run(_:)``).
    ///
    /// ```swift
    /// database.run([query, reprice, save]) { result in
    ///     if case .failure(let error) = result { print("stopped: \(error)") }
    /// }
    /// ```
    @preconcurrency public func run(_ operations: [DatabaseOperation], completionHandler: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        var seen = Set<ObjectIdentifier>()
        let distinct = operations.filter { seen.insert(ObjectIdentifier($0)).inserted }
        guard !distinct.isEmpty else { return completionHandler(.success(())) }
        if let (stage, given) = Self.stageLeftOut(of: distinct) {
            let message = "run: \(stage), a stage of the pipeline of the \(Pipeline.name(of: given)) given, is not among the "
                + "operations given and was not added to a database or started, so the pipeline would wait for it forever; "
                + "pass every stage of a pipeline (its producers, transforms and consumers) to run"
            return completionHandler(.failure(StratusError(.invalidArguments, message)))
        }
        let outstanding = Mutex(distinct.count)
        for operation in distinct {
            operation.whenFinished {
                let isLast = outstanding.withLock { count -> Bool in
                    count -= 1
                    return count == 0
                }
                guard isLast else { return }
                if let error = Self.explainingError(of: distinct) { completionHandler(.failure(error)) } else { completionHandler(.success(())) }
            }
        }
        for operation in distinct { add(operation) }
    }

    /// A stage of the pipeline of one of `operations` that is not among them and that nothing
    /// else runs (not added to a database, not started, not finished), with the operation
    /// whose pipeline it is in: its producer would wait for it, or its consumers for it, forever.
    /// A stage the app put on an `OperationQueue` of its own and that has not started yet is
    /// told from one left out by its `database`, which such a stage is given; a stage released
    /// before it ran is left out too.
    private static func stageLeftOut(of operations: [DatabaseOperation]) -> (String, DatabaseOperation)? {
        let given = Set(operations.map(ObjectIdentifier.init))
        for operation in operations {
            guard let pipeline = operation.pipeline else { continue }
            // A stage given a database of its own is the app's to run (on a queue of its own).
            if let missing = pipeline.stages.first(where: { !given.contains(ObjectIdentifier($0)) && !$0.isSubmittedOrDone && $0.database == nil }) {
                return (Pipeline.name(of: missing), operation)
            }
            if let released = pipeline.releasedStageName { return ("a \(released) released before it ran", operation) }
        }
        return nil
    }

    /// The one error that explains how `operations` ended, by the rules ``run(_:)`` documents.
    private static func explainingError(of operations: [DatabaseOperation]) -> StratusError? {
        let failed = operations.compactMap { operation in operation.finalError.map { (operation, $0) } }
        if let (_, error) = failed.first(where: { operation, _ in operation.pipeline?.stop?.stageID == ObjectIdentifier(operation) }) {
            return error
        }
        return failed.first { ![.operationCancelled, .partialFailure].contains($0.1.code) }?.1
            ?? failed.first { $0.1.code == .operationCancelled }?.1
            ?? failed.first?.1
    }
}

/// A stopped job's position, for starting the job over.
extension Database {
    /// Discards the position a stopped pipeline job keeps in the store (see
    /// ``PipelineCheckpoint``), so that its next run starts from the beginning instead of going
    /// on. Answers whether the store held a position for `job`.
    ///
    /// Call it while no run of the job is in progress: a running job records its position
    /// again with its next batch. A ``PipelineCheckpointStore`` of your own (a file) keeps a
    /// copy of the position: remove it too (``PipelineCheckpointStore/remove()``).
    ///
    /// ```swift
    /// if try await database.discardPipelinePosition(job: "reprice-2025-06") {
    ///     print("the next run reprices every product again")
    /// }
    /// ```
    ///
    /// - Throws: store errors; on PostgreSQL a role only discards the positions it saved.
    @discardableResult
    public func discardPipelinePosition(job: String) async throws -> Bool {
        try await engineCall { engine, _ in
            guard try engine.jobProgressText(job) != nil || engine.jobProgress(job) != nil else { return false }
            try engine.removeJobProgress(job)
            return true
        }
    }
}
