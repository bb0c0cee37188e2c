import Foundation

/// A pipeline stage that turns each batch of its producer into a batch of another type (or of
/// the same), for the stages after it: a typed hand-off.
///
/// The closure runs once per batch, on this operation's thread, while the producer goes on;
/// it may drop elements or make several of one. The stage needs no database: add it to any
/// queue. It is a ``RecordProducingOperation`` when it makes records, so that a
/// ``ModifyRecordsOperation`` or ``DeleteRecordsOperation`` can take its batches; any other
/// type goes to a ``ConsumeOperation`` or a further transform. A transform's closure is
/// `@Sendable`, as a consumer's is: under Swift 6 what they capture (the `mailer` below) must be
/// `Sendable` (see ``ConsumeOperation`` for a writer that is not).
///
/// ```swift
/// let orders = QueryOperation(query: try Query(recordType: "Order", format: "status == %@", "paid"))
/// orders.fetchAllResults = true
/// let invoices = TransformOperation(transforming: orders) { records in
///     records.map { Invoice(order: $0.recordID.recordName, total: $0["total"] as? Double ?? 0) }
/// }
/// let mail = ConsumeOperation(consuming: invoices) { batch in try mailer.send(batch) }
/// for stage in [orders, invoices, mail] as [DatabaseOperation] { database.add(stage) }   // the query needs a database
/// ```
public final class TransformOperation<Input: Sendable, Output: Sendable>: DatabaseOperation, ProducingOperation, @unchecked Sendable {
    public let pipelineOutput = PipelineOutput<Output>()
    /// Called with the stage's final result: success, `operationCancelled` (with what it did)
    /// or the error that stopped the pipeline.
    public var transformResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Set once, by the initializer.
    private var input: PipelineChannel<Input>?
    private let transform: @Sendable ([Input]) throws -> [Output]

    /// A stage that transforms each batch `producer` produces.
    ///
    /// - Parameter transform: called once per batch; what it throws fails the pipeline.
    public init<Producer: ProducingOperation>(
        transforming producer: Producer, _ transform: @escaping @Sendable ([Input]) throws -> [Output]
    ) where Producer.Element == Input {
        self.transform = transform
        super.init()
        input = attach(to: producer)
    }

    override var needsDatabase: Bool { false }

    override func executeStage() throws -> StratusError? {
        try runClosureStage("TransformOperation", input: input, output: pipelineOutput, transform)
    }

    override func complete(with error: StratusError?) {
        pipelineOutput.complete(with: error)
        transformResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}

extension TransformOperation: RecordProducingOperation where Output == Record {
    /// The records the stage makes.
    public var recordOutput: RecordOutput { pipelineOutput }
}
