import Foundation
import Synchronization

/// The pipeline an operation is a stage of, and its output, once a consumer attached to it.
struct PipelineMembership: Sendable {
    var pipeline: Pipeline?
    var output: (any PipelineOutputEnd)?
    /// The producer this consumer attached to after it had started: it would get only the
    /// batches sent after, so it fails instead of reporting success over part of them.
    var attachedLateTo: String?
}

/// How stages take part in a pipeline: attaching to a producer, starting as a source, handing
/// batches on and completing them, and stopping.
extension DatabaseOperation {
    /// The pipeline the operation is a stage of, if any.
    var pipeline: Pipeline? { pipelineMembership.withLock { $0.pipeline } }

    /// Makes this operation a consumer of `producer`, in `producer`'s pipeline (made now when
    /// it has none). Called by the consumers' initializers.
    func attach<Producer: ProducingOperation>(to producer: Producer) -> PipelineChannel<Producer.Element> {
        precondition(producer !== self, "an operation cannot consume its own output")
        let late = producer.isExecuting || producer.isFinished ? Pipeline.name(of: producer) : nil
        let output = producer.pipelineOutput
        let pipeline = producer.pipelineMembership.withLock { membership -> Pipeline in
            membership.output = output
            if let pipeline = membership.pipeline { return pipeline }
            let pipeline = Pipeline()
            membership.pipeline = pipeline
            return pipeline
        }
        let joined = pipelineMembership.withLock { membership -> Bool in
            guard membership.pipeline == nil else { return false }
            membership.pipeline = pipeline
            membership.attachedLateTo = late
            return true
        }
        precondition(joined, "\(type(of: self)) takes the batches of one producer only")
        pipeline.connect(self, to: producer, through: output)
        return output.attach(consumer: self)
    }

    /// Starts a pipeline's source: a source with a checkpoint but no consumer gets a pipeline
    /// of its own, so that its position is kept. Answers where the source starts: after the
    /// position the store committed for the checkpoint's job, else after the checkpoint
    /// store's, else at the beginning (nil).
    ///
    /// - Throws: what the store or the checkpoint store throws, or `invalidArguments` for a
    ///   saved position that is not one.
    func beginSource(checkpoint: PipelineCheckpoint?, engine: any StorageEngine) throws -> PipelinePosition? {
        let pipeline = pipelineMembership.withLock { membership -> Pipeline? in
            if membership.pipeline == nil, checkpoint != nil { membership.pipeline = Pipeline() }
            return membership.pipeline
        }
        guard let pipeline else { return nil }
        pipeline.add(self)
        pipeline.start(self)
        var start: PipelinePosition?
        var failuresBefore = 0
        if let checkpoint {
            try Self.checkPositionRecording(of: pipeline, job: checkpoint.job, sourceEngine: engine)
            if let text = try withRetry({ try engine.jobProgressText(checkpoint.job) }) {
                do {
                    let progress = try PipelineJobProgress(text: text)
                    start = progress.position
                    failuresBefore = progress.failures
                } catch let error as StratusError {
                    throw StratusError(.invalidArguments, "the position the store keeps for the pipeline job '\(checkpoint.job)' cannot be read (\(error.message)); remove the job's checkpoint to start over")
                }
            } else if let entry = try checkpoint.store?.load(), entry.job == checkpoint.job {
                if entry.isRecordedInStore, let position = entry.position {
                    throw StratusError(.invalidArguments, "the checkpoint of pipeline job '\(checkpoint.job)' says its batches up to \(position) were written in the store, and this store holds no record of that job: the checkpoint was made with another store, or this store was put back from a copy made before the job. Name the store the checkpoint was made with, or remove the checkpoint to start over")
                }
                start = entry.position
            }
        }
        pipeline.begin(checkpoint: checkpoint, engine: engine, startPosition: start, failuresBefore: failuresBefore)
        return start
    }

    /// Refuses, before anything is read, a checkpointed pipeline whose position the store
    /// would not say exactly: one stage records it in its writes' transactions, and the source
    /// reads it from its own store. With two writing stages a resumed run would go on after
    /// whichever committed last (the other's batches skipped or done twice); with a writing
    /// stage on another store the source would never find it.
    private static func checkPositionRecording(of pipeline: Pipeline, job: String, sourceEngine: any StorageEngine) throws {
        let writers = pipeline.positionRecordingStages
        if writers.count > 1 {
            throw StratusError(.invalidArguments, "pipeline job '\(job)' keeps its position in the transactions of the stage that writes the store, and \(writers.count) stages write it (\(writers.map { String(describing: type(of: $0)) }.joined(separator: ", "))): a resumed run would go on after whichever committed last. Write in one stage (a transform can make what both write), or run a checkpointed pipeline for each")
        }
        guard let writer = writers.first, let database = writer.database else { return }
        let source = try? sourceEngine.storeIdentifier
        if database.engine !== sourceEngine, let source, let written = try? database.engine.storeIdentifier, written != source {
            throw StratusError(.invalidArguments, "pipeline job '\(job)' keeps its position in the store its \(String(describing: type(of: writer))) writes, which is not the store its source reads, where a resumed run looks for it: read and write one store in a checkpointed pipeline, or run it without a checkpoint")
        }
    }

    /// Hands batch `sequence` of a source to its consumers (waiting while one holds its
    /// maximum), or completes it when the source is the pipeline's only stage. Answers false
    /// when the pipeline stopped.
    ///
    /// - Throws: what the checkpoint store throws.
    func emit<Element>(_ elements: [Element], sequence: Int, position: PipelinePosition?, to output: PipelineOutput<Element>) throws -> Bool {
        guard let pipeline else { return true }
        pipeline.register(sequence: sequence, position: position)
        if output.hasConsumers {
            return output.send(PipelineBatch(elements: elements, sequence: sequence, position: position))
        }
        try pipeline.complete(sequence: sequence, by: self)
        return !pipeline.isStopped
    }

    /// A consumer is done with `batch`: hands its own batch for it on (or, as a last stage,
    /// completes it), then lets its producer send another. Answers false when the pipeline
    /// stopped.
    ///
    /// - Throws: what the checkpoint store throws.
    func finishBatch<Input, Output>(
        _ batch: PipelineBatch<Input>, from input: PipelineChannel<Input>, handingOn elements: [Output], to output: PipelineOutput<Output>?
    ) throws -> Bool {
        defer { input.acknowledge() }
        guard let pipeline else { return true }
        if let output, output.hasConsumers {
            return output.send(PipelineBatch(elements: elements, sequence: batch.sequence, position: batch.position))
        }
        try pipeline.complete(sequence: batch.sequence, by: self)
        return !pipeline.isStopped
    }

    /// A closure stage's run: each batch of `input` through `body`, whose elements go on to
    /// `output` (or complete the batch, for a last stage), until the input ends or the stage
    /// stops. What `body` throws fails the pipeline, saying how many elements `what` had done.
    func runClosureStage<Input, Output>(
        _ what: String, input: PipelineChannel<Input>?, output: PipelineOutput<Output>?, _ body: ([Input]) throws -> [Output]
    ) throws -> StratusError? {
        guard let input else { return nil }
        var done = 0
        while let batch = input.receive() {
            if shouldStop { break }
            let made: [Output]
            do { made = try body(batch.elements) } catch { throw StratusError.thrownByClosure(error, of: what, completed: done) }
            done += batch.elements.count
            guard try finishBatch(batch, from: input, handingOn: made, to: output) else { break }
        }
        return shouldStop ? stoppedError(what, completed: done) : nil
    }

    /// Whether the stage should stop: cancelled, or its pipeline stopped.
    var shouldStop: Bool { isCancelled || pipeline?.isStopped == true }

    /// The error a stage reports when it stopped before its input ended.
    func stoppedError(_ what: String, completed: Int) -> StratusError {
        pipeline?.stoppedError(what, completed: completed) ?? StratusError.cancelled(what, completed: completed)
    }

    /// The job and position a writing stage records in the transaction that writes `batch`:
    /// the pipeline's checkpoint job, when the source has positions.
    /// The recorded text counts the job's failures up to the batch, its own included.
    func jobProgress<Element>(for batch: PipelineBatch<Element>) -> JobProgressEntry? {
        guard let pipeline, let checkpoint = pipeline.checkpoint, let position = batch.position else { return nil }
        pipeline.recordsPositionInStore()
        let sequence = batch.sequence, stage = ObjectIdentifier(self)
        return JobProgressEntry(job: checkpoint.job, position: Int64(sequence + 1), text: position.serialized) { [pipeline] failures in
            PipelineJobProgress(position: position, failures: pipeline.failuresRecorded(by: stage, sequence: sequence, failures)).text
        }
    }
}

/// What a write records about a job in its own transaction: an importer's settled items, or a
/// pipeline's batches done and its source's position.
struct JobProgressEntry: Sendable {
    var job: String
    var position: Int64
    var text: String?
    /// The text to record instead of ``text``, given how many of the transaction's items
    /// failed: an import's count of rejects includes the store's rejects of the batch the
    /// record commits with.
    var textAfterFailures: (@Sendable (Int) -> String?)? = nil

    /// The entry of a transaction whose batch had `failures` more, found outside it (records
    /// refused before it was written, or by the batch's earlier transactions).
    func adding(_ failures: Int) -> JobProgressEntry {
        guard failures > 0, let after = textAfterFailures else { return self }
        var entry = self
        entry.textAfterFailures = { after(failures + $0) }
        return entry
    }
}
