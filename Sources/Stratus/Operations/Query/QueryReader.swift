import Foundation

/// Every match of a query, read a page at a time for a job that reads them all (a query with
/// ``QueryOperation/fetchAllResults``, ``Database/allRecords(matching:inZoneWith:desiredKeys:pageSize:)``),
/// and where it has got to.
///
/// A query of one zone reads one snapshot through the engine's stream. A query over every zone
/// reads the zones one after another (in zone order), each through its own stream and so from
/// its own snapshot, taken when the zone's turn comes: records a job writes into a zone it has
/// read are not read again, and one stream is open at a time. Records then come zone by zone,
/// each zone in the query's order (a page of ``QueryOperation`` merges the zones instead).
final class QueryReader: QueryStream, @unchecked Sendable {
    // @unchecked: the mutable state is touched under `lock`; a reader is used by one caller at a time.
    private let lock = NSLock()
    private let query: CompiledQuery
    private let engine: any StorageEngine
    private let context: DatabaseContext
    /// For a query over every zone: the zones still to read, in order, and where each stands.
    private var zonesLeft: ArraySlice<RecordZone.ID>
    private var zones: ZoneWidePosition?
    /// Where each zone a position names goes on from, looked up once per zone.
    private let starts: [RecordZone.ID: QueryPosition]
    private var current: (stream: any QueryStream, zoneID: RecordZone.ID, last: QueryPosition?)?
    private var closed = false

    private init(query: CompiledQuery, engine: any StorageEngine, context: DatabaseContext, zonesLeft: [RecordZone.ID], zones: ZoneWidePosition?) {
        self.query = query
        self.engine = engine
        self.context = context
        self.zonesLeft = zonesLeft[...]
        // In zone order, which ``ZoneWidePosition/set(_:after:)`` keeps (a cursor is input).
        self.zones = zones.map { var sorted = $0; sorted.zones.sort { ZoneWideQuery.zoneOrder($0.zoneID, $1.zoneID) }; return sorted }
        var starts: [RecordZone.ID: QueryPosition] = [:]
        for zone in zones?.zones ?? [] { if let after = zone.after { starts[zone.zoneID] = after } }
        self.starts = starts
    }

    /// Opens a reader of `query` from `start`; the first stream is opened here, so that what
    /// opening throws is thrown by this.
    static func open(_ query: CompiledQuery, from start: QueryOperation.Progress, engine: any StorageEngine, context: DatabaseContext) throws -> QueryReader {
        let reader: QueryReader
        switch start {
        case .zone(let position):
            reader = QueryReader(query: query, engine: engine, context: context, zonesLeft: [], zones: nil)
            reader.current = (try engine.openQueryStream(query, in: context, after: position), query.zoneID, position)
        case .allZones(let position):
            // A zone named without a position has no more matches.
            let finished = Set(position.zones.filter { $0.after == nil }.map(\.zoneID))
            let zones = try ZoneWideQuery.zones(engine: engine, context: context).filter { !finished.contains($0) }
            reader = QueryReader(query: query, engine: engine, context: context, zonesLeft: zones, zones: position)
            try reader.lock.withLock { try reader.openNextZone() }
        }
        return reader
    }

    /// Opens the stream of the next zone to read; none when every zone was read. Under `lock`.
    private func openNextZone() throws {
        while current == nil, !zonesLeft.isEmpty, var zones {
            let zoneID = zonesLeft.removeFirst()
            let start = starts[zoneID]
            do {
                current = (try engine.openQueryStream(query.inZone(zoneID, desiredKeys: query.desiredKeys), in: context, after: start), zoneID, start)
            } catch let error as StratusError where error.code == .zoneNotFound {
                // Deleted since the zones were listed: it holds nothing.
                zones.set(zoneID, after: nil)
                self.zones = zones
            }
        }
    }

    /// After the current zone's last page: the next zone's stream, from a snapshot of its own;
    /// false when no zone is left. A query of one zone keeps its stream, and with it its
    /// position, until closed. Under `lock`.
    private func advanceZone() throws -> Bool {
        guard zones != nil, let reading = current else { return false }
        reading.stream.close()
        current = nil
        zones?.set(reading.zoneID, after: nil)
        try openNextZone()
        return current != nil
    }

    /// The next records in order (at most `limit`); none after the last. The page's position
    /// is in ``progress``, not in the page.
    func next(limit: Int) throws -> QueryPage {
        try lock.withLock {
            while !closed, let reading = current {
                let page = try reading.stream.next(limit: limit)
                if !page.records.isEmpty {
                    current?.last = page.nextPosition ?? reading.last
                    if zones != nil { zones?.lastRecordName = page.records.last?.recordID.recordName }
                    return QueryPage(records: page.records, nextPosition: nil)
                }
                guard try advanceZone() else { break }
            }
            return QueryPage(records: [], nextPosition: nil)
        }
    }

    /// The next rows in order, not yet made into records (see ``QueryStream/nextUndecoded(limit:)``),
    /// so that a reader decodes on another thread; none after the last. ``progress`` does not
    /// follow these pages.
    func nextUndecoded(limit: Int) throws -> UndecodedQueryPage {
        try lock.withLock {
            while !closed, let reading = current {
                let page = try reading.stream.nextUndecoded(limit: limit)
                if page.count > 0 { return page }
                guard try advanceZone() else { break }
            }
            return UndecodedQueryPage(decoded: QueryPage(records: [], nextPosition: nil))
        }
    }

    /// Where the records read so far end.
    var progress: QueryOperation.Progress {
        lock.withLock {
            guard var zones else { return .zone(current?.last) }
            if let current, let last = current.last { zones.set(current.zoneID, after: last) }
            return .allZones(zones)
        }
    }

    func close() {
        lock.withLock {
            closed = true
            current?.stream.close()
            current = nil
        }
    }
}
