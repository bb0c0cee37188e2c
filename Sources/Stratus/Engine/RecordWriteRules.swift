import Foundation

/// CloudKit's rules for what a save stores, shared by every engine so they agree exactly.
///
/// An engine reads the stored record inside its transaction, asks ``resolveSave(_:existing:policy:context:now:)``
/// what to write, and writes that (after storing asset bytes).
///
/// ```swift
/// switch RecordWriteRules.resolveSave(incoming, existing: stored, policy: .ifServerRecordUnchanged, context: ctx, now: Date()) {
/// case .success(let toStore): write(toStore)
/// case .failure(let error): report(error)
/// }
/// ```
public enum RecordWriteRules {
    /// The record to store for `incoming`, or the per-item error CloudKit would report.
    ///
    /// - `.ifServerRecordUnchanged`: the client's change tag must equal the stored one; a new
    ///   record (no tag) must not exist yet. Otherwise `serverRecordChanged` with the server
    ///   and client records. The changed keys are applied.
    /// - `.changedKeys`: no tag check; only the client's changed keys are written.
    /// - `.allKeys`: no tag check; the stored fields are replaced by every key the client has.
    public static func resolveSave(
        _ incoming: Record, existing: Record?, policy: ModifyRecordsOperation.SavePolicy,
        context: DatabaseContext, now: Date
    ) -> Result<Record, StratusError> {
        if let existing, existing.recordType != incoming.recordType {
            return .failure(StratusError(.invalidArguments, "record '\(incoming.recordID.recordName)' exists with type '\(existing.recordType)', not '\(incoming.recordType)'", recordID: incoming.recordID))
        }
        if policy == .ifServerRecordUnchanged {
            switch (existing, incoming.recordChangeTag) {
            case (nil, let tag?):
                return .failure(StratusError(.unknownItem, "record '\(incoming.recordID.recordName)' with change tag \(tag) no longer exists", recordID: incoming.recordID))
            case (let server?, nil):
                return .failure(conflict(incoming, server: server, "record '\(incoming.recordID.recordName)' already exists; fetch it and save the fetched record, or use the .allKeys or .changedKeys save policy"))
            case (let server?, let tag?) where server.recordChangeTag != tag:
                return .failure(conflict(incoming, server: server, "record '\(incoming.recordID.recordName)' was changed by someone else (change tag \(tag) is stale; the store has \(server.recordChangeTag ?? "none"))"))
            default: break
            }
        }
        var fields: [String: FieldValue]
        if let existing, policy != .allKeys {
            fields = existing.fieldValues
            let changes = incoming.fieldValues
            for key in incoming.changedKeys() { fields[key] = changes[key] }
        } else {
            fields = incoming.fieldValues
        }
        let system = Record.SystemFields(
            creationDate: existing?.creationDate ?? now,
            modificationDate: now,
            creatorUserRecordID: existing?.creatorUserRecordID ?? context.userRecordID,
            lastModifiedUserRecordID: context.userRecordID,
            recordChangeTag: newChangeTag()
        )
        return .success(Record(recordType: incoming.recordType, recordID: incoming.recordID, systemFields: system, fields: fields))
    }

    private static func conflict(_ client: Record, server: Record, _ message: String) -> StratusError {
        var error = StratusError(.serverRecordChanged, message, recordID: client.recordID)
        error.serverRecord = server
        error.clientRecord = client
        return error
    }

    /// A fresh, unguessable change tag (like CloudKit's short base-36 tags).
    public static func newChangeTag() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() & 0x7FFF_FFFF_FFFF_FFFF, radix: 36)
    }
}
