import Foundation

/// A pipeline stage that hands each batch of its producer to a closure: the end of a pipeline
/// that writes somewhere other than the store (a file, a service, a report).
///
/// The closure runs once per batch, on this operation's thread, while the producer goes on.
/// The stage needs no database: add it to any queue.
///
/// ```swift
/// let events = QueryOperation(query: Query(recordType: "Event"))
/// events.fetchAllResults = true
/// let export = ConsumeOperation(consuming: events) { batch in try writer.write(batch) }
/// export.consumeResultBlock = { result in print("export:", result) }
/// database.add(events); exportQueue.addOperation(export)
/// ```
public final class ConsumeOperation<Input: Sendable>: DatabaseOperation, @unchecked Sendable {
    /// Called with the stage's final result: success, `operationCancelled` (with what it did)
    /// or the error that stopped the pipeline.
    public var consumeResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Set once, by the initializer.
    private var input: PipelineChannel<Input>?
    private let body: @Sendable ([Input]) throws -> Void

    /// A stage that hands each batch `producer` produces to `body`.
    ///
    /// - Parameter body: called once per batch; what it throws fails the pipeline.
    public init<Producer: ProducingOperation>(
        consuming producer: Producer, _ body: @escaping @Sendable ([Input]) throws -> Void
    ) where Producer.Element == Input {
        self.body = body
        super.init()
        input = attach(to: producer)
    }

    override var needsDatabase: Bool { false }

    override func executeStage() throws -> StratusError? {
        try runClosureStage("ConsumeOperation", input: input, output: nil as PipelineOutput<Input>?) { batch in
            try body(batch)
            return []
        }
    }

    override func complete(with error: StratusError?) {
        consumeResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}
