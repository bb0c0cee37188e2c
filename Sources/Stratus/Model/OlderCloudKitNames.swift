// CloudKit's names from before Swift 4.2 nested them (`CKRecordID`, `CKReference`, …), which
// tutorials and older libraries still use; with the `CK` prefix dropped they name Stratus's types.

// `CKRecordID` and `CKRecordZoneID` are the classes themselves: ``RecordID``, ``RecordZoneID``.
/// `CKReference`: ``Record/Reference``.
public typealias Reference = Record.Reference
/// `CKReferenceAction`: ``Record/ReferenceAction``.
public typealias ReferenceAction = Record.ReferenceAction
/// `CKRecordSavePolicy`: ``ModifyRecordsOperation/SavePolicy``.
public typealias RecordSavePolicy = ModifyRecordsOperation.SavePolicy
/// `CKDatabaseScope`: ``Database/Scope``.
///
/// ```swift
/// let database = container.database(with: DatabaseScope.private)
/// ```
public typealias DatabaseScope = Database.Scope
/// `CKRecordZoneCapabilities`: ``RecordZone/Capabilities``.
public typealias RecordZoneCapabilities = RecordZone.Capabilities
/// `CKQuerySubscriptionOptions`: ``QuerySubscription/Options``.
///
/// ```swift
/// let options: QuerySubscriptionOptions = [.firesOnRecordCreation, .firesOnRecordUpdate]
/// ```
public typealias QuerySubscriptionOptions = QuerySubscription.Options
/// `CKSubscriptionType`: ``Subscription/SubscriptionType``.
public typealias SubscriptionType = Subscription.SubscriptionType
/// `CKNotificationType`: ``StratusNotification/NotificationType``.
public typealias NotificationType = StratusNotification.NotificationType
/// `CKQueryNotificationReason`: ``QueryNotification/Reason``.
public typealias QueryNotificationReason = QueryNotification.Reason
/// `CKFetchRecordZoneChangesOptions`: ``FetchRecordZoneChangesOperation/ZoneOptions``.
///
/// ```swift
/// let options = FetchRecordZoneChangesOptions()
/// options.previousServerChangeToken = token
/// ```
public typealias FetchRecordZoneChangesOptions = FetchRecordZoneChangesOperation.ZoneOptions
/// `CKFetchRecordZoneChangesConfiguration`: ``FetchRecordZoneChangesOperation/ZoneConfiguration``.
public typealias FetchRecordZoneChangesConfiguration = FetchRecordZoneChangesOperation.ZoneConfiguration
/// `CKRecord_Reference_Action`, the Objective-C name of `CKRecord.Reference.Action` that Swift
/// code sometimes spells out (CloudCore's relationship mapping does): ``Record/ReferenceAction``.
///
/// ```swift
/// let action: Record_Reference_Action = cascades ? .deleteSelf : .none
/// ```
public typealias Record_Reference_Action = Record.ReferenceAction
/// `CKShareParticipantPermission`: ``Share/ParticipantPermission``.
public typealias ShareParticipantPermission = Share.ParticipantPermission
/// `CKShareParticipantRole`: ``Share/ParticipantRole``.
public typealias ShareParticipantRole = Share.ParticipantRole
/// `CKShareParticipantType`'s name here: ``Share/ParticipantType``.
public typealias ShareParticipantType = Share.ParticipantType
/// `CKShareParticipantAcceptanceStatus`: ``Share/ParticipantAcceptanceStatus``.
public typealias ShareParticipantAcceptanceStatus = Share.ParticipantAcceptanceStatus
