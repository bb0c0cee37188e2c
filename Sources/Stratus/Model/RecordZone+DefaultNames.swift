/// `CKCurrentUserDefaultName`: the owner name that means "the current user" in zone IDs.
///
/// ```swift
/// let zoneID = RecordZone.ID(zoneName: "Photos", ownerName: CurrentUserDefaultName)
/// ```
public let CurrentUserDefaultName = RecordZone.ID.currentUserDefaultOwner

/// `CKRecordZoneDefaultName`: the name of every database's default zone, `_defaultZone`.
public let RecordZoneDefaultName = RecordZone.ID.defaultZoneName

/// `CKRecordTypeUserRecord`: the record type of user records, `Users`
/// (``Record/SystemType/userRecord``).
///
/// ```swift
/// let isUser = record.recordType == RecordTypeUserRecord
/// ```
public let RecordTypeUserRecord = Record.SystemType.userRecord

/// `CKRecordTypeShare`: the record type of share records, `cloudkit.share`
/// (``Record/SystemType/share``).
///
/// ```swift
/// let isShare = record.recordType == RecordTypeShare
/// ```
public let RecordTypeShare = Record.SystemType.share
