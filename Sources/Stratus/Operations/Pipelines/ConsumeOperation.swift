import Foundation

/// A pipeline stage that hands each batch of its producer to a closure: the end of a pipeline
/// that writes somewhere other than the store (a file, a service, a report).
///
/// The closure runs once per batch, on this operation's thread, while the producer goes on.
/// The stage needs no database: add it to any queue.
///
/// The closure is `@Sendable`: under Swift 6 it captures `Sendable` values only. A writer that
/// is not (`StratusTransfer`'s `RecordWriter`, a file handle of your own) goes in a class of
/// yours that is; the stage calls the closure one batch at a time, then its final block, so
/// nothing else touches the writer meanwhile:
///
/// ```swift
/// final class EventFile: @unchecked Sendable {       // used by one stage, one batch at a time
///     let writer: RecordWriter
///     init(_ writer: RecordWriter) { self.writer = writer }
///     func append(_ events: [Record]) throws { for event in events { try writer.write(event) } }
/// }
/// let file = EventFile(RecordWriter(format: .ndjson, output: handle))
/// let events = QueryOperation(query: Query(recordType: "Event"))
/// events.fetchAllResults = true
/// let export = ConsumeOperation(consuming: events) { batch in try file.append(batch) }
/// export.consumeResultBlock = { result in print("export:", result, (try? file.writer.finish()) != nil) }
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
