import Stratus

/// A writer is the sink of a ``Stratus/RecordExporter``; finish it after the export.
///
/// ```swift
/// let writer = RecordWriter(format: .ndjson, output: .standardOutput)
/// _ = try await RecordExporter(database: database, query: query).run(into: writer)
/// try writer.finish()
/// ```
extension RecordWriter: RecordSink {}
