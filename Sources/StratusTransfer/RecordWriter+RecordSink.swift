import Stratus

/// A writer is the sink of a ``Stratus/RecordExporter``; finish it after the export.
///
/// ```swift
/// let writer = RecordWriter(format: .ndjson, output: .standardOutput)
/// _ = try await RecordExporter(database: database, query: query).run(into: writer)
/// try writer.finish()
/// ```
///
/// An exporter has the writer's encoding run on several threads, a page at a time, and the
/// bytes written in order: the same bytes as writing each record.
extension RecordWriter: RecordSink, RecordBatchSink {}
