/// The caller's own user record: CloudKit's `Users` record of the public database, named by the
/// user's record name, in the default zone.
///
/// CloudKit makes one for each user of an app, empty at first; the user may write it and others
/// may read it, and no save creates one. Stratus makes it when its user first needs it, as the
/// system does: when the user fetches it (``FetchRecordsOperation``) or saves it
/// (``ModifyRecordsOperation``) and it is not stored yet. It is then an ordinary stored record,
/// whose creator and modifier are its user, with a change tag, in the change feed of the public
/// default zone, firing the subscriptions its creation matches. Another user's record that was
/// never made is not found (`unknownItem`): Stratus cannot tell a user of the app from a name.
///
/// Policy above the engine line: the record is written through ``RecordWriteExecutor`` as a
/// system record (``ModifyRequest/writesSystemRecords``), which the security roles do not refuse.
///
/// ```swift
/// if let id = CurrentUserRecord.id(of: recordID, in: context) {
///     let made = try CurrentUserRecord.make(id, engine: engine, context: context)
/// }
/// ```
enum CurrentUserRecord {
    /// `id` when it names the caller's own user record in `context`'s database: the public
    /// database, its default zone, the caller's record name; `nil` otherwise, and for a caller
    /// who is not signed in (who has no user record) or an administrator (who acts for no user).
    static func id(of id: Record.ID, in context: DatabaseContext) -> Record.ID? {
        guard context.scope == .public, !context.isAdministrator, let name = context.userRecordName,
              id.recordName == name, id.zoneID.isDefault else { return nil }
        return id
    }

    /// The caller's own user record ID for `id` when `id` names it by CloudKit's alias,
    /// `__defaultOwner__` (`CurrentUserDefaultName`) in the public database's default zone, as
    /// `CKRecord.ID(recordName: CKCurrentUserDefaultName)` does; `id` otherwise.
    static func resolving(_ id: Record.ID, in context: DatabaseContext) -> Record.ID {
        guard id.recordName == RecordZone.ID.currentUserDefaultOwner, context.scope == .public, !context.isAdministrator,
              id.zoneID.isDefault, let me = context.userRecordID else { return id }
        return me
    }

    /// Makes the caller's user record `id` (``id(of:in:)``) unless it is stored, and answers it
    /// as stored; a record made meanwhile by another process is answered as it is. With a
    /// `simulation`, the record is made there (a dry run), not in the store.
    ///
    /// - Returns: the record, or the error that kept it from being made (the record's own).
    /// - Throws: store failures (busy, read-only, disk full).
    static func make(_ id: Record.ID, engine: any StorageEngine, context: DatabaseContext, simulation: WriteSimulation? = nil) throws -> Result<Record, StratusError> {
        let empty = Record(recordType: ContainerSchema.usersRecordType, recordID: id)
        let save: PreparedSave
        do {
            save = try PreparedSave(empty, writeMode: .create)
        } catch {
            return .failure(error)
        }
        var request = ModifyRequest(saves: [save], writeMode: .create, isAtomic: false)
        request.writesSystemRecords = true
        request.simulation = simulation
        let outcome = try RecordWriteExecutor.apply(request, engine: engine, context: context)
        switch outcome.saveResults.first {
        case .success(let (stored, _))?:
            return .success(stored)
        case .failure(let error)? where error.code == .serverRecordChanged:
            // Stored already (made by a fetch in another process, or restored by an import).
            guard let stored = error.serverRecord else { return .failure(error) }
            return .success(stored)
        case .failure(let error)?:
            return .failure(error)
        case nil:
            return .failure(StratusError(.internalError, "no result for the user record '\(id.recordName)'", recordID: id))
        }
    }
}
