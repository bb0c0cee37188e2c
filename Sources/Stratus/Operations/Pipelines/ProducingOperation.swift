import Foundation

/// An operation whose results stream, batch by batch, to the operations that consume them: a
/// stage of a pipeline.
///
/// Consumers attach to a producer when they are made, and run at the same time as it, each on
/// the queue it was added to: ``ModifyRecordsOperation/init(savingRecordsFrom:transform:)``,
/// ``DeleteRecordsOperation/init(deletingRecordsFrom:where:)``,
/// ``TransformOperation/init(transforming:_:)`` (itself a producer, of any type) and
/// ``ConsumeOperation/init(consuming:_:)``. Batches go to every consumer as they are produced,
/// and the producer waits while a consumer holds ``PipelineOutput/maximumBatchesInFlight`` of
/// them, so memory stays bounded however many records the source reads. Cancelling any stage
/// cancels every stage of the pipeline; a stage that fails as a whole stops the others, and
/// each stage's final block reports what it did, the error, and the position reached
/// (``StratusError/pipelinePosition``).
///
/// ```swift
/// let query = QueryOperation(query: try Query(recordType: "Todo", format: "checked == %@", 0))
/// query.fetchAllResults = true                       // every page, not one
/// let markDone = ModifyRecordsOperation(savingRecordsFrom: query) { records in
///     records.forEach { $0["checked"] = 1 }          // called once per batch
///     return records
/// }
/// database.add(query)
/// markDone.database = database                       // an operation on a queue of your own needs one
/// otherQueue.addOperation(markDone)
/// ```
///
/// Every stage of a pipeline runs until the pipeline ends, so each needs a free slot on its
/// queue: ``Database/add(_:)`` runs stages on a queue of their own (up to
/// ``Database/maximumPipelineStages`` at once, beside the database's other operations); a queue
/// of your own needs room for all of a pipeline's stages on it. Attach every consumer before
/// the producer starts. A consumer that depends on its producer (`addDependency`) starts after it
/// finished and gets every batch then; the producer keeps them all in memory for it.
public protocol ProducingOperation<Element>: DatabaseOperation {
    /// What the operation produces.
    associatedtype Element: Sendable
    /// Where the operation's batches go.
    var pipelineOutput: PipelineOutput<Element> { get }
}

/// An operation that produces records: a query, a fetch, a change fetch, a file reader, a
/// save (the records as saved), or a transform to records. See ``ProducingOperation``.
///
/// ```swift
/// func purge(_ producer: some RecordProducingOperation) -> DeleteRecordsOperation {
///     DeleteRecordsOperation(deletingRecordsFrom: producer)
/// }
/// ```
public protocol RecordProducingOperation: ProducingOperation where Element == Record {
    /// Where the operation's records go.
    var recordOutput: RecordOutput { get }
}

extension RecordProducingOperation {
    /// The operation's ``recordOutput``.
    public var pipelineOutput: PipelineOutput<Record> { recordOutput }
}
