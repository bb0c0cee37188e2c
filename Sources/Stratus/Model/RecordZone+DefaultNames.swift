/// `CKCurrentUserDefaultName`: the owner name that means "the current user" in zone IDs.
///
/// ```swift
/// let zoneID = RecordZone.ID(zoneName: "Photos", ownerName: CurrentUserDefaultName)
/// ```
public let CurrentUserDefaultName = RecordZone.ID.currentUserDefaultOwner

/// `CKRecordZoneDefaultName`: the name of every database's default zone, `_defaultZone`.
public let RecordZoneDefaultName = RecordZone.ID.defaultZoneName

/// `CKRecordTypeUserRecord`: the record type of user records, `Users`.
public let RecordTypeUserRecord = "Users"
