/// Where a ``RecordExporter`` writes the records it reads, in query order.
///
/// `StratusTransfer`'s `RecordWriter` is one (record JSON and CSV); the caller finishes the
/// sink after the export.
///
/// ```swift
/// final class Names: RecordSink {
///     var names: [String] = []
///     func write(_ record: Record) throws { names.append(record.recordID.recordName) }
/// }
/// ```
public protocol RecordSink: AnyObject {
    /// Takes one record. Called on the exporter's task, never concurrently.
    ///
    /// - Throws: when the record cannot be written; the export stops with that error.
    func write(_ record: Record) throws
}
