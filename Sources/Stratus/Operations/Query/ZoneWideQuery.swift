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
/// A page reads up to `limit` records from each zone not yet finished, so a page costs what a
/// page of each zone costs; zones are listed again for every page, and a zone created after
/// the first page is read from its start.
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
    /// - Throws: what the store throws for any zone, except a zone deleted while it was read
    ///   (which has no more matches).
    func next(after position: ZoneWidePosition, limit: Int) throws -> (records: [Record], position: ZoneWidePosition, more: Bool) {
        precondition(limit > 0, "ZoneWideQuery.next needs a positive limit")
        let zones = try Self.zones(engine: engine, context: context)
        let known = Dictionary(position.zones.map { ($0.zoneID, $0.after) }, uniquingKeysWith: { first, _ in first })
        let readKeys = readingKeys
        var pages: [ZonePage] = []
        // The merge compares records of different zones; one zone's are in order already.
        let merges = zones.filter { zoneID in known[zoneID].map { $0 != nil } ?? true }.count > 1
        for zoneID in zones {
            let start = known[zoneID]
            // A zone named without a position has no more matches.
            if let start, start == nil { continue }
            let zoneQuery = query.inZone(zoneID, desiredKeys: readKeys)
            let page: QueryPage
            do {
                page = try engine.queryRecords(zoneQuery, in: context, after: start ?? nil, limit: limit)
            } catch let error as StratusError where error.code == .zoneNotFound {
                continue
            }
            pages.append(ZonePage(zoneID: zoneID, query: zoneQuery, start: start ?? nil, page: page, keys: merges ? page.records.map { sortKeys(of: $0, in: zoneQuery) } : []))
        }

        // A k-way merge: each zone's records are in the query's order already.
        var taken = [Int](repeating: 0, count: pages.count)
        var records: [Record] = []
        records.reserveCapacity(limit)
        while records.count < limit {
            var best: Int?
            for index in pages.indices where taken[index] < pages[index].page.records.count {
                guard let current = best else { best = index; continue }
                if precedes(pages[index], taken[index], pages[current], taken[current]) { best = index }
            }
            guard let best else { break }
            let record = pages[best].page.records[taken[best]]
            records.append(readKeys == query.desiredKeys ? record : record.restricted(to: query.desiredKeys))
            taken[best] += 1
        }

        var next = position
        next.lastRecordName = records.last?.recordID.recordName ?? position.lastRecordName
        var more = false
        for (index, zone) in pages.enumerated() {
            let consumed = taken[index], read = zone.page.records.count
            let after: QueryPosition?
            if consumed == read {
                // Read whole: the engine's own position, or none when the zone has no more.
                after = zone.page.nextPosition
            } else if consumed == 0 {
                more = true
                continue
            } else {
                after = try positionAfter(zone, consumed: consumed)
            }
            if after != nil { more = true }
            next.set(zone.zoneID, after: after)
        }
        return (records, next, more)
    }

    /// The keys each zone is asked for: the desired keys and the fields the merge sorts by.
    private var readingKeys: [String]? {
        guard var keys = query.desiredKeys else { return nil }
        for sortKey in query.sortKeys {
            if case .field(let name) = sortKey.key, !keys.contains(name) { keys.append(name) }
        }
        return keys
    }

    private struct ZonePage {
        let zoneID: RecordZone.ID
        let query: CompiledQuery
        let start: QueryPosition?
        let page: QueryPage
        /// Each record's position, its distances measured here (only the merge reads them).
        let keys: [QueryPosition]
    }

    private func sortKeys(of record: Record, in zoneQuery: CompiledQuery) -> QueryPosition {
        let distances = zoneQuery.sortKeys.map { sortKey -> Double? in
            guard let origin = sortKey.distanceFrom, case .field(let name) = sortKey.key,
                  case .location(let location)? = record.fieldValue(forKey: name) else { return nil }
            return Condition.distanceKilometres(from: origin, to: location)
        }
        return QueryPosition(of: record, in: zoneQuery, distances: distances)
    }

    /// Whether record `i` of zone page `a` comes before record `j` of `b` in the merged order.
    private func precedes(_ a: ZonePage, _ i: Int, _ b: ZonePage, _ j: Int) -> Bool {
        let left = a.keys[i], right = b.keys[j]
        for (index, sortKey) in query.sortKeys.enumerated() {
            let order = QueryRules.sortOrder(left.sortValues[index], right.sortValues[index])
            if order == .orderedSame { continue }
            return sortKey.ascending ? order == .orderedAscending : order == .orderedDescending
        }
        let names = QueryRules.compareScalars(left.recordName, right.recordName)
        if names != .orderedSame { return (query.sortKeys.last?.ascending ?? true) ? names == .orderedAscending : names == .orderedDescending }
        return Self.zoneOrder(a.zoneID, b.zoneID)
    }

    /// The engine's position after the first `consumed` records of a zone's page. A distance is
    /// the engine's to compare, so the zone is asked again for just those records; other sort
    /// values are the record's own.
    private func positionAfter(_ zone: ZonePage, consumed: Int) throws -> QueryPosition {
        if zone.query.sortKeys.contains(where: { $0.distanceFrom != nil }),
           let engines = try engine.queryRecords(zone.query, in: context, after: zone.start, limit: consumed).nextPosition {
            return engines
        }
        let last = zone.page.records[consumed - 1]
        return QueryPosition(sortValues: zone.keys[consumed - 1].sortValues, recordName: last.recordID.recordName)
    }
}

extension ZoneWidePosition {
    mutating func set(_ zoneID: RecordZone.ID, after: QueryPosition?) {
        let entry = Zone(zoneID: zoneID, after: after)
        if let index = zones.firstIndex(where: { $0.zoneID == zoneID }) {
            zones[index] = entry
        } else {
            let index = zones.firstIndex { ZoneWideQuery.zoneOrder(zoneID, $0.zoneID) } ?? zones.endIndex
            zones.insert(entry, at: index)
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
