import Stratus

// CloudKit's own names for Stratus's types, so that CloudKit code compiles with its
// `import CloudKit` and its `CK` names unchanged. Each name is an alias: `CKRecord` and `Record`
// are the same type, so a program may mix them, and values pass between files that import
// `CloudKit` and files that import `Stratus`.

/// `CKContainer`: ``Container``.
public typealias CKContainer = Container

/// `CKDatabase`: ``Database``.
public typealias CKDatabase = Database

/// `CKRecord`: ``Record``.
///
/// ```swift
/// import CloudKit
///
/// let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
/// record["title"] = "Water the plants" as CKRecordValue
/// ```
public typealias CKRecord = Record

/// `CKRecordZone`: ``RecordZone``.
public typealias CKRecordZone = RecordZone

/// `CKAsset`: ``Asset``.
public typealias CKAsset = Asset

/// `CKRecordValue`: ``RecordValue``.
public typealias CKRecordValue = RecordValue

/// `CKRecordValueProtocol`: ``RecordValueProtocol``.
public typealias CKRecordValueProtocol = RecordValueProtocol

/// `CKRecordKeyValueSetting`: ``RecordKeyValueSetting``.
public typealias CKRecordKeyValueSetting = RecordKeyValueSetting

/// `CKQuery`: ``Query``.
public typealias CKQuery = Query

/// `CKLocationSortDescriptor`: ``LocationSortDescriptor``.
public typealias CKLocationSortDescriptor = LocationSortDescriptor

/// `CKServerChangeToken`: ``ServerChangeToken``.
public typealias CKServerChangeToken = ServerChangeToken

/// `CKAccountStatus`: ``AccountStatus``.
public typealias CKAccountStatus = AccountStatus

/// `CKApplicationPermissions`: ``Container/ApplicationPermissions``.
public typealias CKApplicationPermissions = Container.ApplicationPermissions

/// `CKApplicationPermissionStatus`: ``Container/ApplicationPermissionStatus``.
public typealias CKApplicationPermissionStatus = Container.ApplicationPermissionStatus

/// `CKApplicationPermissionBlock`: ``Container/ApplicationPermissionBlock``.
public typealias CKApplicationPermissionBlock = Container.ApplicationPermissionBlock

/// `CKOperation`: ``DatabaseOperation``.
///
/// `Operation` is Foundation's; every Stratus operation is a ``DatabaseOperation``.
public typealias CKOperation = DatabaseOperation

/// `CKDatabaseOperation`: ``DatabaseOperation``.
public typealias CKDatabaseOperation = DatabaseOperation

/// `CKOperationGroup`: ``OperationGroup``.
public typealias CKOperationGroup = OperationGroup

/// `CKFetchRecordsOperation`: ``FetchRecordsOperation``.
public typealias CKFetchRecordsOperation = FetchRecordsOperation

/// `CKModifyRecordsOperation`: ``ModifyRecordsOperation``.
public typealias CKModifyRecordsOperation = ModifyRecordsOperation

/// `CKQueryOperation`: ``QueryOperation``.
public typealias CKQueryOperation = QueryOperation

/// `CKFetchRecordZonesOperation`: ``FetchRecordZonesOperation``.
public typealias CKFetchRecordZonesOperation = FetchRecordZonesOperation

/// `CKModifyRecordZonesOperation`: ``ModifyRecordZonesOperation``.
public typealias CKModifyRecordZonesOperation = ModifyRecordZonesOperation

/// `CKFetchRecordZoneChangesOperation`: ``FetchRecordZoneChangesOperation``.
public typealias CKFetchRecordZoneChangesOperation = FetchRecordZoneChangesOperation

/// `CKFetchDatabaseChangesOperation`: ``FetchDatabaseChangesOperation``.
public typealias CKFetchDatabaseChangesOperation = FetchDatabaseChangesOperation

/// `CKFetchSubscriptionsOperation`: ``FetchSubscriptionsOperation``.
public typealias CKFetchSubscriptionsOperation = FetchSubscriptionsOperation

/// `CKModifySubscriptionsOperation`: ``ModifySubscriptionsOperation``.
public typealias CKModifySubscriptionsOperation = ModifySubscriptionsOperation

/// `CKFetchNotificationChangesOperation`: ``FetchNotificationChangesOperation``.
public typealias CKFetchNotificationChangesOperation = FetchNotificationChangesOperation

/// `CKMarkNotificationsReadOperation`: ``MarkNotificationsReadOperation``.
public typealias CKMarkNotificationsReadOperation = MarkNotificationsReadOperation

/// `CKFetchShareMetadataOperation`: ``FetchShareMetadataOperation``.
public typealias CKFetchShareMetadataOperation = FetchShareMetadataOperation

/// `CKAcceptSharesOperation`: ``AcceptSharesOperation``.
public typealias CKAcceptSharesOperation = AcceptSharesOperation

/// `CKFetchShareParticipantsOperation`: ``FetchShareParticipantsOperation``.
public typealias CKFetchShareParticipantsOperation = FetchShareParticipantsOperation

/// `CKDiscoverUserIdentitiesOperation`: ``DiscoverUserIdentitiesOperation``.
public typealias CKDiscoverUserIdentitiesOperation = DiscoverUserIdentitiesOperation

/// `CKSubscription`: ``Subscription``.
public typealias CKSubscription = Subscription

/// `CKQuerySubscription`: ``QuerySubscription``.
public typealias CKQuerySubscription = QuerySubscription

/// `CKRecordZoneSubscription`: ``RecordZoneSubscription``.
public typealias CKRecordZoneSubscription = RecordZoneSubscription

/// `CKDatabaseSubscription`: ``DatabaseSubscription``.
public typealias CKDatabaseSubscription = DatabaseSubscription

/// `CKNotificationInfo`: ``NotificationInfo``.
///
/// The name before Swift 4.2 of `CKSubscription.NotificationInfo`.
public typealias CKNotificationInfo = NotificationInfo

/// `CKNotification`: ``StratusNotification``.
///
/// `Notification` is Foundation's.
public typealias CKNotification = StratusNotification

/// `CKQueryNotification`: ``QueryNotification``.
public typealias CKQueryNotification = QueryNotification

/// `CKRecordZoneNotification`: ``RecordZoneNotification``.
public typealias CKRecordZoneNotification = RecordZoneNotification

/// `CKDatabaseNotification`: ``DatabaseNotification``.
public typealias CKDatabaseNotification = DatabaseNotification

/// `CKNotificationID`: ``StratusNotification/ID``.
///
/// The name before Swift 4.2 of `CKNotification.ID`.
public typealias CKNotificationID = StratusNotification.ID

/// `CKShare`: ``Share``.
public typealias CKShare = Share

/// `CKUserIdentity`: ``UserIdentity``.
public typealias CKUserIdentity = UserIdentity

/// `CKSyncEngine`: ``SyncEngine``.
public typealias CKSyncEngine = SyncEngine

/// `CKSyncEngineDelegate`: ``SyncEngineDelegate``.
public typealias CKSyncEngineDelegate = SyncEngineDelegate

/// `CKError`: ``StratusError``.
///
/// Its codes, `userInfo` keys and accessors (`retryAfterSeconds`, `partialErrorsByItemID`, `serverRecord`, …) are CloudKit's.
///
/// ```swift
/// } catch let error as CKError where error.code == .serverRecordChanged {
///     let latest = error.serverRecord
/// }
/// ```
public typealias CKError = StratusError

/// `CKRecordID`: ``RecordID`` (Stratus names it without the prefix).
public typealias CKRecordID = RecordID

/// `CKRecordZoneID`: ``RecordZoneID`` (Stratus names it without the prefix).
public typealias CKRecordZoneID = RecordZoneID

/// `CKReference`: ``Reference`` (Stratus names it without the prefix).
public typealias CKReference = Reference

/// `CKReferenceAction`: ``ReferenceAction`` (Stratus names it without the prefix).
public typealias CKReferenceAction = ReferenceAction

/// `CKRecordSavePolicy`: ``RecordSavePolicy`` (Stratus names it without the prefix).
public typealias CKRecordSavePolicy = RecordSavePolicy

/// `CKQueryCursor`: ``QueryCursor``.
public typealias CKQueryCursor = QueryCursor

/// `CKDatabaseScope`: ``DatabaseScope`` (Stratus names it without the prefix).
public typealias CKDatabaseScope = DatabaseScope

/// `CKRecordZoneCapabilities`: ``RecordZoneCapabilities`` (Stratus names it without the prefix).
public typealias CKRecordZoneCapabilities = RecordZoneCapabilities

/// `CKQuerySubscriptionOptions`: ``QuerySubscriptionOptions`` (Stratus names it without the prefix).
public typealias CKQuerySubscriptionOptions = QuerySubscriptionOptions

/// `CKSubscriptionType`: ``SubscriptionType`` (Stratus names it without the prefix).
public typealias CKSubscriptionType = SubscriptionType

/// `CKNotificationType`: ``NotificationType`` (Stratus names it without the prefix).
public typealias CKNotificationType = NotificationType

/// `CKQueryNotificationReason`: ``QueryNotificationReason`` (Stratus names it without the prefix).
public typealias CKQueryNotificationReason = QueryNotificationReason

/// `CKFetchRecordZoneChangesOptions`: ``FetchRecordZoneChangesOptions`` (Stratus names it without the prefix).
public typealias CKFetchRecordZoneChangesOptions = FetchRecordZoneChangesOptions

/// `CKFetchRecordZoneChangesConfiguration`: ``FetchRecordZoneChangesConfiguration`` (Stratus names it without the prefix).
public typealias CKFetchRecordZoneChangesConfiguration = FetchRecordZoneChangesConfiguration

/// `CKRecord_Reference_Action`: ``Record_Reference_Action`` (Stratus names it without the prefix).
public typealias CKRecord_Reference_Action = Record_Reference_Action

/// `CKShareParticipant`: ``ShareParticipant`` (Stratus names it without the prefix).
public typealias CKShareParticipant = ShareParticipant

/// `CKShareParticipantPermission`: ``ShareParticipantPermission`` (Stratus names it without the prefix).
public typealias CKShareParticipantPermission = ShareParticipantPermission

/// `CKShareParticipantRole`: ``ShareParticipantRole`` (Stratus names it without the prefix).
public typealias CKShareParticipantRole = ShareParticipantRole

/// `CKShareParticipantType`: ``ShareParticipantType``, the deprecated form of the role.
public typealias CKShareParticipantType = ShareParticipantType

/// `CKShareParticipantAcceptanceStatus`: ``ShareParticipantAcceptanceStatus`` (Stratus names it without the prefix).
public typealias CKShareParticipantAcceptanceStatus = ShareParticipantAcceptanceStatus

/// `CKShareMetadata`: ``ShareMetadata`` (Stratus names it without the prefix).
public typealias CKShareMetadata = ShareMetadata

/// `CKUserIdentityLookupInfo`: ``UserIdentityLookupInfo`` (Stratus names it without the prefix).
public typealias CKUserIdentityLookupInfo = UserIdentityLookupInfo

/// `__CKRecordObjCValue`, the name Apple's `CKRecordValue` is an alias of, which
/// `setObject(_:forKey:)` and the record's subscript spell out: ``RecordValue``.
///
/// ```swift
/// record["title"] = "Water the plants" as? __CKRecordObjCValue
/// ```
public typealias __CKRecordObjCValue = RecordValue

/// `CKContainer_Application_Permissions`, the older name of `CKContainer.ApplicationPermissions`.
public typealias CKContainer_Application_Permissions = Container.ApplicationPermissions

/// `CKContainer_Application_PermissionStatus`, the older name of
/// `CKContainer.ApplicationPermissionStatus`.
///
/// ```swift
/// var status: CKContainer_Application_PermissionStatus = .initialState
/// ```
public typealias CKContainer_Application_PermissionStatus = Container.ApplicationPermissionStatus

/// `CKContainer_Application_PermissionBlock`, the older name of
/// `CKContainer.ApplicationPermissionBlock`.
public typealias CKContainer_Application_PermissionBlock = Container.ApplicationPermissionBlock

/// `CKShare_Participant_AcceptanceStatus`, the older name of `CKShare.ParticipantAcceptanceStatus`.
public typealias CKShare_Participant_AcceptanceStatus = Share.ParticipantAcceptanceStatus

/// `CKShare_Participant_Permission`, the older name of `CKShare.ParticipantPermission`.
public typealias CKShare_Participant_Permission = Share.ParticipantPermission

/// `CKShare_Participant_Role`, the older name of `CKShare.ParticipantRole`.
public typealias CKShare_Participant_Role = Share.ParticipantRole

/// `CKShare_Participant_Type`, the older name of `CKShare.ParticipantType`.
public typealias CKShare_Participant_Type = Share.ParticipantType

/// `CKRecordKeyValueIterator`: ``RecordKeyValueIterator``, what `for (key, value) in record`
/// iterates with.
public typealias CKRecordKeyValueIterator = RecordKeyValueIterator
