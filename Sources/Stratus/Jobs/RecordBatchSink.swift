/// A ``RecordSink`` whose records can be encoded on other threads, several batches at once,
/// and then written in order: what lets ``RecordExporter`` keep more than one core encoding.
/// `StratusTransfer`'s `RecordWriter` is one. Writing a record through
/// ``RecordSink/write(_:)`` and writing it encoded give the same output, byte for byte.
///
/// ```swift
/// if let encoder = sink.batchEncoder(first: page[0]) {
///     let batch = EncodedRecordBatch()
///     encoder.encode(page[...], into: batch)           // on any thread
///     try sink.write(batch, records: 0..<page.count)   // on the export's task, in order
/// }
/// ```
package protocol RecordBatchSink: RecordSink {
    /// An encoder for the batches of an export whose first record is `first`, or nil when this
    /// sink must write each record itself, in order (its output has side effects beside the
    /// bytes, such as asset content written into a folder). Called on the export's task before
    /// anything of the export is written: a sink whose layout comes from the first record
    /// (CSV columns) settles it here.
    func batchEncoder(first: Record) -> (any RecordBatchEncoder)?

    /// Whether this sink's encoder writes stored rows without making their records
    /// (``RecordBatchEncoder/encode(_:count:into:)``): an export then reads its pages undecoded
    /// from the first, so that a row that fails fails where it stands, after the rows before it.
    var encodesStoredRows: Bool { get }

    /// Writes the records `records` of `batch` (made by this sink's encoder), on the export's
    /// task, after every batch before it.
    ///
    /// - Throws: the failure the encoder met at a record in `records`, after writing the
    ///   records before it; or what writing the output throws. No part of a failed record is
    ///   written.
    func write(_ batch: EncodedRecordBatch, records: Range<Int>) throws
}

/// Encodes records to bytes on any thread; made by ``RecordBatchSink/batchEncoder(first:)``.
package protocol RecordBatchEncoder: Sendable {
    /// Appends the records' bytes to `batch` (empty), one run per record, in order. Stops at
    /// the first record that cannot be encoded (``EncodedRecordBatch/failure``), writing
    /// nothing of it.
    func encode(_ records: ArraySlice<Record>, into batch: EncodedRecordBatch)

    /// Appends the bytes of the first `count` rows to `batch` (empty), as ``encode(_:into:)``
    /// would for their records; a row that cannot be decoded fails the batch there.
    func encode(_ rows: any StoredRecordRows, count: Int, into batch: EncodedRecordBatch)
}


/// Records encoded by a ``RecordBatchEncoder``: their bytes back to back, and where each
/// record's bytes end.
///
/// A class so that the bytes move from the encoding thread to the writing one without a copy;
/// `@unchecked Sendable` because one thread at a time touches it: the encoder until it
/// returns, then the writer.
package final class EncodedRecordBatch: @unchecked Sendable {
    /// The records' bytes.
    package var bytes: ByteOutput
    /// Where each encoded record's bytes end in ``bytes``; record `i` starts where `i - 1` ends.
    package private(set) var ends: [Int] = []
    /// The record that could not be encoded (its place in the batch) and why; the records
    /// after it were not encoded.
    package private(set) var failure: (index: Int, error: any Error)?

    /// An empty batch whose buffer holds `capacity` bytes before it grows.
    package init(capacity: Int = 64 << 10) {
        bytes = ByteOutput(capacity: capacity)
    }

    /// How many records were encoded (those before a failure).
    package var count: Int { ends.count }

    /// Marks the end of a record just appended to ``bytes``.
    package func endRecord() { ends.append(bytes.count) }

    /// Records the failure of the record at `index` (the next one), whose bytes were removed.
    package func fail(at index: Int, _ error: any Error) {
        precondition(index == ends.count && failure == nil, "a batch fails at its next record, once")
        failure = (index, error)
    }

    /// Where record `index`'s bytes start.
    package func start(of index: Int) -> Int { index == 0 ? 0 : ends[index - 1] }
}
