// Every type the engine hands a delegate prints itself, as CloudKit's do: apps log
// `event.context.reason.description` and the like (sqlite-data's event logger does).

extension SyncEngine.SyncReason: CustomStringConvertible {
    /// `scheduled` or `manual`.
    ///
    /// ```swift
    /// print("fetching (\(context.reason))")
    /// ```
    public var description: String {
        switch self {
        case .scheduled: "scheduled"
        case .manual: "manual"
        }
    }
}

extension SyncEngine.FetchChangesOptions: CustomStringConvertible {
    /// The scope, and the zones fetched first when there are any.
    public var description: String {
        "FetchChangesOptions(scope: \(scope)\(prioritizedZoneIDs.isEmpty ? "" : ", prioritizedZoneIDs: \(prioritizedZoneIDs.map(\.zoneName))"))"
    }
}

extension SyncEngine.FetchChangesContext: CustomStringConvertible {
    /// Why the engine fetches, and what.
    public var description: String { "FetchChangesContext(reason: \(reason), options: \(options))" }
}

extension SyncEngine.SendChangesOptions: CustomStringConvertible {
    /// The scope of the send.
    public var description: String { "SendChangesOptions(scope: \(scope))" }
}

extension SyncEngine.SendChangesContext: CustomStringConvertible {
    /// Why the engine sends, and what.
    public var description: String { "SendChangesContext(reason: \(reason), options: \(options))" }
}

extension SyncEngine.Event.StateUpdate: CustomStringConvertible {
    /// The size of the state to keep.
    public var description: String { "StateUpdate(\(stateSerialization))" }
}

extension SyncEngine.Event.AccountChange: CustomStringConvertible {
    /// Who signed in or out.
    public var description: String { "AccountChange(\(changeType))" }
}

extension SyncEngine.Event.FetchedDatabaseChanges: CustomStringConvertible {
    /// The zones changed and deleted, by name.
    public var description: String {
        "FetchedDatabaseChanges(modifications: \(modifications.map(\.zoneID.zoneName)), deletions: \(deletions.map(\.zoneID.zoneName)))"
    }
}

extension SyncEngine.Event.FetchedRecordZoneChanges: CustomStringConvertible {
    /// How many records changed and were deleted.
    public var description: String { "FetchedRecordZoneChanges(\(counts))" }

    /// What the event's and this description say: how many of each.
    var counts: String { "\(modifications.count) modification(s), \(deletions.count) deletion(s)" }
}

extension SyncEngine.Event.SentDatabaseChanges: CustomStringConvertible {
    /// How many zone saves and deletions succeeded and failed.
    public var description: String { "SentDatabaseChanges(\(counts))" }

    /// What the event's and this description say: how many of each.
    var counts: String { "\(savedZones.count) saved, \(failedZoneSaves.count) failed, \(deletedZoneIDs.count) deleted, \(failedZoneDeletes.count) failed deletes" }
}

extension SyncEngine.Event.SentRecordZoneChanges: CustomStringConvertible {
    /// How many record saves and deletions succeeded and failed.
    public var description: String { "SentRecordZoneChanges(\(counts))" }

    /// What the event's and this description say: how many of each.
    var counts: String { "\(savedRecords.count) saved, \(failedRecordSaves.count) failed, \(deletedRecordIDs.count) deleted, \(failedRecordDeletes.count) failed deletes" }
}

extension SyncEngine.Event.WillFetchChanges: CustomStringConvertible {
    /// The fetch's context.
    public var description: String { "WillFetchChanges(\(context))" }
}

extension SyncEngine.Event.DidFetchChanges: CustomStringConvertible {
    /// The fetch's context.
    public var description: String { "DidFetchChanges(\(context))" }
}

extension SyncEngine.Event.WillFetchRecordZoneChanges: CustomStringConvertible {
    /// The zone about to be fetched.
    public var description: String { "WillFetchRecordZoneChanges(\(zoneID.zoneName))" }
}

extension SyncEngine.Event.DidFetchRecordZoneChanges: CustomStringConvertible {
    /// The zone fetched, and the error the fetch ended with.
    public var description: String { "DidFetchRecordZoneChanges(\(zoneID.zoneName)\(error.map { ", \($0.code)" } ?? ""))" }
}

extension SyncEngine.Event.WillSendChanges: CustomStringConvertible {
    /// The send's context.
    public var description: String { "WillSendChanges(\(context))" }
}

extension SyncEngine.Event.DidSendChanges: CustomStringConvertible {
    /// The send's context.
    public var description: String { "DidSendChanges(\(context))" }
}
