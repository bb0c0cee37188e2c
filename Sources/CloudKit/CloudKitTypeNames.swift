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

/// `CKShareParticipantAcceptanceStatus`: ``ShareParticipantAcceptanceStatus`` (Stratus names it without the prefix).
public typealias CKShareParticipantAcceptanceStatus = ShareParticipantAcceptanceStatus

/// `CKShareMetadata`: ``ShareMetadata`` (Stratus names it without the prefix).
public typealias CKShareMetadata = ShareMetadata

/// `CKUserIdentityLookupInfo`: ``UserIdentityLookupInfo`` (Stratus names it without the prefix).
public typealias CKUserIdentityLookupInfo = UserIdentityLookupInfo
