import Foundation

/// The shared database's view of a store: every call of a shared-database context is answered
/// from the zones and records other users share with its user (``SharedDatabaseAccess``),
/// read from and written to the owners' rows through contexts that name the owner
/// (``DatabaseContext/sharedOwner``). Operations run on it unchanged; no engine decides what
/// a participant reaches.
///
/// The shared database's own rows (its subscriptions, a job's progress) are the user's, as
/// before: those calls go to the store as they are.
///
/// ```swift
/// let shared = SharedDatabaseEngine(base: engine)
/// let zones = try shared.fetchZones(in: sharedContext)   // the zones shared with the user
/// ```
final class SharedDatabaseEngine: StorageEngine, Sendable {
    let base: any StorageEngine

    init(base: any StorageEngine) {
        self.base = base
    }

    private func access(_ context: DatabaseContext) throws -> SharedDatabaseAccess {
        try SharedDatabaseAccess(engine: base, context: context)
    }

    /// The owner's zone a shared zone ID names, or `zoneNotFound` as CloudKit answers for a
    /// zone the user does not reach (never shared, revoked, or deleted).
    private func zone(_ zoneID: RecordZone.ID, _ access: SharedDatabaseAccess, _ context: DatabaseContext) throws -> SharedDatabaseAccess.Zone {
        guard let zone = access.zone(zoneID) else { throw StratusError.zoneNotFound(zoneID, in: context) }
        return zone
    }

    /// `records` without those the user does not reach (a zone shared record by record).
    private func reached(_ records: [Record], in zone: SharedDatabaseAccess.Zone, _ access: inout SharedDatabaseAccess) throws -> [Record] {
        guard zone.zoneWide == nil else { return records }
        return try records.filter { try access.permission(for: $0, in: zone) != nil }
    }

    var storeIdentifier: String { get throws { try base.storeIdentifier } }
    var authenticatedUserName: String? { base.authenticatedUserName }
    var preferredImportBatchSize: Int { base.preferredImportBatchSize }

    // MARK: - Records

    func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record] {
        guard database.sharedOwner == nil else { return try base.fetchRecords(ids, in: database) }
        var access = try access(database)
        var found: [Record.ID: Record] = [:]
        for (zoneID, zoneIDs) in Dictionary(grouping: ids, by: \.zoneID) {
            guard let zone = access.zone(zoneID) else { continue }
            for (id, record) in try base.fetchRecords(zoneIDs, in: zone.context) where try access.permission(for: record, in: zone) != nil {
                found[id] = record
            }
        }
        return found
    }

    func deleteSelfSources(of id: Record.ID, in database: DatabaseContext) throws -> [String] {
        guard database.sharedOwner == nil else { return try base.deleteSelfSources(of: id, in: database) }
        guard let zone = try access(database).zone(id.zoneID) else { return [] }
        return try base.deleteSelfSources(of: id, in: zone.context)
    }

    func hasChildRecords(of id: Record.ID, in database: DatabaseContext) throws -> Bool {
        guard database.sharedOwner == nil else { return try base.hasChildRecords(of: id, in: database) }
        guard let zone = try access(database).zone(id.zoneID) else { return false }
        return try base.hasChildRecords(of: id, in: zone.context)
    }

    /// The shared database's own rows; record writes in shared zones go through
    /// ``apply(_:context:)``, which knows the owner of each item before a transaction opens.
    func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T {
        try base.writeRecords(in: database, body)
    }

    func assetContents(for database: DatabaseContext) -> any AssetContentStore {
        base.assetContents(for: database)
    }

    // MARK: - Queries

    func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage {
        guard database.sharedOwner == nil else { return try base.queryRecords(query, in: database, after: position, limit: limit) }
        var access = try access(database)
        let zone = try zone(query.zoneID, access, database)
        var page = try base.queryRecords(query, in: zone.context, after: position, limit: limit)
        page.records = try reached(page.records, in: zone, &access)
        return page
    }

    func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream {
        guard database.sharedOwner == nil else { return try base.openQueryStream(query, in: database, after: position) }
        let access = try access(database)
        let zone = try zone(query.zoneID, access, database)
        let stream = try base.openQueryStream(query, in: zone.context, after: position)
        guard zone.zoneWide == nil else { return stream }
        return ReachedQueryStream(stream: stream, access: access, zone: zone)
    }

    func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int {
        guard database.sharedOwner == nil else { return try base.countRecords(query, in: database) }
        let access = try access(database)
        let zone = try zone(query.zoneID, access, database)
        guard zone.zoneWide == nil else { return try base.countRecords(query, in: zone.context) }
        let stream = ReachedQueryStream(stream: try base.openQueryStream(query, in: zone.context, after: nil), access: access, zone: zone)
        defer { stream.close() }
        var count = 0
        while true {
            let page = try stream.next(limit: 400)
            count += page.records.count
            if page.nextPosition == nil { return count }
        }
    }

    func explainQuery(_ query: CompiledQuery, in database: DatabaseContext) throws -> QueryPlan {
        guard database.sharedOwner == nil else { return try base.explainQuery(query, in: database) }
        return try base.explainQuery(query, in: zone(query.zoneID, access(database), database).context)
    }

    func countRecordsByType(in database: DatabaseContext, zoneID: RecordZone.ID) throws -> [String: Int] {
        guard database.sharedOwner == nil else { return try base.countRecordsByType(in: database, zoneID: zoneID) }
        let zone = try zone(zoneID, access(database), database)
        guard zone.zoneWide != nil else {
            throw StratusError(.invalidArguments, "zone '\(zoneID.zoneName)' is shared with you record by record; counts by type are answered for zones shared as a whole", zoneID: zoneID)
        }
        return try base.countRecordsByType(in: zone.context, zoneID: zoneID)
    }

    // MARK: - Zones and changes

    func fetchZones(in database: DatabaseContext) throws -> [RecordZone] {
        guard database.sharedOwner == nil else { return try base.fetchZones(in: database) }
        return try sharedZones(access(database), wanted: nil)
    }

    func fetchZones(_ zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> [RecordZone] {
        guard database.sharedOwner == nil else { return try base.fetchZones(zoneIDs, in: database) }
        return try sharedZones(access(database), wanted: Set(zoneIDs))
    }

    /// The zones the user reaches (those of `wanted`), as stored, named by their owners.
    private func sharedZones(_ access: SharedDatabaseAccess, wanted: Set<RecordZone.ID>?) throws -> [RecordZone] {
        try access.zones.values.sorted { ($0.zoneID.ownerName, $0.zoneID.zoneName) < ($1.zoneID.ownerName, $1.zoneID.zoneName) }.compactMap { zone in
            guard wanted?.contains(zone.zoneID) ?? true, let stored = try base.fetchZones([zone.zoneID], in: zone.context).first else { return nil }
            return RecordZone(zoneID: zone.zoneID, capabilities: stored.capabilities)
        }
    }

    /// In the user's shared database a zone is not created, and deleting one leaves it
    /// (``leaveZone(_:_:context:)``); the owner's zone and records stay.
    func modifyZones(
        saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext,
        notify: (_ outcome: ZoneModifyOutcome, _ transaction: any RecordWriteTransaction) throws -> Void
    ) throws -> ZoneModifyOutcome {
        guard database.sharedOwner == nil, database.scope == .shared else {
            return try base.modifyZones(saving: zones, deleting: zoneIDs, in: database, notify: notify)
        }
        var outcome = ZoneModifyOutcome()
        for zone in zones {
            do throws(StratusError) {
                try ZoneRules.checkModifiable(zone.zoneID, database)
                outcome.saveResults[zone.zoneID] = .failure(StratusError(.invalidArguments, "zone '\(zone.zoneID.zoneName)' cannot be created in the shared database", zoneID: zone.zoneID))
            } catch {
                outcome.saveResults[zone.zoneID] = .failure(error)
            }
        }
        guard !zoneIDs.isEmpty else { return outcome }
        var access = try access(database)
        for zoneID in zoneIDs {
            // Each share is left in a transaction of its own: a transient failure is retried
            // here, for this zone, since a retry of the whole request would find the zones
            // already left unreachable and answer zoneNotFound for them.
            var attempts = 0
            while true {
                do {
                    try leaveZone(zoneID, access, context: database)
                    outcome.deleteResults[zoneID] = .success(())
                } catch let error as StratusError where error.isTransient && attempts < 3 {
                    attempts += 1
                    access = try self.access(database)
                    // Left already, all its shares: what the failed attempt did before it failed.
                    if access.zone(zoneID) == nil { outcome.deleteResults[zoneID] = .success(()) } else { continue }
                } catch let error as StratusError {
                    outcome.deleteResults[zoneID] = .failure(error)
                }
                break
            }
        }
        return outcome
    }

    func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch {
        guard database.sharedOwner == nil else { return try base.fetchZoneChanges(request, in: database) }
        var access = try access(database)
        let zone = try zone(request.zoneID, access, database)
        var asked = request
        asked.includesHierarchyMoves = zone.zoneWide == nil
        var batch = try base.fetchZoneChanges(asked, in: zone.context)
        guard zone.zoneWide == nil else { return batch }
        // A deletion passes when its tombstone names a hierarchy of theirs (a deleted record's
        // hierarchy cannot be read any more). One deleted before the zone was shared record by
        // record names none; one whose hierarchies are unknown (a tombstone older than the
        // engine's roots, a deletion with raw SQL) passes.
        let shared = Set(zone.roots.keys)
        batch.changes = try batch.changes.filter { change in
            switch change {
            case .changed(let record): return try access.permission(for: record, in: zone) != nil
            case .deleted(let id, _): return batch.deletedRecordRoots[id.recordName].map { !$0.isDisjoint(with: shared) } ?? true
            }
        }
        try resolveHierarchyMoves(&batch, desiredKeys: request.desiredKeys, fromStart: request.position == nil, access: &access, zone: zone)
        return batch
    }

    /// Hands a participant of record-level shares the records that moved (``HierarchyMove``):
    /// one in a hierarchy they reach now as changed (it, or a record above it, came in), one
    /// that left a hierarchy of theirs as deleted, as CloudKit's zone changes report them;
    /// others' moves not at all. Each record stays once in the batch. Read `fromStart` (no
    /// token: a device with nothing), a record that left is not reported at all.
    private func resolveHierarchyMoves(_ batch: inout ZoneChangeBatch, desiredKeys: [String]?, fromStart: Bool, access: inout SharedDatabaseAccess,
                                       zone: SharedDatabaseAccess.Zone) throws {
        guard !batch.hierarchyMoves.isEmpty else { return }
        defer { batch.hierarchyMoves = [] }
        // A record the batch holds already is as the participant should have it: changed ones
        // passed the filter (they reach it), and a tombstone wins over a move.
        var named = Set(batch.changes.map { change in
            switch change {
            case .changed(let record): record.recordID.recordName
            case .deleted(let id, _): id.recordName
            }
        })
        let moves = batch.hierarchyMoves.filter { !named.contains($0.recordID.recordName) }
        let stored = moves.isEmpty ? [:] : try base.fetchRecords(moves.map(\.recordID), in: zone.context)
        for move in moves where named.insert(move.recordID.recordName).inserted {
            if let record = stored[move.recordID], try access.permission(for: record, in: zone) != nil {
                batch.changes.append(.changed(record.restricted(to: desiredKeys)))
            } else if !fromStart, !move.leftRoots.isDisjoint(with: zone.roots.keys) {
                batch.changes.append(.deleted(Record.ID(recordName: move.recordID.recordName, zoneID: zone.zoneID), recordType: move.recordType))
            }
        }
    }

    /// The shared database's changes: every zone the user reaches, as changed (a client then
    /// asks each zone for its changes since its own token, which answers only what is new), and
    /// the zones it reached at `position` and reaches no more, as deleted. The position holds
    /// the zones reached, so that a revoked share is reported as CloudKit reports it.
    func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch {
        guard database.sharedOwner == nil else { return try base.fetchDatabaseChanges(after: position, limit: limit, in: database) }
        let reached = try sharedZones(access(database), wanted: nil).map(\.zoneID)
        let before = position.map { Self.zones(inPosition: $0) } ?? []
        let now = Set(reached)
        var changes = reached.map { DatabaseChangeBatch.Change.zoneChanged($0) }
        changes += before.filter { !now.contains($0) }.sorted { ($0.ownerName, $0.zoneName) < ($1.ownerName, $1.zoneName) }.map { .zoneDeleted($0) }
        return DatabaseChangeBatch(changes: changes, position: Self.position(holding: reached), moreComing: false)
    }

    private static let positionPrefix = "shared:"

    private static func position(holding zones: [RecordZone.ID]) -> ChangePosition {
        let pairs = zones.map { [$0.ownerName, $0.zoneName] }
        let text = (try? JSONEncoder().encode(pairs)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        return ChangePosition(incarnation: positionPrefix + text, sequence: 0)
    }

    private static func zones(inPosition position: ChangePosition) -> [RecordZone.ID] {
        guard position.incarnation.hasPrefix(positionPrefix),
              let pairs = try? JSONDecoder().decode([[String]].self, from: Data(position.incarnation.dropFirst(positionPrefix.count).utf8)) else { return [] }
        return pairs.compactMap { $0.count == 2 ? RecordZone.ID(zoneName: $0[1], ownerName: $0[0]) : nil }
    }

    func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction {
        try base.compactChangeHistory(in: database, deletedBefore: cutoff)
    }

    // MARK: - What the store keeps beside databases

    func fetchSchema(storageContainer: String) throws -> ContainerSchema { try base.fetchSchema(storageContainer: storageContainer) }

    func fetchRecordTypeSchema(_ recordType: String, storageContainer: String) throws -> RecordTypeSchema? {
        try base.fetchRecordTypeSchema(recordType, storageContainer: storageContainer)
    }

    func modifySchema<T>(storageContainer: String, _ body: (inout ContainerSchema) throws -> T) throws -> T {
        try base.modifySchema(storageContainer: storageContainer, body)
    }

    func modifySchema<T>(storageContainer: String, comparedWith other: String, _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        try base.modifySchema(storageContainer: storageContainer, comparedWith: other, body)
    }

    func resetEnvironment(storageContainer: String, toSchemaOf schemaSource: String) throws {
        try base.resetEnvironment(storageContainer: storageContainer, toSchemaOf: schemaSource)
    }

    func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry] {
        try base.fetchUserDirectory(containerIdentifier: containerIdentifier, logins: logins)
    }

    func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try base.modifyUserDirectory(containerIdentifier: containerIdentifier, saving: entries, deletingLogins: logins)
    }

    func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? {
        try base.indexedShare(token: token, storageContainer: storageContainer)
    }

    func indexedShares(acceptedBy member: String, storageContainer: String) throws -> [ShareIndexEntry] {
        try base.indexedShares(acceptedBy: member, storageContainer: storageContainer)
    }

    func jobProgress(_ job: String) throws -> Int64? { try base.jobProgress(job) }
    func jobProgressText(_ job: String) throws -> String? { try base.jobProgressText(job) }
    func removeJobProgress(_ job: String) throws { try base.removeJobProgress(job) }
    func inventory() throws -> StoreInventory { try base.inventory() }
    func checkIntegrity() throws -> [String] { try base.checkIntegrity() }

    func fetchSubscriptions(in database: DatabaseContext, subscriber: String?) throws -> SubscriptionSet {
        try base.fetchSubscriptions(in: database, subscriber: subscriber)
    }

    func modifySubscriptions(saving subscriptions: [StoredSubscription], deleting subscriptionIDs: [String], in database: DatabaseContext) throws -> Set<String> {
        try base.modifySubscriptions(saving: subscriptions, deleting: subscriptionIDs, in: database)
    }

    func fetchNotifications(in feed: NotificationFeedID, after position: ChangePosition?, limit: Int) throws -> NotificationBatch {
        try base.fetchNotifications(in: feed, after: position, limit: limit)
    }

    func notificationFeedEnd(_ feed: NotificationFeedID) throws -> ChangePosition { try base.notificationFeedEnd(feed) }

    func markNotificationsRead(_ marks: [NotificationReadMark], in feed: NotificationFeedID) throws -> Set<Int64> {
        try base.markNotificationsRead(marks, in: feed)
    }

    func compactNotifications(createdBefore cutoff: Date) throws -> Int { try base.compactNotifications(createdBefore: cutoff) }

    func openNotificationWaiter(for feed: NotificationFeedID) throws -> any NotificationWaiter { try base.openNotificationWaiter(for: feed) }

    func checkWriteAccess(in database: DatabaseContext) throws { try base.checkWriteAccess(in: database) }
}

/// A query stream of a zone shared record by record: only the records the user reaches.
private final class ReachedQueryStream: QueryStream, @unchecked Sendable {
    // `@unchecked Sendable`: a stream is read by one reader at a time, as every QueryStream.
    private let stream: any QueryStream
    private var access: SharedDatabaseAccess
    private let zone: SharedDatabaseAccess.Zone

    init(stream: any QueryStream, access: SharedDatabaseAccess, zone: SharedDatabaseAccess.Zone) {
        self.stream = stream
        self.access = access
        self.zone = zone
    }

    func next(limit: Int) throws -> QueryPage {
        var page = try stream.next(limit: limit)
        page.records = try page.records.filter { try access.permission(for: $0, in: zone) != nil }
        return page
    }

    func close() { stream.close() }
}
