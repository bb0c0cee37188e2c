import Foundation

extension SyncEngine {
    /// Why the engine syncs, as `CKSyncEngine.SyncReason`.
    ///
    /// ```swift
    /// if context.reason == .scheduled { print("the engine's own sync") }
    /// ```
    public enum SyncReason: Hashable, Sendable {
        /// The engine scheduled it (``Configuration/automaticallySync``).
        case scheduled
        /// ``SyncEngine/fetchChanges(_:)`` or ``SyncEngine/sendChanges(_:)`` was called.
        case manual
    }

    /// What to fetch, as `CKSyncEngine.FetchChangesOptions`.
    ///
    /// ```swift
    /// try await syncEngine.fetchChanges(.init(scope: .zoneIDs([contactsZoneID])))
    /// ```
    public struct FetchChangesOptions: Sendable {
        /// Which zones' changes to fetch.
        public enum Scope: Sendable, Equatable, CustomStringConvertible {
            /// Every zone of the database.
            case all
            /// Every zone but these.
            case allExcluding([RecordZone.ID])
            /// These zones only.
            case zoneIDs([RecordZone.ID])

            /// Whether the scope takes in `zoneID`.
            public func contains(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .allExcluding(let excluded): !excluded.contains(zoneID)
                case .zoneIDs(let included): included.contains(zoneID)
                }
            }

            public var description: String {
                switch self {
                case .all: "all"
                case .allExcluding(let ids): "allExcluding(\(ids.map(\.zoneName)))"
                case .zoneIDs(let ids): "zoneIDs(\(ids.map(\.zoneName)))"
                }
            }
        }

        /// Which zones to fetch.
        public var scope: Scope
        /// The group the engine's operations report under.
        public var operationGroup: OperationGroup
        /// Zones to fetch before the others (those without changes are skipped).
        public var prioritizedZoneIDs: [RecordZone.ID] = []

        /// Options for ``SyncEngine/fetchChanges(_:)``: `.init(scope: .zoneIDs([zoneID]))`.
        public init(scope: Scope = .all, operationGroup: OperationGroup? = nil) {
            self.scope = scope
            self.operationGroup = operationGroup ?? OperationGroup()
        }
    }

    /// One attempt to fetch, as `CKSyncEngine.FetchChangesContext`.
    ///
    /// ```swift
    /// func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine) async -> SyncEngine.FetchChangesOptions {
    ///     context.options
    /// }
    /// ```
    public struct FetchChangesContext: Sendable {
        /// Scheduled by the engine, or asked for.
        public let reason: SyncReason
        /// The options of this fetch.
        public let options: FetchChangesOptions
    }

    /// What to send, as `CKSyncEngine.SendChangesOptions`: the delegate builds its batches from
    /// the pending changes the scope takes in.
    ///
    /// ```swift
    /// let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
    /// ```
    public struct SendChangesOptions: Sendable {
        /// Which changes to send.
        public enum Scope: Sendable, Equatable, CustomStringConvertible {
            /// Every pending change.
            case all
            /// The pending changes of every zone but these.
            case allExcluding([RecordZone.ID])
            /// The pending changes of these zones.
            case zoneIDs([RecordZone.ID])
            /// The pending changes of these records (no zone changes).
            case recordIDs([Record.ID])

            /// Whether the scope takes in the record `recordID`.
            public func contains(_ recordID: Record.ID) -> Bool {
                switch self {
                case .all: true
                case .allExcluding(let excluded): !excluded.contains(recordID.zoneID)
                case .zoneIDs(let included): included.contains(recordID.zoneID)
                case .recordIDs(let included): included.contains(recordID)
                }
            }

            /// Whether the scope takes in a pending change.
            public func contains(_ pendingChange: PendingRecordZoneChange) -> Bool {
                contains(pendingChange.recordID)
            }

            /// Whether zone changes of `zoneID` are sent under this scope (none under `.recordIDs`).
            func containsZone(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .allExcluding(let excluded): !excluded.contains(zoneID)
                case .zoneIDs(let included): included.contains(zoneID)
                case .recordIDs: false
                }
            }

            public var description: String {
                switch self {
                case .all: "all"
                case .allExcluding(let ids): "allExcluding(\(ids.map(\.zoneName)))"
                case .zoneIDs(let ids): "zoneIDs(\(ids.map(\.zoneName)))"
                case .recordIDs(let ids): "recordIDs(\(ids.count))"
                }
            }
        }

        /// Which changes to send.
        public var scope: Scope
        /// The group the engine's operations report under.
        public var operationGroup: OperationGroup

        /// Options for ``SyncEngine/sendChanges(_:)``: `.init(scope: .zoneIDs([zoneID]))`.
        public init(scope: Scope = .all, operationGroup: OperationGroup? = nil) {
            self.scope = scope
            self.operationGroup = operationGroup ?? OperationGroup()
        }
    }

    /// One attempt to send, as `CKSyncEngine.SendChangesContext`.
    ///
    /// ```swift
    /// let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
    /// ```
    public struct SendChangesContext: Sendable {
        /// Scheduled by the engine, or asked for.
        public let reason: SyncReason
        /// The options of this send; build batches only of changes its scope takes in.
        public let options: SendChangesOptions
    }

    /// The records to save and delete in one request, as `CKSyncEngine.RecordZoneChangeBatch`.
    ///
    /// ```swift
    /// return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
    ///     contacts[id.recordName]?.record()
    /// }
    /// ```
    public struct RecordZoneChangeBatch: Sendable, CustomStringConvertible {
        /// How many changes the pending-changes initializer puts in one batch (CloudKit's
        /// request limit).
        public static let maximumChangeCount = 400
        /// About how many bytes of records the pending-changes initializer puts in one batch.
        public static let maximumByteCount = 2_000_000

        /// The records to save, with the system fields of their last known version for an update.
        public var recordsToSave: [Record]
        /// The records to delete.
        public var recordIDsToDelete: [Record.ID]
        /// Whether the changes of one zone succeed or fail together (`batchRequestFailed` for the rest).
        public var atomicByZone: Bool

        /// A batch of the given pending changes, in order, until the batch is full: a save takes
        /// the record `recordProvider` gives (one it answers `nil` for is skipped). `nil` when
        /// there is nothing to send.
        public init?(pendingChanges: [PendingRecordZoneChange], recordProvider: @Sendable (Record.ID) async -> Record?) async {
            var saves: [Record] = []
            var deletes: [Record.ID] = []
            var bytes = 0
            for change in pendingChanges {
                if saves.count + deletes.count >= Self.maximumChangeCount || bytes >= Self.maximumByteCount { break }
                switch change {
                case .saveRecord(let id):
                    guard let record = await recordProvider(id) else { continue }
                    saves.append(record)
                    bytes += Record.fieldDataSize(of: record.fieldValues)
                case .deleteRecord(let id):
                    deletes.append(id)
                }
            }
            guard !saves.isEmpty || !deletes.isEmpty else { return nil }
            self.init(recordsToSave: saves, recordIDsToDelete: deletes)
        }

        /// A batch of exactly these changes.
        public init(recordsToSave: [Record] = [], recordIDsToDelete: [Record.ID] = [], atomicByZone: Bool = false) {
            self.recordsToSave = recordsToSave
            self.recordIDsToDelete = recordIDsToDelete
            self.atomicByZone = atomicByZone
        }

        public var description: String {
            "RecordZoneChangeBatch(\(recordsToSave.count) to save, \(recordIDsToDelete.count) to delete\(atomicByZone ? ", atomic by zone" : ""))"
        }
    }
}
