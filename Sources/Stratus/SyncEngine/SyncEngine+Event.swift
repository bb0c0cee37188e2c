import Foundation

extension SyncEngine {
    /// Something that happened while the engine synced, handed to
    /// ``SyncEngineDelegate/handleEvent(_:syncEngine:)`` one at a time, as `CKSyncEngine.Event`.
    ///
    /// ```swift
    /// switch event {
    /// case .stateUpdate(let update): saveState(update.stateSerialization)
    /// case .fetchedRecordZoneChanges(let changes): apply(changes.modifications, changes.deletions)
    /// case .sentRecordZoneChanges(let sent): handleFailures(sent.failedRecordSaves)
    /// default: break
    /// }
    /// ```
    public enum Event: Sendable, CustomStringConvertible {
        /// The state changed: keep its serialization with your data.
        case stateUpdate(StateUpdate)
        /// The user the database acts for changed since the state was last saved.
        case accountChange(AccountChange)
        /// Zones created, written to or deleted in the database.
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        /// A batch of one zone's record changes.
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        /// The result of sending a batch of zone changes.
        case sentDatabaseChanges(SentDatabaseChanges)
        /// The result of sending a batch of record changes.
        case sentRecordZoneChanges(SentRecordZoneChanges)
        /// A fetch begins.
        case willFetchChanges(WillFetchChanges)
        /// The fetch of one zone's changes begins.
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        /// The fetch of one zone's changes ended (with its error, if it failed).
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        /// A fetch ended.
        case didFetchChanges(DidFetchChanges)
        /// A send begins.
        case willSendChanges(WillSendChanges)
        /// A send ended.
        case didSendChanges(DidSendChanges)

        public var description: String {
            switch self {
            case .stateUpdate: "stateUpdate"
            case .accountChange(let event): "accountChange(\(event.changeType))"
            case .fetchedDatabaseChanges(let event): "fetchedDatabaseChanges(\(event.modifications.count) modification(s), \(event.deletions.count) deletion(s))"
            case .fetchedRecordZoneChanges(let event): "fetchedRecordZoneChanges(\(event.modifications.count) modification(s), \(event.deletions.count) deletion(s))"
            case .sentDatabaseChanges(let event): "sentDatabaseChanges(\(event.savedZones.count) saved, \(event.failedZoneSaves.count) failed, \(event.deletedZoneIDs.count) deleted, \(event.failedZoneDeletes.count) failed deletes)"
            case .sentRecordZoneChanges(let event): "sentRecordZoneChanges(\(event.savedRecords.count) saved, \(event.failedRecordSaves.count) failed, \(event.deletedRecordIDs.count) deleted, \(event.failedRecordDeletes.count) failed deletes)"
            case .willFetchChanges: "willFetchChanges"
            case .willFetchRecordZoneChanges(let event): "willFetchRecordZoneChanges(\(event.zoneID.zoneName))"
            case .didFetchRecordZoneChanges(let event): "didFetchRecordZoneChanges(\(event.zoneID.zoneName)\(event.error.map { ", \($0.code)" } ?? ""))"
            case .didFetchChanges: "didFetchChanges"
            case .willSendChanges: "willSendChanges"
            case .didSendChanges: "didSendChanges"
            }
        }

        /// The state to keep, as `CKSyncEngine.Event.StateUpdate`.
        public struct StateUpdate: Sendable {
            public let stateSerialization: State.Serialization
        }

        /// The signed-in user changed, as `CKSyncEngine.Event.AccountChange`. On a switch or a
        /// sign-out the engine has cleared its state (pending changes included).
        public struct AccountChange: Sendable {
            public enum ChangeType: Sendable, Equatable, CustomStringConvertible {
                /// The first sync with a user, or one after a sign-out.
                case signIn(currentUser: Record.ID)
                /// The database has no user any more.
                case signOut(previousUser: Record.ID)
                /// Another user than the state's.
                case switchAccounts(previousUser: Record.ID, currentUser: Record.ID)

                public var description: String {
                    switch self {
                    case .signIn(let user): "signIn(\(user.recordName))"
                    case .signOut(let user): "signOut(\(user.recordName))"
                    case .switchAccounts(let previous, let current): "switchAccounts(\(previous.recordName) → \(current.recordName))"
                    }
                }
            }

            public let changeType: ChangeType
        }

        /// Zone changes fetched, as `CKSyncEngine.Event.FetchedDatabaseChanges`.
        public struct FetchedDatabaseChanges: Sendable {
            public let modifications: [Database.DatabaseChange.Modification]
            public let deletions: [Database.DatabaseChange.Deletion]
        }

        /// One batch of a zone's record changes, as `CKSyncEngine.Event.FetchedRecordZoneChanges`.
        public struct FetchedRecordZoneChanges: Sendable {
            public let modifications: [Database.RecordZoneChange.Modification]
            public let deletions: [Database.RecordZoneChange.Deletion]
        }

        /// The outcome of a batch of zone changes, as `CKSyncEngine.Event.SentDatabaseChanges`.
        public struct SentDatabaseChanges: Sendable {
            public struct FailedZoneSave: Sendable, CustomStringConvertible {
                public let zone: RecordZone
                public let error: StratusError
                public var description: String { "\(zone.zoneID.zoneName): \(error.code)" }
            }

            public let savedZones: [RecordZone]
            public let failedZoneSaves: [FailedZoneSave]
            public let deletedZoneIDs: [RecordZone.ID]
            public let failedZoneDeletes: [RecordZone.ID: StratusError]
        }

        /// The outcome of a batch of record changes, as `CKSyncEngine.Event.SentRecordZoneChanges`.
        /// Keep each saved record's system fields (``Record/encodeSystemFields(with:)``) for the next save.
        public struct SentRecordZoneChanges: Sendable {
            public struct FailedRecordSave: Sendable, CustomStringConvertible {
                public let record: Record
                public let error: StratusError
                public var description: String { "\(record.recordID.recordName): \(error.code)" }
            }

            public let savedRecords: [Record]
            public let failedRecordSaves: [FailedRecordSave]
            public let deletedRecordIDs: [Record.ID]
            public let failedRecordDeletes: [Record.ID: StratusError]
        }

        public struct WillFetchChanges: Sendable {
            public let context: FetchChangesContext
        }

        public struct WillFetchRecordZoneChanges: Sendable {
            public let zoneID: RecordZone.ID
        }

        public struct DidFetchRecordZoneChanges: Sendable {
            public let zoneID: RecordZone.ID
            public let error: StratusError?
        }

        public struct DidFetchChanges: Sendable {
            public let context: FetchChangesContext
        }

        public struct WillSendChanges: Sendable {
            public let context: SendChangesContext
        }

        public struct DidSendChanges: Sendable {
            public let context: SendChangesContext
        }
    }
}
