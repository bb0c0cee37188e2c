// CloudKit's names from before Swift 4.2 nested them (`CKRecordID`, `CKReference`, …), which
// tutorials and older libraries still use; with the `CK` prefix dropped they name Stratus's types.

/// `CKRecordID`: ``Record/ID``.
public typealias RecordID = Record.ID
/// `CKRecordZoneID`: ``RecordZone/ID``.
public typealias RecordZoneID = RecordZone.ID
/// `CKReference`: ``Record/Reference``.
public typealias Reference = Record.Reference
/// `CKReferenceAction`: ``Record/ReferenceAction``.
public typealias ReferenceAction = Record.ReferenceAction
/// `CKRecordSavePolicy`: ``ModifyRecordsOperation/SavePolicy``.
public typealias RecordSavePolicy = ModifyRecordsOperation.SavePolicy
