import Foundation

/// Every match of a query, read in order from one snapshot of the store, a page at a time.
///
/// Jobs that read many pages (an export, ``Database/allRecords(matching:inZoneWith:desiredKeys:pageSize:)``)
/// read through a stream, so that records written while they read are neither seen twice nor
/// missed, and a sort no index serves is done once for the whole read rather than once per
/// page. An engine keeps the snapshot (and what it holds to keep it) until ``close()``.
///
/// A stream is used by one reader at a time, possibly from different threads in turn.
///
/// ```swift
/// let stream = try engine.openQueryStream(compiled, in: context, after: nil)
/// defer { stream.close() }
/// while case let page = try stream.next(limit: 1_000), !page.records.isEmpty { write(page.records) }
/// ```
@_spi(StratusEngine)
public protocol QueryStream: AnyObject, Sendable {
    /// The next records in order (at most `limit`), with the position of the last of them;
    /// no records when every match was read.
    func next(limit: Int) throws -> QueryPage

    /// Ends the snapshot and frees what the stream holds. Further calls of ``next(limit:)``
    /// answer no records; calling this again does nothing.
    func close()
}
