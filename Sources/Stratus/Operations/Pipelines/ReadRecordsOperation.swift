import Foundation

/// A pipeline source that reads records from a ``RecordSource`` (a file through
/// `StratusTransfer`'s `RecordReader`, or a source of your own) and hands them on in batches.
///
/// Its position is the number of input items read, so that with a ``checkpoint`` a resumed
/// read skips what a completed batch held: give it the same input. Items that are not records
/// go to ``rejectedItemBlock`` (rejected input) and ``deletionReadBlock`` (deletions, as a
/// change export holds them); they are not handed on.
///
/// ```swift
/// let read = ReadRecordsOperation(source: try RecordReader(fileHandle: input, options: RecordReadOptions()))
/// read.rejectedItemBlock = { rejection in print(rejection) }
/// let save = ModifyRecordsOperation(savingRecordsFrom: read)
/// save.savePolicy = .allKeys
/// database.add(read); database.add(save)
/// ```
public final class ReadRecordsOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    // @unchecked: the source is read only on the operation's thread, while it runs.
    /// Where the operation hands the records read to the stages of a pipeline
    /// (``RecordProducingOperation``), batch by batch as they are made.
    ///
    /// ```swift
    /// let save = ModifyRecordsOperation(savingRecordsFrom: reader)
    /// ```
    public let recordOutput = RecordOutput()
    /// Input items per batch.
    ///
    /// - Precondition: positive (a programmer error).
    public var batchSize = ModifyRecordsOperation.maximumItemsPerBatch
    /// Where a pipeline with this source keeps its position (see ``PipelineCheckpoint``); the
    /// operation then needs a database, whose store keeps the position.
    public var checkpoint: PipelineCheckpoint?
    /// Each input item that is not a valid record, in input order.
    public var rejectedItemBlock: ((RecordRejection) -> Void)?
    /// Each deletion the input holds, with its record type when known.
    public var deletionReadBlock: ((Record.ID, String?) -> Void)?
    /// Called with the final result: success, `operationCancelled`, or what the source threw
    /// (with ``StratusError/completedItemCount``, the items read).
    public var readRecordsResultBlock: ((Result<Void, any Error>) -> Void)?

    private let source: any RecordSource

    /// A source that reads `source` to its end.
    public init(source: any RecordSource) {
        self.source = source
        super.init()
    }

    override var needsDatabase: Bool { checkpoint != nil }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        try read(skipping: try beginSource(checkpoint: checkpoint, engine: engine))
    }

    override func executeStage() throws -> StratusError? { try read(skipping: nil) }

    private func read(skipping start: PipelinePosition?) throws -> StratusError? {
        if batchSize <= 0 {
            return StratusError(.invalidArguments, "ReadRecordsOperation.batchSize is \(batchSize); it must be 1 or more")
        }
        var skip = 0
        if let start {
            guard case .items(let count) = start else {
                return StratusError(.invalidArguments, "the checkpoint of job '\(checkpoint?.job ?? "")' holds \(start), not a count of input items; use another job name, or remove the checkpoint to start over")
            }
            skip = count
        }
        var consumed = 0
        var batch: [Record] = []
        var batchItems = 0
        var sequence = 0
        func handOn() throws -> Bool {
            defer {
                batch = []
                batchItems = 0
                sequence += 1
            }
            return try emit(batch, sequence: sequence, position: .items(consumed), to: recordOutput)
        }
        while true {
            if shouldStop { return stoppedError("ReadRecordsOperation", completed: consumed) }
            let item: RecordSourceItem?
            do {
                item = try source.nextItem()
            } catch {
                // What was read before is handed on first, so that the failure's position is past it.
                if batchItems > 0 { _ = try handOn() }
                var failure = StratusError.wrap(error)
                failure.completedItemCount = consumed
                return failure
            }
            guard let item else { break }
            consumed += 1
            if consumed <= skip { continue }
            switch item {
            case .record(let record, _): batch.append(record)
            case .deletion(let id, let recordType, _): deletionReadBlock?(id, recordType)
            case .rejected(let rejection): rejectedItemBlock?(rejection)
            }
            batchItems += 1
            if batchItems >= batchSize, !(try handOn()) {
                return stoppedError("ReadRecordsOperation", completed: consumed)
            }
        }
        if batchItems > 0, !(try handOn()) { return stoppedError("ReadRecordsOperation", completed: consumed) }
        if shouldStop { return stoppedError("ReadRecordsOperation", completed: consumed) }
        return nil
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        readRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}
