import Foundation

/// Tells the participants of an owner's shares that their shared database changed: a write in
/// the owner's zones fires, in the write's transaction, the database subscriptions that the
/// accepted participants of the zone's shares keep in their shared databases, as CloudKit's
/// `CKDatabaseSubscription` of the shared database fires when the owner (or another
/// participant) changes shared records.
///
/// A participant of a zone-wide share is told of every change of the zone; one of record
/// shares, of the saves of records in the hierarchies they reach (the root, the records whose
/// `parent` chain leads to it, and their share), of the deletions of records that were in
/// those hierarchies (the roots ``ShareHierarchyMoves`` found for them), and of records moving
/// into or out of their hierarchies. Only database subscriptions are fired: the shared database has no
/// query or zone subscriptions, as in CloudKit.
///
/// ```swift
/// let rows = try SharedDatabaseNotifier.rows(for: request, outcome, in: transaction, engine: engine, context: context)
/// try SubscriptionNotifier.append(ownersRows + rows, in: transaction)
/// ```
enum SharedDatabaseNotifier {
    /// The changes of one zone a request made.
    private struct ZoneChanges {
        var saved: [(name: String, recordType: String, parent: String?)] = []
        var deleted = false
    }

    /// The accepted participants of the zones whose shares `request` may change or delete (it
    /// saves a share, or deletes records, which may be a share or a share's root), read before
    /// it writes: a participant the write removes is told too (``rows(for:_:formerMembers:in:engine:context:)``).
    static func membersBefore(_ request: ModifyRequest, in transaction: any RecordWriteTransaction, context: DatabaseContext) throws -> [ShareIndexAcceptance] {
        guard context.storageScope == .private else { return [] }
        var zoneNames = Set<String>()
        for save in request.saves where save.record.recordType == Record.SystemType.share {
            if let zoneName = sharedZoneName(save.recordID.zoneID, context) { zoneNames.insert(zoneName) }
        }
        for id in request.recordIDsToDelete {
            if let zoneName = sharedZoneName(id.zoneID, context) { zoneNames.insert(zoneName) }
        }
        return try zoneNames.sorted().flatMap { try transaction.subscribedShareMembers(inZone: $0) }
    }

    /// Tells the accepted participants of the shares of deleted zones of the owner's (`context`)
    /// that their shared database lost them. Called in the deletion's transaction, where the
    /// zones' share index entries are still there (engines remove them after it).
    /// Answers the notification rows, for the caller to append with the transaction's others
    /// (``SubscriptionNotifier/append(_:in:)``).
    static func zonesDeleted(_ zoneIDs: [RecordZone.ID], in transaction: any RecordWriteTransaction, engine: any StorageEngine,
                             context: DatabaseContext) throws -> [NotificationRow] {
        guard context.storageScope == .private else { return [] }
        let zoneNames = Set(zoneIDs.compactMap { sharedZoneName($0, context) })
        let acceptances = try zoneNames.sorted().flatMap { try transaction.subscribedShareMembers(inZone: $0) }
        return try tell(Dictionary(grouping: acceptances, by: \.member), in: transaction, engine: engine, context: context) { notifier, theirs in
            for zoneName in Set(theirs.map(\.zoneName)).sorted() {
                notifier.changedEveryTypeOfSharedZone(RecordZone.ID(zoneName: zoneName, ownerName: context.storageOwner))
            }
        }
    }

    /// Fires the participants' subscriptions for what `outcome` says `request` wrote in the
    /// private database of `context` (an owner's, or a participant's write reaching it).
    /// `formerMembers`: ``membersBefore(_:in:context:)``, whose participants the write removed
    /// (or whose share it deleted) are told of the zone they lost.
    ///
    /// Answers the notification rows, for the caller to append with the transaction's others
    /// (``SubscriptionNotifier/append(_:in:)``).
    ///
    /// - Throws: store errors, which roll the transaction back.
    static func rows(for request: ModifyRequest, _ outcome: ModifyOutcome, formerMembers: [ShareIndexAcceptance] = [], in transaction: any RecordWriteTransaction,
                     engine: any StorageEngine, context: DatabaseContext) throws -> [NotificationRow] {
        guard context.storageScope == .private else { return [] }
        // The zones first (a request nearly always writes one), and their participants: a
        // write of a zone nobody shares, most writes, goes no further.
        var written = Set<String>()
        var lastZone: RecordZone.ID?
        func note(_ zoneID: RecordZone.ID) {
            // By identity: the items of a request share their zone's ID, and comparing by value
            // costs an import a per-record string comparison.
            if let lastZone, lastZone === zoneID { return }
            lastZone = zoneID
            if let zoneName = sharedZoneName(zoneID, context) { written.insert(zoneName) }
        }
        for (save, result) in zip(request.saves, outcome.saveResults) {
            if case .success(let (_, kind)) = result, kind != .unchanged { note(save.recordID.zoneID) }
        }
        let deleted = zip(request.recordIDsToDelete, outcome.deleteResults).compactMap { id, result in (try? result.get()) == true ? id : nil } + outcome.cascadeDeletedIDs
        for id in deleted { note(id.zoneID) }
        written.formUnion(outcome.hierarchyMovedRoots.keys)
        guard !written.isEmpty else { return [] }
        var acceptances: [ShareIndexAcceptance] = []
        for zoneName in written.sorted() { acceptances += try transaction.subscribedShareMembers(inZone: zoneName) }
        let lost = Set(formerMembers).subtracting(acceptances)
        guard !acceptances.isEmpty || !lost.isEmpty else { return [] }

        var zones: [String: ZoneChanges] = [:]
        let told = Set((acceptances + lost).map(\.zoneName))
        for (save, result) in zip(request.saves, outcome.saveResults) {
            guard case .success(let (_, kind)) = result, kind != .unchanged, let zoneName = sharedZoneName(save.recordID.zoneID, context), told.contains(zoneName) else { continue }
            zones[zoneName, default: ZoneChanges()].saved.append((save.recordID.recordName, save.record.recordType, save.parent?.recordID.recordName))
        }
        for id in deleted {
            guard let zoneName = sharedZoneName(id.zoneID, context), told.contains(zoneName) else { continue }
            zones[zoneName, default: ZoneChanges()].deleted = true
        }
        var roots = HierarchyRoots(transaction: transaction)
        return try tell(Dictionary(grouping: acceptances + lost, by: \.member), in: transaction, engine: engine, context: context) { notifier, theirs in
            for (zoneName, changes) in zones.sorted(by: { $0.key < $1.key }) {
                let shares = theirs.filter { $0.zoneName == zoneName }
                guard !shares.isEmpty else { continue }
                // The owner's name: as the participant names the zone, and as the transaction
                // finds it (a participant's write reaches the owner's rows by it too).
                let zoneID = RecordZone.ID(zoneName: zoneName, ownerName: context.storageOwner)
                // Deletions (their types not read) and a zone lost tell subscriptions of every type.
                // So do records that left or came into their hierarchies: deletions to them, or
                // changes, of types not read. In a zone shared record by record, a deletion tells
                // only the participants of the hierarchies its record was in.
                let moved = outcome.hierarchyMovedRoots[zoneName] ?? []
                // Roots not followed (a zone without record-level shares when it was written): every share.
                let deletedRoots = outcome.hierarchyDeletedRoots[zoneName]
                // A zone-wide share is known by its name; a record share whose root is not known
                // (restored apart from it) reaches no record.
                let deletionReaches = changes.deleted && shares.contains { share in
                    share.rootRecordName.map { deletedRoots?.contains($0) ?? true } ?? (share.shareRecordName == Share.zoneWideShareName)
                }
                if deletionReaches || shares.contains(where: lost.contains) || shares.contains(where: { $0.rootRecordName.map(moved.contains) ?? false }) {
                    notifier.changedEveryTypeOfSharedZone(zoneID)
                    continue
                }
                let wholeZone = shares.contains { $0.shareRecordName == Share.zoneWideShareName }
                let reached = Set(shares.compactMap(\.rootRecordName))
                let shareNames = Set(shares.map(\.shareRecordName))
                var told = Set<String>()
                for save in changes.saved where !told.contains(save.recordType) {
                    let visible = try wholeZone || shareNames.contains(save.name)
                        || roots.reaches(save.name, parent: save.parent, anyOf: reached, zoneID: zoneID)
                    if visible {
                        notifier.changedSharedZone(zoneID, recordType: save.recordType)
                        told.insert(save.recordType)
                    }
                }
            }
        }
    }

    /// Runs `note` with the acceptances of each participant (by user record name) who keeps
    /// database subscriptions in their shared database; answers the rows of what it noted.
    private static func tell(_ members: [String: [ShareIndexAcceptance]], in transaction: any RecordWriteTransaction, engine: any StorageEngine, context: DatabaseContext,
                             _ note: (inout SubscriptionNotifier, [ShareIndexAcceptance]) throws -> Void) throws -> [NotificationRow] {
        var rows: [NotificationRow] = []
        for (member, theirs) in members.sorted(by: { $0.key < $1.key }) {
            let shared = DatabaseContext(containerIdentifier: context.containerIdentifier, environment: context.environment, scope: .shared,
                                         userName: nil, userRecordName: member)
            guard let index = try SubscriptionIndexCache.index(of: shared, in: transaction, engine: engine), !index.changeEntries.isEmpty else { continue }
            var notifier = SubscriptionNotifier(index: index, context: shared, transaction: transaction)
            try note(&notifier, theirs)
            rows += try notifier.finishedRows(in: transaction)
        }
        return rows
    }

    /// The name of the zone `zoneID` when it is one of the owner's custom zones, which alone
    /// hold shares; `nil` otherwise.
    private static func sharedZoneName(_ zoneID: RecordZone.ID, _ context: DatabaseContext) -> String? {
        guard !zoneID.isDefault, context.storedZoneOwner(zoneID).isEmpty else { return nil }
        return zoneID.zoneName
    }

    /// Follows `parent` chains in the transaction's view of the owner's zone, remembering what it read.
    private struct HierarchyRoots {
        let transaction: any RecordWriteTransaction
        private var parents: [String: String?] = [:]

        init(transaction: any RecordWriteTransaction) {
            self.transaction = transaction
        }

        /// Whether the record `name` with `parent` is one of `roots` or below one.
        mutating func reaches(_ name: String, parent: String?, anyOf roots: Set<String>, zoneID: RecordZone.ID) throws -> Bool {
            guard !roots.isEmpty else { return false }
            var current = name
            var next = parent
            var seen: Set<String> = []
            while seen.count < SharedDatabaseAccess.maximumDepth, seen.insert(current).inserted {
                if roots.contains(current) { return true }
                guard let parentName = next else { return false }
                current = parentName
                if let known = parents[parentName] {
                    next = known
                } else {
                    next = try transaction.storedRecord(Record.ID(recordName: parentName, zoneID: zoneID))?.parent?.recordID.recordName
                    parents[parentName] = .some(next)
                }
            }
            return false
        }
    }
}
