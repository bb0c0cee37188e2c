import Stratus
import StratusTransfer

/// A writer's sink that reports a record the output cannot hold (a value whose type differs
/// from its CSV column's, a non-finite number, an asset without a file) as bad data, exit 65,
/// rather than as a usage error: the command line was right, the data was not.
///
/// ```swift
/// _ = try await exporter.run(into: DataRefusingSink(writer))
/// ```
final class DataRefusingSink: RecordSink {
    let writer: RecordWriter

    init(_ writer: RecordWriter) { self.writer = writer }

    func write(_ record: Record) throws {
        do {
            try writer.write(record)
        } catch let error as StratusError where error.code == .invalidArguments {
            throw CommandFailure(.dataError, error.message)
        }
    }
}
