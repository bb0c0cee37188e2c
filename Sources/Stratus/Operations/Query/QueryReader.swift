import Foundation

/// Every match of a query, read a page at a time for a job that reads them all (a query with
/// ``QueryOperation/fetchAllResults``, ``Database/allRecords(matching:inZoneWith:desiredKeys:pageSize:)``),
/// and where it has got to.
///
/// A query of one zone, or over every zone of a database that has one zone, reads one snapshot
/// through the engine's stream. A query over several zones merges the zones' pages
/// (``ZoneWideQuery``); each page then reads the store anew.
final class QueryReader: @unchecked Sendable {
    // @unchecked: `lastPosition` is touched under `lock`; a reader is used by one caller at a time.
    let stream: any QueryStream
    private let lock = NSLock()
    private let mergedZones: ZoneWideQueryStream?
    /// The zone streamed, and for a query over every zone, where its zones stood at the start.
    private let streamedZone: (zoneID: RecordZone.ID, allZonesAtStart: ZoneWidePosition?)
    private var lastPosition: QueryPosition?

    private init(stream: any QueryStream, mergedZones: ZoneWideQueryStream?, streamedZone: (RecordZone.ID, ZoneWidePosition?), lastPosition: QueryPosition?) {
        self.stream = stream
        self.mergedZones = mergedZones
        self.streamedZone = streamedZone
        self.lastPosition = lastPosition
    }

    /// Opens a reader of `query` from `start`.
    static func open(_ query: CompiledQuery, from start: QueryOperation.Progress, engine: any StorageEngine, context: DatabaseContext) throws -> QueryReader {
        switch start {
        case .zone(let position):
            return QueryReader(stream: try engine.openQueryStream(query, in: context, after: position), mergedZones: nil,
                               streamedZone: (query.zoneID, nil), lastPosition: position)
        case .allZones(let position):
            let zones = try ZoneWideQuery.zones(engine: engine, context: context)
            if zones.count == 1, let only = zones.first, position.zones.allSatisfy({ $0.zoneID == only }) {
                let zone = position.zones.first
                // A zone named without a position has no more matches.
                let stream: any QueryStream = if let zone, zone.after == nil { FinishedQueryStream() } else {
                    try engine.openQueryStream(query.inZone(only, desiredKeys: query.desiredKeys), in: context, after: zone?.after)
                }
                return QueryReader(stream: stream, mergedZones: nil, streamedZone: (only, position), lastPosition: zone?.after)
            }
            let merged = ZoneWideQueryStream(ZoneWideQuery(query: query, engine: engine, context: context), after: position)
            return QueryReader(stream: merged, mergedZones: merged, streamedZone: (.default, nil), lastPosition: nil)
        }
    }

    /// The next records in order (at most `limit`); none after the last.
    func next(limit: Int) throws -> [Record] {
        let page = try stream.next(limit: limit)
        if let position = page.nextPosition { lock.withLock { lastPosition = position } }
        return page.records
    }

    /// Where the records read so far end.
    var progress: QueryOperation.Progress {
        if let mergedZones { return .allZones(mergedZones.position) }
        let position = lock.withLock { lastPosition }
        guard var zones = streamedZone.allZonesAtStart else { return .zone(position) }
        if let position {
            zones.set(streamedZone.zoneID, after: position)
            zones.lastRecordName = position.recordName
        }
        return .allZones(zones)
    }

    func close() { stream.close() }
}

/// The pages of a query over several zones as a ``QueryStream`` (see ``ZoneWideQuery``).
final class ZoneWideQueryStream: QueryStream, @unchecked Sendable {
    // @unchecked: `current` and `finished` are touched under `lock`.
    private let lock = NSLock()
    private let query: ZoneWideQuery
    private var current: ZoneWidePosition
    private var finished = false

    init(_ query: ZoneWideQuery, after position: ZoneWidePosition) {
        self.query = query
        current = position
    }

    /// Each zone's place after the records read so far.
    var position: ZoneWidePosition { lock.withLock { current } }

    func next(limit: Int) throws -> QueryPage {
        precondition(limit > 0, "QueryStream.next needs a positive limit")
        return try lock.withLock {
            guard !finished else { return QueryPage(records: [], nextPosition: nil) }
            let page = try query.next(after: current, limit: limit)
            current = page.position
            finished = !page.more
            return QueryPage(records: page.records, nextPosition: nil)
        }
    }

    func close() { lock.withLock { finished = true } }
}

/// The stream of a query that has no more matches.
private final class FinishedQueryStream: QueryStream {
    func next(limit: Int) throws -> QueryPage { QueryPage(records: [], nextPosition: nil) }
    func close() {}
}
