import Foundation

/// Where a query over every zone of a database stands: each zone read so far, with its own
/// keyset position (or that it has no more matches). A zone it does not name is read from its
/// start.
struct ZoneWidePosition: Hashable, Sendable, Codable {
    struct Zone: Hashable, Sendable, Codable {
        var zoneID: RecordZone.ID
        /// The last record returned from the zone; `nil` when it has no more matches.
        var after: QueryPosition?
    }

    /// In zone order (``ZoneWideQuery/zoneOrder(_:_:)``), so that equal positions print the same cursor.
    var zones: [Zone] = []
    /// The name of the last record returned, from whichever zone.
    var lastRecordName: String?

    /// Checks what came from outside the process (a deserialized cursor) before an engine sees it.
    func validate() throws {
        for zone in zones { try Naming.checkZoneName(zone.zoneID.zoneName) }
    }
}

/// A query over every zone of a database, as CloudKit runs a query whose zone is `nil`: each
/// zone is read in the query's order from its own keyset position, and the zones' pages are
/// merged into one order (the query's sort keys, then the record name, then the zone).
///
/// Above the engine line: an engine answers one zone at a time, as it does for every query.
/// A page reads a chunk of each zone not yet finished (see ``next(after:limit:)``); zones are
/// listed again for every page, a zone created after the first page is read from its start,
/// and a zone that had no more matches is not read again.
struct ZoneWideQuery {
    /// The query; its zone is a placeholder, replaced by each zone's.
    let query: CompiledQuery
    let engine: any StorageEngine
    let context: DatabaseContext

    /// The zones a query without a zone searches: every zone of the database (the shared
    /// database has no zone-wide queries, as in CloudKit).
    static func zones(engine: any StorageEngine, context: DatabaseContext) throws -> [RecordZone.ID] {
        var zones = try engine.fetchZones(in: context).map(\.zoneID)
        if !zones.contains(where: \.isDefault) { zones.append(.default) }
        return zones.sorted { zoneOrder($0, $1) }
    }

    /// The order of zones whose records tie on every sort key and on the record name.
    static func zoneOrder(_ a: RecordZone.ID, _ b: RecordZone.ID) -> Bool {
        let names = QueryRules.compareScalars(a.zoneName, b.zoneName)
        return names == .orderedSame ? QueryRules.compareScalars(a.ownerName, b.ownerName) == .orderedAscending : names == .orderedAscending
    }

    /// The next records (at most `limit`) after `position` in the merged order, the position
    /// after them, and whether more may follow.
    ///
    /// Each zone is read a chunk at a time (the page's share of the zones, at least
    /// ``smallestChunk``), and read again when the merge has taken all of its chunk, so a page
    /// reads about `limit` records plus a chunk per zone rather than `limit` per zone.
    ///
    /// - Throws: what the store throws for any zone, except a zone deleted while it was read
    ///   (which has no more matches).
    func next(after position: ZoneWidePosition, limit: Int) throws -> (records: [Record], position: ZoneWidePosition, more: Bool) {
        precondition(limit > 0, "ZoneWideQuery.next needs a positive limit")
        let known = Dictionary(position.zones.map { ($0.zoneID, $0.after) }, uniquingKeysWith: { first, _ in first })
        let readKeys = readingKeys
        // A field's declared type decides how its values sort (a value of another type as
        // missing), in the merge as in each zone's order.
        let sortsByField = query.sortKeys.contains { if case .field = $0.key { true } else { false } }
        let schema = sortsByField ? try engine.fetchRecordTypeSchema(query.recordType, storageContainer: context.storageContainer) : nil
        let readers = try Self.zones(engine: engine, context: context).compactMap { zoneID -> ZoneReader? in
            let start = known[zoneID]
            // A zone named without a position has no more matches.
            if let start, start == nil { return nil }
            return ZoneReader(zoneID: zoneID, query: query.inZone(zoneID, desiredKeys: readKeys), schema: schema, start: start ?? nil)
        }
        // The merge compares records of different zones; one zone's are in order already.
        let merges = readers.count > 1
        let chunk = merges ? min(limit, max(Self.smallestChunk, limit / readers.count + 1)) : limit

        var records: [Record] = []
        records.reserveCapacity(limit)
        while records.count < limit {
            var best: Int?
            for index in readers.indices {
                // Always a whole chunk, though fewer records may be needed: an engine prepares a
                // statement per limit, and preparing costs more than reading a few more rows.
                if readers[index].needsReading { try read(readers[index], limit: chunk, keyed: merges) }
                guard readers[index].hasRecord else { continue }
                guard let current = best else { best = index; continue }
                if precedes(readers[index], readers[current]) { best = index }
            }
            guard let best else { break }
            let record = readers[best].take()
            records.append(readKeys == query.desiredKeys ? record : record.restricted(to: query.desiredKeys))
        }

        var next = position
        // In zone order, which ``ZoneWidePosition/set(_:after:)`` keeps (a cursor is input).
        next.zones.sort { Self.zoneOrder($0.zoneID, $1.zoneID) }
        next.lastRecordName = records.last?.recordID.recordName ?? position.lastRecordName
        var more = false
        for reader in readers where reader.hasRead {
            guard let after = try positionAfterTaken(reader) else {
                more = more || reader.hasMore
                continue
            }
            if after != nil { more = true }
            next.set(reader.zoneID, after: after)
        }
        return (records, next, more)
    }

    /// The fewest records a zone is asked for at once when several zones are merged.
    static let smallestChunk = 16

    /// The keys each zone is asked for: the desired keys and the fields the merge sorts by.
    private var readingKeys: [String]? {
        guard var keys = query.desiredKeys else { return nil }
        for sortKey in query.sortKeys {
            if case .field(let name) = sortKey.key, !keys.contains(name) { keys.append(name) }
        }
        return keys
    }

    /// One zone's part of a page: the chunk read last, how much of it the merge took, and where
    /// the chunk starts and ends. A class: the merge compares readers for every record it takes,
    /// and copies of a struct cost a retain and a release of each field.
    private final class ZoneReader {
        let zoneID: RecordZone.ID
        let query: CompiledQuery
        let schema: RecordTypeSchema?
        /// Where the chunk starts: the zone's position before it.
        var chunkStart: QueryPosition?
        var chunk: [Record] = []
        /// Each record's position, its distances measured here (only a merge reads them).
        var keys: [QueryPosition] = []
        var taken = 0
        /// The engine's position after the chunk; `nil` when no more follow.
        var chunkEnd: QueryPosition?
        var hasRead = false
        var tookAny = false
        /// Deleted since the zones were listed.
        var isGone = false

        init(zoneID: RecordZone.ID, query: CompiledQuery, schema: RecordTypeSchema?, start: QueryPosition?) {
            self.zoneID = zoneID
            self.query = query
            self.schema = schema
            chunkStart = start
        }

        var hasRecord: Bool { taken < chunk.count }
        var hasMore: Bool { !isGone && (hasRecord || !hasRead || chunkEnd != nil) }
        var needsReading: Bool { !isGone && !hasRecord && (!hasRead || chunkEnd != nil) }

        func take() -> Record {
            defer { taken += 1; tookAny = true }
            return chunk[taken]
        }
    }

    private func read(_ reader: ZoneReader, limit: Int, keyed: Bool) throws {
        if reader.hasRead { reader.chunkStart = reader.chunkEnd }
        let page: QueryPage
        do {
            page = try engine.queryRecords(reader.query, in: context, after: reader.chunkStart, limit: limit)
        } catch let error as StratusError where error.code == .zoneNotFound {
            reader.isGone = true
            return
        }
        reader.chunk = page.records
        reader.keys = keyed ? page.records.map { sortKeys(of: $0, in: reader) } : []
        reader.taken = 0
        reader.chunkEnd = page.nextPosition
        reader.hasRead = true
    }

    private func sortKeys(of record: Record, in reader: ZoneReader) -> QueryPosition {
        let distances = reader.query.sortKeys.map { sortKey -> Double? in
            guard let origin = sortKey.distanceFrom, case .field(let name) = sortKey.key,
                  case .location(let location)? = record.fieldValue(forKey: name) else { return nil }
            return Condition.distanceKilometres(from: origin, to: location)
        }
        return QueryPosition(of: record, in: reader.query, distances: distances, schema: reader.schema)
    }

    /// Whether the next record of `a` comes before the next of `b` in the merged order.
    private func precedes(_ a: ZoneReader, _ b: ZoneReader) -> Bool {
        let left = a.keys[a.taken], right = b.keys[b.taken]
        for (index, sortKey) in query.sortKeys.enumerated() {
            let order = QueryRules.sortOrder(left.sortValues[index], right.sortValues[index])
            if order == .orderedSame { continue }
            return sortKey.ascending ? order == .orderedAscending : order == .orderedDescending
        }
        let names = QueryRules.compareScalars(left.recordName, right.recordName)
        if names != .orderedSame { return (query.sortKeys.last?.ascending ?? true) ? names == .orderedAscending : names == .orderedDescending }
        return Self.zoneOrder(a.zoneID, b.zoneID)
    }

    /// The zone's position after the records the merge took: `.some(nil)` when it has no more
    /// matches, `nil` when it stays where it was (nothing taken, more to read).
    private func positionAfterTaken(_ reader: ZoneReader) throws -> QueryPosition?? {
        if reader.isGone { return .some(nil) }
        if reader.taken == reader.chunk.count {
            // The chunk read whole: the engine's own position, or none when the zone has no more.
            return reader.tookAny || reader.chunkEnd == nil ? .some(reader.chunkEnd) : nil
        }
        if reader.taken == 0 { return reader.tookAny ? .some(reader.chunkStart) : nil }
        let last = reader.chunk[reader.taken - 1]
        // A distance is the engine's to compare, so the zone is asked again for just the records
        // taken; other sort values are the record's own. The answer counts only if it ends at
        // the same record (a write since could have moved the records in between): else the
        // distance measured here stands.
        if reader.query.sortKeys.contains(where: { $0.distanceFrom != nil }) {
            let again = try engine.queryRecords(reader.query, in: context, after: reader.chunkStart, limit: reader.taken)
            if again.records.count == reader.taken, again.records.last?.recordID == last.recordID, let engines = again.nextPosition {
                return .some(engines)
            }
        }
        let values = reader.keys.isEmpty ? QueryPosition(of: last, in: reader.query, distances: [], schema: reader.schema).sortValues : reader.keys[reader.taken - 1].sortValues
        return .some(QueryPosition(sortValues: values, recordName: last.recordID.recordName))
    }
}

extension ZoneWidePosition {
    /// Records where `zoneID` stands, keeping ``zones`` in zone order: found by halving, so
    /// that a read of every zone (which finishes them in that order, each an append) costs a
    /// logarithm per zone, not a pass over the zones before it.
    mutating func set(_ zoneID: RecordZone.ID, after: QueryPosition?) {
        let entry = Zone(zoneID: zoneID, after: after)
        if let last = zones.last, ZoneWideQuery.zoneOrder(last.zoneID, zoneID) {
            zones.append(entry)
            return
        }
        var low = 0, high = zones.count
        while low < high {
            let middle = (low + high) / 2
            if ZoneWideQuery.zoneOrder(zones[middle].zoneID, zoneID) { low = middle + 1 } else { high = middle }
        }
        if low < zones.count && zones[low].zoneID == zoneID {
            zones[low] = entry
        } else {
            zones.insert(entry, at: low)
        }
    }
}

extension CompiledQuery {
    /// The same query in another zone, returning `desiredKeys`.
    func inZone(_ zoneID: RecordZone.ID, desiredKeys: [String]?) -> CompiledQuery {
        var query = self
        query.zoneID = zoneID
        query.desiredKeys = desiredKeys
        return query
    }
}
