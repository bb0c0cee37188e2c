import Foundation
import Synchronization

extension SyncEngine {
    /// A change in a record zone to send to the store, as `CKSyncEngine.PendingRecordZoneChange`.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
    /// ```
    public enum PendingRecordZoneChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// A record to save; the delegate provides it in ``SyncEngineDelegate/nextRecordZoneChangeBatch(_:syncEngine:)``.
        case saveRecord(Record.ID)
        /// A record to delete.
        case deleteRecord(Record.ID)

        /// The record the change is about.
        public var recordID: Record.ID {
            switch self {
            case .saveRecord(let id), .deleteRecord(let id): id
            }
        }

        public var description: String {
            switch self {
            case .saveRecord(let id): "saveRecord(\(id.zoneID.zoneName)/\(id.recordName))"
            case .deleteRecord(let id): "deleteRecord(\(id.zoneID.zoneName)/\(id.recordName))"
            }
        }
    }

    /// A change of a database's zones to send to the store, as `CKSyncEngine.PendingDatabaseChange`.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Contacts"))])
    /// ```
    public enum PendingDatabaseChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// A zone to create (saving a zone that exists changes nothing).
        case saveZone(RecordZone)
        /// A zone to delete, with every record in it.
        case deleteZone(RecordZone.ID)

        /// The zone the change is about.
        public var zoneID: RecordZone.ID {
            switch self {
            case .saveZone(let zone): zone.zoneID
            case .deleteZone(let id): id
            }
        }

        public static func == (a: PendingDatabaseChange, b: PendingDatabaseChange) -> Bool {
            switch (a, b) {
            case (.saveZone(let x), .saveZone(let y)): x.zoneID == y.zoneID
            case (.deleteZone(let x), .deleteZone(let y)): x == y
            default: false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .saveZone(let zone): hasher.combine(0); hasher.combine(zone.zoneID)
            case .deleteZone(let id): hasher.combine(1); hasher.combine(id)
            }
        }

        private enum CodingKeys: String, CodingKey { case saveZone, capabilities, deleteZone }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let id = try container.decodeIfPresent(RecordZone.ID.self, forKey: .saveZone) {
                let capabilities = try container.decodeIfPresent(UInt.self, forKey: .capabilities)
                self = .saveZone(RecordZone(zoneID: id, capabilities: capabilities.map(RecordZone.Capabilities.init(rawValue:)) ?? [.fetchChanges, .atomic]))
            } else {
                self = .deleteZone(try container.decode(RecordZone.ID.self, forKey: .deleteZone))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .saveZone(let zone):
                try container.encode(zone.zoneID, forKey: .saveZone)
                try container.encode(zone.capabilities.rawValue, forKey: .capabilities)
            case .deleteZone(let id):
                try container.encode(id, forKey: .deleteZone)
            }
        }

        public var description: String {
            switch self {
            case .saveZone(let zone): "saveZone(\(zone.zoneID.zoneName))"
            case .deleteZone(let id): "deleteZone(\(id.zoneName))"
            }
        }
    }

    /// What a sync engine keeps between runs, as `CKSyncEngine.State`: the change tokens of the
    /// database and its zones, the zones with changes still to fetch, the user it synced for,
    /// and the changes still to send.
    ///
    /// The engine hands out a ``Serialization`` of it in every ``Event/stateUpdate(_:)``; keep the
    /// last one with your own data and pass it to ``Configuration/stateSerialization`` on the
    /// next start, so that nothing is fetched or sent twice.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    /// print(syncEngine.state.pendingRecordZoneChanges)   // [saveRecord(Contacts/…)]
    /// ```
    public final class State: Sendable, CustomStringConvertible {
        let stored: Mutex<Stored>
        /// Called (outside the lock) after the app added or removed pending changes: the engine
        /// marks the state for its next update and, when it syncs by itself, schedules a send.
        let changed = Mutex<(@Sendable () -> Void)?>(nil)

        init(_ stored: Stored) {
            self.stored = Mutex(stored)
        }

        /// The record changes still to send, oldest first, each record once: a later save or
        /// delete of a record already pending replaces the earlier one of the other kind.
        public var pendingRecordZoneChanges: [PendingRecordZoneChange] { stored.withLock { $0.pendingRecordZoneChanges } }

        /// The zone changes still to send, oldest first, each zone once.
        public var pendingDatabaseChanges: [PendingDatabaseChange] { stored.withLock { $0.pendingDatabaseChanges } }

        /// Whether the app has changes to send that it tracks itself: the engine then asks the
        /// delegate for a batch at the next send even with no pending record changes, and
        /// clears this when the delegate answers `nil`.
        public var hasPendingUntrackedChanges: Bool {
            get { stored.withLock { $0.hasPendingUntrackedChanges } }
            set {
                let didChange = stored.withLock { state -> Bool in
                    defer { state.hasPendingUntrackedChanges = newValue }
                    return state.hasPendingUntrackedChanges != newValue
                }
                if didChange { notifyChanged() }
            }
        }

        /// The zones whose changes the database's history announced and the engine has not
        /// fetched yet (it fetches them at its next ``SyncEngine/fetchChanges(_:)``).
        public var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID] { stored.withLock { $0.zoneIDsWithUnfetchedServerChanges } }

        /// Adds changes to send. A change already pending is kept where it is; a save of a record
        /// whose delete is pending (or the other way round) replaces it.
        ///
        /// ```swift
        /// syncEngine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
        /// ```
        public func add(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            guard !changes.isEmpty else { return }
            stored.withLock { $0.add(changes) }
            notifyChanged()
        }

        /// Removes changes that should no longer be sent.
        ///
        /// ```swift
        /// syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(id)])
        /// ```
        public func remove(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            guard !changes.isEmpty else { return }
            let removed = stored.withLock { $0.remove(changes) }
            if removed { notifyChanged() }
        }

        /// Adds zone changes to send, each zone once (a later save or delete replaces the other).
        ///
        /// ```swift
        /// syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Contacts"))])
        /// ```
        public func add(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            guard !changes.isEmpty else { return }
            stored.withLock { $0.add(changes) }
            notifyChanged()
        }

        /// Removes zone changes that should no longer be sent.
        ///
        /// ```swift
        /// syncEngine.state.remove(pendingDatabaseChanges: [.deleteZone(oldZoneID)])
        /// ```
        public func remove(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            guard !changes.isEmpty else { return }
            let removed = stored.withLock { $0.remove(changes) }
            if removed { notifyChanged() }
        }

        public var description: String {
            stored.withLock { state in
                "SyncEngine.State(\(state.pendingRecordZoneChanges.count) pending record change(s), \(state.pendingDatabaseChanges.count) pending zone change(s), \(state.zoneIDsWithUnfetchedServerChanges.count) zone(s) to fetch)"
            }
        }

        private func notifyChanged() {
            stored.withLock { $0.needsUpdateEvent = true }
            changed.withLock { $0 }?()
        }

        /// The state as the app keeps it between runs, as `CKSyncEngine.State.Serialization`:
        /// opaque, `Codable` (it encodes as one data value). Its content is checked by the
        /// engine given it, not when it is decoded: apps keep it inside their own `Codable`
        /// data (Apple's sample does), which a state this version cannot use (damaged, or
        /// written by a newer Stratus) must not make unreadable; the engine's first sync then
        /// fails with `invalidArguments`, and the app starts again with `nil`.
        ///
        /// ```swift
        /// case .stateUpdate(let update):
        ///     try JSONEncoder().encode(update.stateSerialization).write(to: stateURL)
        /// ```
        public struct Serialization: Codable, Sendable, Hashable, CustomStringConvertible {
            let data: Data

            init(_ stored: Stored) {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                // Every stored member is a plain Codable value: encoding cannot fail.
                data = (try? encoder.encode(stored)) ?? Data()
            }

            func decoded() throws -> Stored {
                let stored: Stored
                do {
                    stored = try JSONDecoder().decode(Stored.self, from: data)
                } catch {
                    throw StratusError(.invalidArguments, "not a sync engine state: \(error)")
                }
                guard stored.version <= Stored.currentVersion else {
                    throw StratusError(.invalidArguments, "a sync engine state of version \(stored.version), written by a newer Stratus (this one reads up to \(Stored.currentVersion))")
                }
                return stored
            }

            public init(from decoder: any Decoder) throws {
                data = try decoder.singleValueContainer().decode(Data.self)
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(data)
            }

            public var description: String { "SyncEngine.State.Serialization(\(data.count) bytes)" }
        }
    }

    /// The state's content, encoded in a ``State/Serialization``.
    struct Stored: Codable, Sendable {
        static let currentVersion = 1

        struct ZoneToken: Codable, Sendable {
            var zoneID: RecordZone.ID
            var token: ServerChangeToken
        }

        var version = Stored.currentVersion
        /// The user record name the state belongs to (`nil` before the first sync).
        var userRecordName: String?
        var databaseToken: ServerChangeToken?
        var zoneTokens: [ZoneToken] = []
        var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID] = []
        var pendingRecordZoneChanges: [PendingRecordZoneChange] = []
        var pendingDatabaseChanges: [PendingDatabaseChange] = []
        var hasPendingUntrackedChanges = false
        /// Whether the app changed the state since the last ``Event/stateUpdate(_:)``; not kept.
        var needsUpdateEvent = false
        /// When the app last added a change of each pending record (a number that only grows),
        /// in this process; not kept.
        var recordChangeVersions: [Record.ID: Int] = [:]
        var nextChangeVersion = 0

        private enum CodingKeys: String, CodingKey {
            case version, userRecordName, databaseToken, zoneTokens, zoneIDsWithUnfetchedServerChanges
            case pendingRecordZoneChanges, pendingDatabaseChanges, hasPendingUntrackedChanges
        }

        init() {}

        func token(for zoneID: RecordZone.ID) -> ServerChangeToken? {
            zoneTokens.first { $0.zoneID == zoneID }?.token
        }

        mutating func setToken(_ token: ServerChangeToken?, for zoneID: RecordZone.ID) {
            zoneTokens.removeAll { $0.zoneID == zoneID }
            if let token { zoneTokens.append(ZoneToken(zoneID: zoneID, token: token)) }
        }

        mutating func add(_ changes: [PendingRecordZoneChange]) {
            var pendingByID = Dictionary(pendingRecordZoneChanges.map { ($0.recordID, $0) }, uniquingKeysWith: { first, _ in first })
            var replaced = Set<Record.ID>()
            for change in changes {
                // A change added again while a send of it runs is a newer edit: counted, so that
                // the send's success does not settle it (see ``remove(_:ifUnchangedSince:)``).
                nextChangeVersion += 1
                recordChangeVersions[change.recordID] = nextChangeVersion
                if pendingByID[change.recordID] == change { continue }
                if pendingByID[change.recordID] != nil { replaced.insert(change.recordID) }
                pendingByID[change.recordID] = change
                pendingRecordZoneChanges.append(change)
            }
            if !replaced.isEmpty {
                // Keeps the newest of each replaced record's changes: the one just appended.
                var kept = Set<Record.ID>()
                pendingRecordZoneChanges = Array(pendingRecordZoneChanges.reversed().filter { change in
                    !replaced.contains(change.recordID) || kept.insert(change.recordID).inserted
                }.reversed())
            }
        }

        mutating func remove(_ changes: [PendingRecordZoneChange]) -> Bool {
            let gone = Set(changes)
            let before = pendingRecordZoneChanges.count
            pendingRecordZoneChanges.removeAll { gone.contains($0) }
            forgetVersions(of: gone)
            return pendingRecordZoneChanges.count != before
        }

        /// Removes the changes a send settled, except those the app added again since
        /// `versions` was read: a newer edit of a record whose older version was being sent.
        mutating func remove(_ changes: [PendingRecordZoneChange], ifUnchangedSince versions: [Record.ID: Int]) {
            let gone = Set(changes.filter { recordChangeVersions[$0.recordID] == versions[$0.recordID] })
            pendingRecordZoneChanges.removeAll { gone.contains($0) }
            forgetVersions(of: gone)
        }

        /// Drops the versions of records with no pending change left, so that a long-running
        /// engine keeps one per pending change, not one per record it ever sent.
        private mutating func forgetVersions(of removed: Set<PendingRecordZoneChange>) {
            guard !removed.isEmpty else { return }
            let stillPending = Set(pendingRecordZoneChanges.map(\.recordID))
            for change in removed where !stillPending.contains(change.recordID) { recordChangeVersions[change.recordID] = nil }
        }

        mutating func add(_ changes: [PendingDatabaseChange]) {
            var pendingByID = Dictionary(pendingDatabaseChanges.map { ($0.zoneID, $0) }, uniquingKeysWith: { first, _ in first })
            for change in changes where pendingByID[change.zoneID] != change {
                if pendingByID[change.zoneID] != nil { pendingDatabaseChanges.removeAll { $0.zoneID == change.zoneID } }
                pendingByID[change.zoneID] = change
                pendingDatabaseChanges.append(change)
            }
        }

        mutating func remove(_ changes: [PendingDatabaseChange]) -> Bool {
            let gone = Set(changes)
            let before = pendingDatabaseChanges.count
            pendingDatabaseChanges.removeAll { gone.contains($0) }
            return pendingDatabaseChanges.count != before
        }

        /// Forgets everything that belonged to the previous user (CloudKit's engine resets its
        /// state when the account changes).
        mutating func reset(for user: String?) {
            self = Stored()
            userRecordName = user
            needsUpdateEvent = true
        }
    }
}

extension SyncEngine.PendingRecordZoneChange {
    /// ``saveRecord(_:)`` as the first releases of CloudKit's engine spelt it, which Apple's
    /// sample and early adopters still write.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.save(contact.recordID)])
    /// ```
    public static func save(_ recordID: Record.ID) -> Self { .saveRecord(recordID) }

    /// ``deleteRecord(_:)`` as the first releases of CloudKit's engine spelt it.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.delete(contact.recordID)])
    /// ```
    public static func delete(_ recordID: Record.ID) -> Self { .deleteRecord(recordID) }
}

extension SyncEngine.PendingDatabaseChange {
    /// ``saveZone(_:)`` as the first releases of CloudKit's engine spelt it.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingDatabaseChanges: [.save(RecordZone(zoneName: "Contacts"))])
    /// ```
    public static func save(_ zone: RecordZone) -> Self { .saveZone(zone) }

    /// ``deleteZone(_:)`` as the first releases of CloudKit's engine spelt it.
    ///
    /// ```swift
    /// syncEngine.state.add(pendingDatabaseChanges: [.delete(RecordZone.ID(zoneName: "Contacts"))])
    /// ```
    public static func delete(_ zoneID: RecordZone.ID) -> Self { .deleteZone(zoneID) }
}
