import Foundation
import Synchronization

/// Copies a whole store into another, the job behind `stratus copy`: every container's record
/// type schemas, every database of every owner, every zone with its capabilities, and every
/// record with its system fields, change tag and assets, between any two engines (SQLite and
/// PostgreSQL either way, or SQLite to SQLite).
///
/// Records are written as forced replaces that keep the system fields they carry, so each
/// record arrives with the creation and modification dates, users and change tag it has in
/// the source. Zones are copied in ``ZoneKey`` order, each read type by type, each type from
/// one snapshot, in record-name order. With a ``CheckpointStore`` the copy saves how far it got
/// as it goes (see ``checkpointInterval``) and goes on from there when run again after a
/// crash, a kill or ``cancel()``: it copies the zones it had not reached and every zone the
/// destination lacks (also one the source gained behind its place in the order), and does not
/// read again the zones it had copied, nor delete from the destination a zone the source no
/// longer holds (``compare()`` names both). Without one, it only copies into a destination that
/// holds no records. ``compare()`` then checks, zone by zone,
/// that both stores hold the same number of records and the same checksum over each record's
/// name, type, change tag, parent and field values (assets by their content).
///
/// ```swift
/// let copier = StoreCopier(from: try SQLiteEngine(path: "app.sqlite"), to: try PostgresEngine(url: "postgresql://db1/app"))
/// let summary = try await copier.run()
/// let differing = try await copier.compare().filter { !$0.matches }
/// print("copied \(summary.recordsCopied) records; \(differing.count) zones differ")
/// ```
public final class StoreCopier: Sendable {
    /// One zone of one database of one container, as the source's inventory names it.
    ///
    /// Keys are ordered as a copy goes through zones: by container, environment, scope, owner,
    /// zone name and zone owner, names by their UTF-8 bytes.
    public struct ZoneKey: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
        /// The container the zone belongs to.
        public var containerIdentifier: String
        /// The container's environment whose data holds the zone.
        public var environment: Container.Environment
        /// Which of the container's databases holds the zone.
        public var scope: Database.Scope {
            get { codedScope.scope }
            set { codedScope = Database.Scope.Coded(newValue) }
        }
        private var codedScope: Database.Scope.Coded
        /// The user record name of the user whose private or shared database holds the zone;
        /// empty for the public one.
        public var owner: String
        /// The zone's name.
        public var zoneName: String
        /// The zone's owner as its ID names it (`__defaultOwner__` for the database's own user).
        public var zoneOwnerName: String

        /// The key of `zone` in a database of the inventory.
        ///
        /// ```swift
        /// let key = StoreCopier.ZoneKey(database: inventory.databases[0], zone: .default)
        /// ```
        public init(database: StoreInventory.DatabaseEntry, zone: RecordZone.ID) {
            containerIdentifier = database.containerIdentifier
            environment = database.environment
            codedScope = Database.Scope.Coded(database.scope)
            owner = database.owner
            zoneName = zone.zoneName
            zoneOwnerName = zone.ownerName
        }

        private enum CodingKeys: String, CodingKey {
            case containerIdentifier, environment, codedScope = "scope", owner, zoneName, zoneOwnerName
        }

        /// Decodes a key; a key without an environment (written before environments) is
        /// development's.
        public init(from decoder: any Decoder) throws {
            let values = try decoder.container(keyedBy: CodingKeys.self)
            containerIdentifier = try values.decode(String.self, forKey: .containerIdentifier)
            environment = try values.decodeIfPresent(Container.Environment.self, forKey: .environment) ?? .development
            codedScope = try values.decode(Database.Scope.Coded.self, forKey: .codedScope)
            owner = try values.decode(String.self, forKey: .owner)
            zoneName = try values.decode(String.self, forKey: .zoneName)
            zoneOwnerName = try values.decode(String.self, forKey: .zoneOwnerName)
        }

        /// The zone's ID, as its database's owner names it.
        public var zoneID: RecordZone.ID { RecordZone.ID(zoneName: zoneName, ownerName: zoneOwnerName) }

        /// Whether a copy reaches `a` before `b`.
        public static func < (a: ZoneKey, b: ZoneKey) -> Bool {
            for (left, right) in [(a.containerIdentifier, b.containerIdentifier), (a.environment.rawValue, b.environment.rawValue)] where left != right {
                return StoreCopier.precedes(left, right)
            }
            if a.scope != b.scope { return a.scope.rawValue < b.scope.rawValue }
            for (left, right) in [(a.owner, b.owner), (a.zoneName, b.zoneName), (a.zoneOwnerName, b.zoneOwnerName)] where left != right {
                return StoreCopier.precedes(left, right)
            }
            return false
        }

        /// `com.example.app public _defaultZone`, `com.example.app (production) private (_6c1f…) Work`.
        public var description: String {
            let database = owner.isEmpty ? scope.name : "\(scope.name) (\(owner))"
            let zone = zoneOwnerName == RecordZone.ID.currentUserDefaultOwner ? zoneName : "\(zoneName) of \(zoneOwnerName)"
            let container = environment == .production ? "\(containerIdentifier) (production)" : containerIdentifier
            return "\(container) \(database) \(zone)"
        }
    }

    /// Why a copy ended.
    ///
    /// ```swift
    /// if try await copier.run(checkpointStore: checkpoint).end == .cancelled { print("run again with the checkpoint") }
    /// ```
    public enum End: Sendable, Hashable {
        /// Every zone was copied.
        case finished
        /// ``StoreCopier/cancel()`` or task cancellation stopped it after a batch.
        case cancelled
    }

    /// Why a copy without a checkpoint refused its destination: it holds records, which a copy
    /// would mix with the source's. ``StratusError/underlyingError`` of the `invalidArguments`
    /// error ``run(checkpointStore:progress:)`` throws then.
    ///
    /// ```swift
    /// catch let error as StratusError where error.underlyingError is StoreCopier.DestinationHoldsRecords {
    ///     print("copy into an empty store, or go on from the checkpoint of the copy that began it")
    /// }
    /// ```
    public struct DestinationHoldsRecords: Error, Sendable {
        /// How many records the destination holds.
        public let recordCount: Int
    }

    /// What a copy did.
    ///
    /// ```swift
    /// let summary = try await copier.run()
    /// print(summary.recordsCopied, summary.failures)
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Containers whose schemas were copied in this run.
        public var schemasCopied = 0
        /// Zones copied whole in this run.
        public var zonesCopied = 0
        /// Records written (or found already equal) in this run.
        public var recordsCopied = 0
        /// Subscriptions written (every subscriber's, in every database), in this run.
        public var subscriptionsCopied = 0
        /// Zones an earlier run had copied, not read again.
        public var zonesSkipped = 0
        /// What could not be copied: a zone or a record, and why. The zones named here are not
        /// marked copied, so a later run tries them again.
        public var failures: [String] = []
        /// Why the copy ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// Record counts and checksums of one zone on both sides.
    ///
    /// ```swift
    /// for zone in try await copier.compare() where !zone.matches { print(zone.zone, zone.source, zone.destination) }
    /// ```
    public struct ZoneComparison: Sendable, Hashable {
        /// The zone compared.
        public var zone: ZoneKey
        /// What the source holds in it.
        public var source: ZoneDigest
        /// What the destination holds in it (empty when it lacks the zone).
        public var destination: ZoneDigest
        /// Whether both sides hold the zone, with the same capabilities and the same records.
        public var matches: Bool { source == destination }
    }

    /// How many records a zone holds and a checksum over them that does not depend on the
    /// order they are read in.
    ///
    /// ```swift
    /// print(comparison.source)   // 40 records, checksum 3f9c…
    /// ```
    public struct ZoneDigest: Sendable, Hashable, CustomStringConvertible {
        /// How many records the zone holds.
        public var records = 0
        /// The sum of the records' checksums (see ``StoreCopier/compare()``).
        public var checksum: UInt64 = 0
        /// The zone's capabilities; `nil` where the store has no such zone.
        public var capabilities: RecordZone.Capabilities?

        /// The digest of a zone the store lacks.
        public init() {}

        public var description: String {
            guard let capabilities else { return "no such zone" }
            let names = [(RecordZone.Capabilities.fetchChanges, "fetchChanges"), (.atomic, "atomic"), (.sharing, "sharing"), (.zoneWideSharing, "zoneWideSharing")]
                .filter { capabilities.contains($0.0) }.map(\.1)
            return "\(records) record\(records == 1 ? "" : "s"), checksum \(String(checksum, radix: 16)), capabilities \(names.isEmpty ? "none" : names.joined(separator: " "))"
        }
    }

    /// The store read.
    public let source: any StorageEngine
    /// The store written.
    public let destination: any StorageEngine
    /// Records written per batch (one transaction each).
    public let batchSize: Int
    /// The least time between two saves of the checkpoint while the copy goes on (it is also
    /// saved when the copy stops and when every zone is copied): a save syncs a file, which costs
    /// more than copying a small zone, and a run after a kill copies again only what was
    /// written since the last one.
    public let checkpointInterval: Duration
    private let cancelled = Atomic<Bool>(false)

    /// A copy of every container of `source` into `destination`.
    ///
    /// ```swift
    /// let copier = StoreCopier(from: source, to: destination, batchSize: 1_000)
    /// ```
    ///
    /// - Precondition: `batchSize` is positive and `checkpointInterval` is not negative (a
    ///   programmer error).
    public init(from source: any StorageEngine, to destination: any StorageEngine, batchSize: Int = 500, checkpointInterval: Duration = .seconds(1)) {
        precondition(batchSize > 0, "the batch size must be positive")
        precondition(checkpointInterval >= .zero, "the checkpoint interval must not be negative")
        self.source = source
        self.destination = destination
        self.batchSize = batchSize
        self.checkpointInterval = checkpointInterval
    }

    /// Asks a running copy to stop after the batch being written; callable from any thread.
    ///
    /// ```swift
    /// signalSource.setEventHandler { copier.cancel() }
    /// ```
    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Whether ``cancel()`` was called or the running task was cancelled.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    // MARK: - Owners

    /// The database of `engine` that holds a zone of the inventory, seen by an administrator
    /// (security roles do not limit a copy): a private or shared one as its owner, whose user
    /// record name the inventory gives.
    static func database(of zone: ZoneKey, on engine: any StorageEngine) -> Database {
        Database(engine: engine, context: .administrator(containerIdentifier: zone.containerIdentifier, environment: zone.environment,
                                                         scope: zone.scope, owner: zone.owner))
    }

    // MARK: - Copying

    /// Copies what the source holds, schemas first, then zone by zone.
    ///
    /// ```swift
    /// let summary = try await copier.run(checkpointStore: checkpointFile) { copied in print("copied \(copied)") }
    /// ```
    ///
    /// - Parameters:
    ///   - checkpointStore: where the copy keeps how far it got, so that a later run goes on
    ///     from there (remove it yourself once ``compare()`` found the stores equal).
    ///   - progress: called with the number of records copied in this run after each batch.
    /// - Returns: what was copied, what failed and why the copy ended.
    /// - Throws: ``StratusError`` `invalidArguments` when the checkpoint belongs to another copy,
    ///   or when there is no checkpoint and the destination holds records (other than those of
    ///   a completed copy of this source, which the run leaves for ``compare()``); `permissionFailure`
    ///   when either store shows this connection only some rows (``RowAccessReporting``: a role
    ///   that PostgreSQL's row-level security binds), before anything is read; store errors and
    ///   checkpoint errors (what was written stays written, and the checkpoint says how far).
    public func run(checkpointStore: (any CheckpointStore)? = nil, progress: (@Sendable (Int) -> Void)? = nil) async throws -> Summary {
        let source = self.source, destination = self.destination
        // A copy takes every database of every user, or nothing: a source that shows a role only
        // some rows would copy those and compare them equal.
        try await Self.checkReachesEveryRow(source, as: "source")
        try await Self.checkReachesEveryRow(destination, as: "destination")
        let sourceInventory = try await Self.offThePool { try source.inventory() }
        let destinationInventory = try await Self.offThePool { try destination.inventory() }
        let sourceIdentifier = try source.storeIdentifier, destinationIdentifier = try destination.storeIdentifier
        if sourceIdentifier == destinationIdentifier {
            throw StratusError(.invalidArguments, "the source and the destination are the same store")
        }
        var checkpoint: Checkpoint
        if let saved = try checkpointStore?.load() {
            guard saved.sourceIdentifier == sourceIdentifier && saved.destinationIdentifier == destinationIdentifier else {
                throw StratusError(.invalidArguments, "the checkpoint belongs to a copy between other stores; remove it to start over")
            }
            checkpoint = saved
            // The destination's record of the copy, written after each checkpoint, is what
            // committed there: a server that lost its last commits (asynchronous commit, a
            // failover to a standby that lagged) holds less than the file says, and the copy
            // goes on from what it holds, not past records it no longer has.
            if let held = try await Self.offThePool({ [job = copyJob(sourceIdentifier)] in try destination.jobProgressText(job) }),
               let record = try? JSONDecoder().decode(DestinationProgress.self, from: Data(held.utf8)),
               !record.isAhead(of: checkpoint) {
                var behind = checkpoint
                behind.zonesCopied = Array(checkpoint.zonesCopied.prefix(record.zonesCopied))
                behind.zonesCopiedThrough = record.zonesCopiedThrough
                behind.zonesNotCopied = record.zonesNotCopied ?? []
                behind.position = record.position
                if behind != checkpoint {
                    checkpoint = behind
                    try checkpointStore?.save(checkpoint)
                }
            }
        } else {
            let held = destinationInventory.databases.reduce(0) { $0 + $1.zones.reduce(0) { $0 + $1.recordCounts.values.reduce(0, +) } }
            if held > 0, checkpointStore != nil, try await isCompleteCopy(of: sourceIdentifier) {
                // A copy that finished, whose checkpoint was removed, run again (killed after
                // the removal, before it could report): nothing is left to copy.
                var summary = Summary()
                summary.zonesSkipped = sourceInventory.databases.reduce(0) { $0 + $1.zones.count }
                return summary
            }
            if held > 0 {
                var refusal = StratusError(.invalidArguments, "the destination already holds \(held) record\(held == 1 ? "" : "s"); a copy fills a store without records, or goes on from the checkpoint of the copy that began it")
                refusal.underlyingError = DestinationHoldsRecords(recordCount: held)
                throw refusal
            }
            checkpoint = Checkpoint(sourceIdentifier: sourceIdentifier, destinationIdentifier: destinationIdentifier)
            // Saved before the first write: a copy killed at any moment after it leaves a
            // checkpoint, so that the next run goes on instead of finding records it cannot place.
            try checkpointStore?.save(checkpoint)
        }

        var summary = Summary()
        if !checkpoint.schemasCopied {
            summary.schemasCopied = try await copySchemas(sourceInventory)
            checkpoint.schemasCopied = true
            try checkpointStore?.save(checkpoint)
        }
        var savedAt = ContinuousClock.now
        do {
            // Looked up once: the checkpoint's lists are checked for every zone.
            let copiedByEarlierVersion = Set(checkpoint.zonesCopied)
            var notCopied = ZonePlaces(&checkpoint.zonesNotCopied)
            let zones = sourceInventory.databases.flatMap { database in
                database.zones.map { (key: ZoneKey(database: database, zone: $0.zone.zoneID), entry: $0) }
            }.sorted { $0.key < $1.key }
            func isPassed(_ key: ZoneKey) -> Bool { checkpoint.zonesCopiedThrough.map { key <= $0 } ?? false }
            // A zone the source gained since an earlier run, whose key sorts before the last zone
            // that run passed, is one the checkpoint counts as copied but the destination lacks
            // (a default zone without records has nothing to copy).
            // Such zones join the zones to copy again, saved before any is written: a kill while
            // one is half copied leaves the destination holding it, and the checkpoint then still
            // says to copy it.
            if checkpoint.zonesCopiedThrough != nil || !copiedByEarlierVersion.isEmpty {
                let held = Set(destinationInventory.databases.flatMap { database in database.zones.map { ZoneKey(database: database, zone: $0.zone.zoneID) } })
                var gained = false
                for (key, entry) in zones where !notCopied.contains(key) && (isPassed(key) || copiedByEarlierVersion.contains(key)) && !held.contains(key)
                    && (!key.zoneID.isDefault || !entry.recordCounts.isEmpty) {
                    gained = notCopied.append(key, to: &checkpoint.zonesNotCopied) || gained
                }
                if gained { try await saveCheckpoint(checkpoint, to: checkpointStore) }
            }
            // The zone an earlier run stopped in, past the zones it passed: copying zones again
            // before it leaves its position as it is.
            let stoppedIn = checkpoint.position
            for (key, entry) in zones {
                let passed = isPassed(key)
                if !notCopied.contains(key) && (passed || copiedByEarlierVersion.contains(key)) {
                    summary.zonesSkipped += 1
                    continue
                }
                if isCancelled {
                    summary.end = .cancelled
                    try await saveCheckpoint(checkpoint, to: checkpointStore)
                    return summary
                }
                let complete = try await copyZone(entry, key: key, checkpoint: &checkpoint, checkpointStore: checkpointStore, savedAt: &savedAt,
                                                  summary: &summary, progress: progress)
                if summary.end == .cancelled {
                    try await saveCheckpoint(checkpoint, to: checkpointStore)
                    return summary
                }
                if complete {
                    notCopied.remove(key, from: &checkpoint.zonesNotCopied)
                    summary.zonesCopied += 1
                } else {
                    notCopied.append(key, to: &checkpoint.zonesNotCopied)
                }
                if !passed { checkpoint.zonesCopiedThrough = key }
                checkpoint.position = stoppedIn.flatMap { key < $0.zone ? $0 : nil }
                try await saveCheckpointIfDue(checkpoint, to: checkpointStore, savedAt: &savedAt)
            }
            try await saveCheckpoint(checkpoint, to: checkpointStore)
        } catch {
            // What the checkpoint says is written (it moves only past committed batches): saved
            // now, a run again copies less twice. The error is the one to report.
            try? await saveCheckpoint(checkpoint, to: checkpointStore)
            throw error
        }
        summary.subscriptionsCopied = try await copySubscriptions(sourceInventory)
        // Records saved in development grow its schema with the types and fields they hold,
        // also those the source's schema no longer declares: once every record is written, the
        // schemas are written again, so that the destination's are the source's.
        _ = try await copySchemas(sourceInventory)
        // The destination records that the copy is complete: its checkpoint is removed by the
        // caller once the stores compare equal, and a kill between that removal and the
        // caller's report would otherwise leave a complete copy that a run again refuses.
        try await saveCheckpoint(checkpoint, to: checkpointStore, complete: true)
        return summary
    }

    /// Whether the destination records that a copy from `sourceIdentifier` completed. Whether
    /// the stores are still equal is ``compare()``'s to say (naming what differs), not a reason
    /// to refuse the copy as one into a store that holds records.
    private func isCompleteCopy(of sourceIdentifier: String) async throws -> Bool {
        let destination = self.destination, job = copyJob(sourceIdentifier)
        guard let held = try await Self.offThePool({ try destination.jobProgressText(job) }),
              let record = try? JSONDecoder().decode(DestinationProgress.self, from: Data(held.utf8))
        else { return false }
        return record.complete == true
    }

    /// Checks that `engine` shows this connection every row of its store, as a copy must read or
    /// write them (``run(checkpointStore:progress:)`` checks both stores itself; a tool checks a
    /// source before it creates the destination).
    ///
    /// ```swift
    /// try await StoreCopier.checkReachesEveryRow(source, as: "source")
    /// ```
    ///
    /// - Throws: ``StratusError`` `permissionFailure` saying which roles do reach every row,
    ///   when a PostgreSQL role is bound by row-level security; store errors.
    public static func checkReachesEveryRow(_ engine: any StorageEngine, as side: String) async throws {
        guard engine is any RowAccessReporting else { return }
        if let limit = try await offThePool({ try (engine as? any RowAccessReporting)?.rowAccessLimit() ?? nil }) {
            throw StratusError(.permissionFailure, "a copy reads and writes every user's rows, and the \(side) does not let it: \(limit)")
        }
    }

    /// Copies every container's schemas (each environment's, whole: roles, types, indexes and
    /// grants) and user directories; answers how many containers had a schema.
    private func copySchemas(_ inventory: StoreInventory) async throws -> Int {
        let source = self.source, destination = self.destination
        var identifiers = inventory.containersWithSchemas
        for database in inventory.databases where !identifiers.contains(database.containerIdentifier) {
            identifiers.append(database.containerIdentifier)
        }
        let containers = identifiers
        return try await Self.offThePool {
            var copied = 0
            for identifier in containers {
                var hadSchema = false
                for environment in Container.Environment.allCases {
                    let storageContainer = environment.storageContainer(for: identifier)
                    let schema = try source.fetchSchema(storageContainer: storageContainer)
                    guard !schema.roles.isEmpty || !schema.recordTypes.isEmpty else { continue }
                    try destination.modifySchema(storageContainer: storageContainer) { $0 = schema }
                    hadSchema = true
                }
                let users = try source.fetchUserDirectory(containerIdentifier: identifier, logins: nil)
                if !users.isEmpty {
                    try destination.modifyUserDirectory(containerIdentifier: identifier, saving: users, deletingLogins: [])
                }
                if hadSchema { copied += 1 }
            }
            return copied
        }
    }

    /// Copies every database's subscriptions, each subscriber's, as they are (a subscription
    /// saved again replaces the one with its subscriber and ID, so a run that goes on writes
    /// them again). Notifications already delivered stay behind: a feed is its store's.
    private func copySubscriptions(_ inventory: StoreInventory) async throws -> Int {
        let source = self.source, destination = self.destination
        return try await Self.offThePool {
            var copied = 0
            for database in inventory.databases {
                let context = Self.subscriptionContext(of: database)
                let subscriptions = try source.fetchSubscriptions(in: context, subscriber: nil).subscriptions
                guard !subscriptions.isEmpty else { continue }
                _ = try destination.modifySubscriptions(saving: subscriptions, deleting: [], in: context)
                copied += subscriptions.count
            }
            return copied
        }
    }

    /// The context a database's subscriptions are kept in, as an administrator sees them.
    static func subscriptionContext(of database: StoreInventory.DatabaseEntry) -> DatabaseContext {
        .administrator(containerIdentifier: database.containerIdentifier, environment: database.environment, scope: database.scope, owner: database.owner)
    }

    /// Copies one zone, type by type, from where the checkpoint says; answers whether every
    /// record of it was copied. The checkpoint's position moves only past records written, and
    /// only while nothing before them failed or waits.
    private func copyZone(
        _ entry: StoreInventory.ZoneEntry, key: ZoneKey, checkpoint: inout Checkpoint, checkpointStore: (any CheckpointStore)?,
        savedAt: inout ContinuousClock.Instant, summary: inout Summary, progress: (@Sendable (Int) -> Void)?
    ) async throws -> Bool {
        let reader = Self.database(of: key, on: source)
        let writer = Self.database(of: key, on: destination)
        if !key.zoneID.isDefault {
            let (saved, _) = try await writer.modifyRecordZones(saving: [entry.zone], deleting: [])
            if case .failure(let error)? = saved[entry.zone.zoneID] {
                summary.failures.append("zone \(key): \(error)")
                return false
            }
        }
        let resume = checkpoint.position?.zone == key ? checkpoint.position : nil
        var complete = true
        // Records whose parent is of a type copied later wait for the zone's other types.
        // While any wait, the checkpoint stays where it is, so that a stop before they are
        // written copies them again.
        var waiting: [Record] = []
        for type in entry.recordCounts.keys.sorted(by: Self.precedes) {
            if let resume, Self.precedes(type, resume.recordType) { continue }
            let after = resume?.recordType == type ? resume?.recordName : nil
            var batch: [Record] = []
            func flush() async throws {
                guard !batch.isEmpty else { return }
                var failures = try await save(batch, into: writer)
                var deferred = 0
                for record in batch where failures[record.recordID]?.code == .referenceViolation && record.parent != nil {
                    failures[record.recordID] = nil
                    waiting.append(record)
                    deferred += 1
                }
                summary.recordsCopied += batch.count - failures.count - deferred
                if failures.isEmpty {
                    if complete && waiting.isEmpty {
                        checkpoint.position = Checkpoint.Position(zone: key, recordType: type, recordName: batch[batch.count - 1].recordID.recordName)
                        try await saveCheckpointIfDue(checkpoint, to: checkpointStore, savedAt: &savedAt)
                    }
                } else {
                    summary.failures += failures.map { "record \($0.key.recordName) in zone \(key): \($0.value)" }.sorted()
                    complete = false
                }
                progress?(summary.recordsCopied)
                batch.removeAll(keepingCapacity: true)
            }
            for try await record in reader.allRecords(matching: Query(recordType: type), inZoneWith: key.zoneID, pageSize: batchSize) {
                if let after, !Self.precedes(after, record.recordID.recordName) { continue }
                batch.append(record)
                if batch.count == batchSize {
                    try await flush()
                    if isCancelled {
                        summary.end = .cancelled
                        return false
                    }
                }
            }
            try await flush()
        }
        if !waiting.isEmpty {
            // One request: the operation saves parents before their children.
            let failures = try await save(waiting, into: writer)
            summary.recordsCopied += waiting.count - failures.count
            summary.failures += failures.map { "record \($0.key.recordName) in zone \(key): \($0.value)" }.sorted()
            if !failures.isEmpty { complete = false }
            progress?(summary.recordsCopied)
        }
        return complete
    }

    /// Where each zone of the checkpoint's ``Checkpoint/zonesNotCopied`` is in that list, so that
    /// a zone copied leaves it in constant time (the last zone takes its place): a run that
    /// copies thousands of zones again stays linear in zones.
    struct ZonePlaces {
        private var places: [ZoneKey: Int] = [:]

        /// The places of `list`'s zones; a zone listed twice keeps its first place only.
        init(_ list: inout [ZoneKey]) {
            var unique: [ZoneKey] = []
            for key in list where places[key] == nil {
                places[key] = unique.count
                unique.append(key)
            }
            if unique.count != list.count { list = unique }
        }

        func contains(_ key: ZoneKey) -> Bool { places[key] != nil }

        /// Adds `key` at the end of `list` unless it is there; answers whether it was added.
        @discardableResult
        mutating func append(_ key: ZoneKey, to list: inout [ZoneKey]) -> Bool {
            guard places[key] == nil else { return false }
            places[key] = list.count
            list.append(key)
            return true
        }

        /// Takes `key` out of `list`, when it is there.
        mutating func remove(_ key: ZoneKey, from list: inout [ZoneKey]) {
            guard let place = places.removeValue(forKey: key) else { return }
            let last = list.removeLast()
            guard place < list.count else { return }
            list[place] = last
            places[last] = place
        }
    }

    /// What the destination records of a copy after each checkpoint (as the job progress
    /// ``copyJob(_:)`` names): the checkpoint's progress, with an earlier version's list of
    /// zones as its length (a run that goes on from such a list does not change it).
    struct DestinationProgress: Codable {
        /// How many zones of ``Checkpoint/zonesCopied`` are copied; the only field an earlier
        /// version wrote, with `position`.
        var zonesCopied: Int
        var zonesCopiedThrough: ZoneKey?
        var zonesNotCopied: [ZoneKey]?
        var position: Checkpoint.Position?
        /// Set once every zone, schema and subscription was copied (nil before, and in the
        /// records of versions that did not write it).
        var complete: Bool?

        init(_ checkpoint: Checkpoint, complete: Bool = false) {
            zonesCopied = checkpoint.zonesCopied.count
            zonesCopiedThrough = checkpoint.zonesCopiedThrough
            zonesNotCopied = checkpoint.zonesNotCopied
            position = checkpoint.position
            self.complete = complete ? true : nil
        }

        /// Whether this record says more is copied than `checkpoint` does: one left by another
        /// copy between the same stores, not a commit the destination lost.
        func isAhead(of checkpoint: Checkpoint) -> Bool {
            if zonesCopied > checkpoint.zonesCopied.count { return true }
            guard let through = zonesCopiedThrough else { return false }
            guard let saved = checkpoint.zonesCopiedThrough else { return true }
            return saved < through
        }
    }

    /// The destination's name for the job of copying the store `sourceIdentifier` names.
    private func copyJob(_ sourceIdentifier: String) -> String { "stratus.copy." + sourceIdentifier }

    /// Saves the checkpoint, then records it in the destination in a transaction of its own:
    /// the destination's record never runs ahead of the file, and a destination that lost
    /// commits lost that record with them (see ``run(checkpointStore:progress:)``).
    private func saveCheckpoint(_ checkpoint: Checkpoint, to store: (any CheckpointStore)?, complete: Bool = false) async throws {
        guard let store else { return }
        try store.save(checkpoint)
        // The record is the store's; the transaction is in the database of the zone it names.
        guard let zone = checkpoint.position?.zone ?? checkpoint.zonesCopiedThrough ?? checkpoint.zonesCopied.last else { return }
        let record = DestinationProgress(checkpoint, complete: complete)
        let text = String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
        let job = copyJob(checkpoint.sourceIdentifier), destination = self.destination
        let context = DatabaseContext.administrator(containerIdentifier: zone.containerIdentifier, environment: zone.environment, scope: zone.scope, owner: zone.owner)
        try await Self.offThePool {
            try destination.writeRecords(in: context) { try $0.saveJobProgress(job, position: Int64(record.zonesCopied), text: text) }
        }
    }

    /// Saves the checkpoint when ``checkpointInterval`` has passed since `savedAt`, the end of
    /// the last save.
    private func saveCheckpointIfDue(_ checkpoint: Checkpoint, to store: (any CheckpointStore)?, savedAt: inout ContinuousClock.Instant) async throws {
        guard store != nil, ContinuousClock.now - savedAt >= checkpointInterval else { return }
        try await saveCheckpoint(checkpoint, to: store)
        savedAt = .now
    }

    /// Writes records as they are (system fields and change tags kept); answers the records
    /// that failed.
    private func save(_ records: [Record], into database: Database) async throws -> [Record.ID: StratusError] {
        // Content whose file is not the size its record says (a truncated or damaged assets
        // folder) is not copied as if it were the asset: the backup would hold the damage
        // under a new, self-consistent name.
        var damaged: [Record.ID: StratusError] = [:]
        let sound = records.filter { record in
            guard let problem = Self.damagedContent(of: record) else { return true }
            damaged[record.recordID] = problem
            return false
        }
        guard !sound.isEmpty else { return damaged }
        let op = ModifyRecordsOperation(recordsToSave: sound.map(Self.carryingAssetContent))
        op.stopsOnStoreFailure = true
        op.writeMode = .forceReplace
        op.preservesSystemFields = true
        // What the source holds was admitted there: CloudKit's own records (shares, the
        // public database's Users records) are copied as they are.
        op.writesSystemRecords = true
        op.isAtomic = false
        op.itemsPerBatch = batchSize
        let failures = Collector<[Record.ID: StratusError]>()
        try await database.run { finish in
            op.modifyRecordsResultBlock = { result in
                if case .failure(let error as StratusError) = result, error.code == .partialFailure {
                    failures.append(error.partialErrorsByRecordID)
                    finish(.success(()))
                } else {
                    finish(result)
                }
            }
            return op
        }
        return (failures.items.first ?? [:]).merging(damaged) { written, _ in written }
    }

    /// The error of a record whose stored asset content is not the size the record gives it.
    static func damagedContent(of record: Record) -> StratusError? {
        for (key, value) in record.contents.fields {
            for asset in value.assets {
                if let fileSize = asset.damagedContentSize() {
                    return StratusError(.assetFileModified, "field '\(key)' of record '\(record.recordID.recordName)' in the source: \(asset.damagedContentMessage(fileSize: fileSize))", recordID: record.recordID)
                }
            }
        }
        return nil
    }

    /// `record` with each asset the source stores read again from the source's content file,
    /// so that the destination stores the content (a stored asset names content by an
    /// identifier only its own store holds); CloudKit metadata, system fields, encrypted keys
    /// and the JSON the record came as stay.
    static func carryingAssetContent(_ record: Record) -> Record {
        let contents = record.contents
        var fields = contents.fields
        var changed = false
        func fromSource(_ asset: Asset) -> Asset {
            guard let identifier = asset.storedIdentifier else { return asset }
            changed = true
            return Asset(fileURL: asset.contentURL, storedIdentifier: nil, size: nil, source: .storedContent(digest: identifier)).withMetadata(of: asset, size: asset.size)
        }
        for (key, value) in contents.fields {
            switch value {
            case .asset(let asset): fields[key] = .asset(fromSource(asset))
            case .assetList(let assets): fields[key] = .assetList(assets.map(fromSource))
            default: break
            }
        }
        guard changed else { return record }
        return Record.stored(recordType: record.recordType, recordID: record.recordID, systemFields: contents.system, fields: fields,
                      parent: contents.parent, encryptedKeys: contents.encryptedKeys, jsonExtras: contents.extras)
    }

    /// Record names and types in the stores' order: by their UTF-8 bytes.
    static func precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// Runs a blocking store call on a thread of its own, not on the cooperative pool.
    static func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}
