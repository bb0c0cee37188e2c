import Stratus
import StratusTransfer

/// A writer's sink that reports a record the output cannot hold (a value whose type differs
/// from its CSV column's, a non-finite number, an asset without a file) as bad data, exit 65,
/// rather than as a usage error: the command line was right, the data was not.
///
/// ```swift
/// _ = try await exporter.run(into: DataRefusingSink(writer))
/// ```
///
/// The writer's batches pass through as they are, so that the export encodes on several threads.
final class DataRefusingSink: RecordBatchSink {
    let writer: RecordWriter

    init(_ writer: RecordWriter) { self.writer = writer }

    func write(_ record: Record) throws {
        try refusingBadData { try writer.write(record) }
    }

    func batchEncoder(first: Record) -> (any RecordBatchEncoder)? { writer.batchEncoder(first: first) }

    var encodesStoredRows: Bool { writer.encodesStoredRows }

    func write(_ batch: EncodedRecordBatch, records: Range<Int>) throws {
        try refusingBadData { try writer.write(batch, records: records) }
    }

    private func refusingBadData(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as StratusError where error.code == .invalidArguments {
            throw CommandFailure(.dataError, error.message)
        }
    }
}
