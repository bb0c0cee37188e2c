/// Where a ``RecordImporter`` reports each rejected input item, once, in input order.
///
/// The `stratus` tool's reject file is one; an array is another.
///
/// ```swift
/// final class Rejects: RecordRejectSink {
///     var all: [RecordRejection] = []
///     func reject(_ rejection: RecordRejection) throws { all.append(rejection) }
/// }
/// ```
public protocol RecordRejectSink: AnyObject {
    /// Takes one rejected item. Called on the importer's task, never concurrently.
    ///
    /// - Throws: when the rejection cannot be kept; the import stops with that error.
    func reject(_ rejection: RecordRejection) throws

    /// Called once a batch's rejects are reported, before the import records that it moved
    /// past them: a sink that buffers hands them on here, so that a job killed later does not
    /// lose them while its checkpoint says they are done. The default does nothing.
    ///
    /// - Throws: when the rejections cannot be kept; the import stops with that error.
    func flush() throws
}

extension RecordRejectSink {
    public func flush() throws {}
}
