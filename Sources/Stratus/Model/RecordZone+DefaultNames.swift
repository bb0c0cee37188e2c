/// `CKCurrentUserDefaultName`: the owner name that means "the current user" in zone IDs.
///
/// ```swift
/// let zoneID = RecordZone.ID(zoneName: "Photos", ownerName: CurrentUserDefaultName)
/// ```
public let CurrentUserDefaultName = RecordZone.ID.currentUserDefaultOwner

/// `CKOwnerDefaultName`, CloudKit's older name for `CKCurrentUserDefaultName` (deprecated
/// there since iOS 10, still in the SDK, and in Apple's CloudKitCatalog sample and code of
/// its time): ``CurrentUserDefaultName``.
///
/// ```swift
/// let zoneID = RecordZoneID(zoneName: "Items", ownerName: OwnerDefaultName)
/// ```
public let OwnerDefaultName = CurrentUserDefaultName

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

/// `CKRecordNameZoneWideShare`: the record name of every zone-wide share, `cloudkit.zoneshare`
/// (``Share/zoneWideShareName``).
///
/// ```swift
/// let shareID = Record.ID(recordName: RecordNameZoneWideShare, zoneID: zone.zoneID)
/// ```
public let RecordNameZoneWideShare = Share.zoneWideShareName

/// `CKShareTitleKey`: the title of a share, `cloudkit.title` (``Share/SystemFieldKey/title``).
///
/// ```swift
/// share[ShareTitleKey] = "Groceries"
/// ```
public let ShareTitleKey = Share.SystemFieldKey.title

/// `CKShareThumbnailImageDataKey`: a share's thumbnail, `cloudkit.thumbnailImageData`
/// (``Share/SystemFieldKey/thumbnailImageData``).
public let ShareThumbnailImageDataKey = Share.SystemFieldKey.thumbnailImageData

/// `CKShareTypeKey`: what a share shares, `cloudkit.type` (``Share/SystemFieldKey/shareType``).
public let ShareTypeKey = Share.SystemFieldKey.shareType
