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
            case .fetchedRecordZoneChanges(let event): "fetchedRecordZoneChanges(\(event.counts))"
            case .sentDatabaseChanges(let event): "sentDatabaseChanges(\(event.counts))"
            case .sentRecordZoneChanges(let event): "sentRecordZoneChanges(\(event.counts))"
            case .willFetchChanges: "willFetchChanges"
            case .willFetchRecordZoneChanges(let event): "willFetchRecordZoneChanges(\(event.zoneID.zoneName))"
            case .didFetchRecordZoneChanges(let event): "didFetchRecordZoneChanges(\(event.zoneID.zoneName)\(event.error.map { ", \($0.code)" } ?? ""))"
            case .didFetchChanges: "didFetchChanges"
            case .willSendChanges: "willSendChanges"
            case .didSendChanges: "didSendChanges"
            }
        }

        /// The state to keep, as `CKSyncEngine.Event.StateUpdate`.
        ///
        /// ```swift
        /// case .stateUpdate(let update): try stateStore.save(update.stateSerialization)
        /// ```
        public struct StateUpdate: Sendable {
            /// The whole state as it is now; pass the last one to ``Configuration/stateSerialization``.
            public let stateSerialization: State.Serialization
        }

        /// The signed-in user changed, as `CKSyncEngine.Event.AccountChange`. On a switch or a
        /// sign-out the engine has cleared its state (pending changes included).
        ///
        /// ```swift
        /// case .accountChange(let change): if case .signOut = change.changeType { deleteLocalData() }
        /// ```
        public struct AccountChange: Sendable {
            /// How the user changed.
            ///
            /// ```swift
            /// if case .switchAccounts = change.changeType { clearLocalData() }
            /// ```
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

            /// Who signed in or out.
            public let changeType: ChangeType
        }

        /// Zone changes fetched, as `CKSyncEngine.Event.FetchedDatabaseChanges`.
        ///
        /// ```swift
        /// case .fetchedDatabaseChanges(let changes): for deletion in changes.deletions { dropZone(deletion.zoneID) }
        /// ```
        public struct FetchedDatabaseChanges: Sendable {
            /// Zones created or written to; the engine fetches their records next.
            public let modifications: [Database.DatabaseChange.Modification]
            /// Zones deleted: drop your copy of their records.
            public let deletions: [Database.DatabaseChange.Deletion]
        }

        /// One batch of a zone's record changes, as `CKSyncEngine.Event.FetchedRecordZoneChanges`.
        ///
        /// ```swift
        /// case .fetchedRecordZoneChanges(let changes):
        ///     for modification in changes.modifications { upsert(modification.record) }
        ///     for deletion in changes.deletions { remove(deletion.recordID) }
        /// ```
        public struct FetchedRecordZoneChanges: Sendable {
            /// Records saved since the zone's token, each in its current state (your own saves included).
            public let modifications: [Database.RecordZoneChange.Modification]
            /// Records deleted since the zone's token.
            public let deletions: [Database.RecordZoneChange.Deletion]
        }

        /// The outcome of a batch of zone changes, as `CKSyncEngine.Event.SentDatabaseChanges`.
        ///
        /// ```swift
        /// case .sentDatabaseChanges(let sent): for zone in sent.savedZones { markSaved(zone.zoneID) }
        /// ```
        public struct SentDatabaseChanges: Sendable {
            /// A zone the engine could not save, and why.
            ///
            /// ```swift
            /// for failure in sent.failedZoneSaves { print(failure.zone.zoneID.zoneName, failure.error.code) }
            /// ```
            public struct FailedZoneSave: Sendable, CustomStringConvertible {
                /// The zone as it was sent.
                public let zone: RecordZone
                /// Why the store refused it.
                public let error: StratusError
                public var description: String { "\(zone.zoneID.zoneName): \(error.code)" }
            }

            /// Zones created (or found already there).
            public let savedZones: [RecordZone]
            /// Zone saves that failed, with why.
            public let failedZoneSaves: [FailedZoneSave]
            /// Zones deleted.
            public let deletedZoneIDs: [RecordZone.ID]
            /// Zone deletions that failed, with why.
            public let failedZoneDeletes: [RecordZone.ID: StratusError]
        }

        /// The outcome of a batch of record changes, as `CKSyncEngine.Event.SentRecordZoneChanges`.
        /// Keep each saved record's system fields (``Record/encodeSystemFields(with:)``) for the next save.
        ///
        /// ```swift
        /// case .sentRecordZoneChanges(let sent): for record in sent.savedRecords { keepSystemFields(of: record) }
        /// ```
        public struct SentRecordZoneChanges: Sendable {
            /// A record the engine could not save, and why.
            ///
            /// ```swift
            /// for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
            ///     merge(failure.record, failure.error.serverRecord)
            /// }
            /// ```
            public struct FailedRecordSave: Sendable, CustomStringConvertible {
                /// The record as it was sent.
                public let record: Record
                /// Why the store refused it (`serverRecord` holds the stored record on a conflict).
                public let error: StratusError
                public var description: String { "\(record.recordID.recordName): \(error.code)" }
            }

            /// The records as stored, with their new change tags.
            public let savedRecords: [Record]
            /// Saves that failed, with the record sent and why (`serverRecord` on a conflict).
            public let failedRecordSaves: [FailedRecordSave]
            /// Records deleted.
            public let deletedRecordIDs: [Record.ID]
            /// Deletions that failed, with why.
            public let failedRecordDeletes: [Record.ID: StratusError]
        }

        /// The engine is about to fetch changes, as `CKSyncEngine.Event.WillFetchChanges`.
        ///
        /// ```swift
        /// case .willFetchChanges(let will): print("fetching,", will.context.reason == .manual ? "asked for" : "scheduled")
        /// ```
        public struct WillFetchChanges: Sendable {
            /// Why and what the engine fetches.
            public let context: FetchChangesContext
        }

        /// The engine is about to fetch one zone's record changes, as `CKSyncEngine.Event.WillFetchRecordZoneChanges`.
        ///
        /// ```swift
        /// case .willFetchRecordZoneChanges(let will): print("fetching", will.zoneID.zoneName)
        /// ```
        public struct WillFetchRecordZoneChanges: Sendable {
            /// The zone about to be fetched.
            public let zoneID: RecordZone.ID
        }

        /// The engine has fetched one zone's record changes, or stopped on an error, as `CKSyncEngine.Event.DidFetchRecordZoneChanges`.
        ///
        /// ```swift
        /// case .didFetchRecordZoneChanges(let did): if let error = did.error { print(did.zoneID.zoneName, error.code) }
        /// ```
        public struct DidFetchRecordZoneChanges: Sendable {
            /// The zone fetched.
            public let zoneID: RecordZone.ID
            /// Why the fetch ended early (`zoneNotFound` for a zone deleted meanwhile), or `nil`.
            public let error: StratusError?
        }

        /// The engine has finished a fetch, as `CKSyncEngine.Event.DidFetchChanges`.
        ///
        /// ```swift
        /// case .didFetchChanges: reloadList()
        /// ```
        public struct DidFetchChanges: Sendable {
            /// The context of the matching ``WillFetchChanges``.
            public let context: FetchChangesContext
        }

        /// The engine is about to send pending changes, as `CKSyncEngine.Event.WillSendChanges`.
        ///
        /// ```swift
        /// case .willSendChanges(let will): print("sending", will.context.options.scope)
        /// ```
        public struct WillSendChanges: Sendable {
            /// Why and what the engine sends.
            public let context: SendChangesContext
        }

        /// The engine has sent pending changes, as `CKSyncEngine.Event.DidSendChanges`.
        ///
        /// ```swift
        /// case .didSendChanges: showSynced()
        /// ```
        public struct DidSendChanges: Sendable {
            /// The context of the matching ``WillSendChanges``.
            public let context: SendChangesContext
        }
    }
}
