import Foundation
import Stratus

// CloudKit's constants under their own names; each is the value of Stratus's constant without
// the prefix (the strings are CloudKit's: `CKErrorDomain` is "CKErrorDomain").


/// `CKErrorDomain`: ``ErrorDomain``.
public let CKErrorDomain = ErrorDomain

/// `CKPartialErrorsByItemIDKey`: ``PartialErrorsByItemIDKey``.
public let CKPartialErrorsByItemIDKey = PartialErrorsByItemIDKey

/// `CKRecordChangedErrorAncestorRecordKey`: ``RecordChangedErrorAncestorRecordKey``.
public let CKRecordChangedErrorAncestorRecordKey = RecordChangedErrorAncestorRecordKey

/// `CKRecordChangedErrorServerRecordKey`: ``RecordChangedErrorServerRecordKey``.
public let CKRecordChangedErrorServerRecordKey = RecordChangedErrorServerRecordKey

/// `CKRecordChangedErrorClientRecordKey`: ``RecordChangedErrorClientRecordKey``.
public let CKRecordChangedErrorClientRecordKey = RecordChangedErrorClientRecordKey

/// `CKErrorRetryAfterKey`: ``ErrorRetryAfterKey``.
public let CKErrorRetryAfterKey = ErrorRetryAfterKey

/// `CKErrorUserDidResetEncryptedDataKey`: ``ErrorUserDidResetEncryptedDataKey``.
public let CKErrorUserDidResetEncryptedDataKey = ErrorUserDidResetEncryptedDataKey

/// `CKCurrentUserDefaultName`: ``CurrentUserDefaultName``.
public let CKCurrentUserDefaultName = CurrentUserDefaultName

/// `CKOwnerDefaultName`: ``OwnerDefaultName``.
public let CKOwnerDefaultName = OwnerDefaultName

/// `CKRecordZoneDefaultName`: ``RecordZoneDefaultName``.
public let CKRecordZoneDefaultName = RecordZoneDefaultName

/// `CKRecordTypeUserRecord`: ``RecordTypeUserRecord``.
public let CKRecordTypeUserRecord = RecordTypeUserRecord

/// `CKRecordTypeShare`: ``RecordTypeShare``.
public let CKRecordTypeShare = RecordTypeShare

/// `CKRecordNameZoneWideShare`: ``RecordNameZoneWideShare``.
public let CKRecordNameZoneWideShare = RecordNameZoneWideShare

/// `CKShareTitleKey`: ``ShareTitleKey``.
public let CKShareTitleKey = ShareTitleKey

/// `CKShareThumbnailImageDataKey`: ``ShareThumbnailImageDataKey``.
public let CKShareThumbnailImageDataKey = ShareThumbnailImageDataKey

/// `CKShareTypeKey`: ``ShareTypeKey``.
public let CKShareTypeKey = ShareTypeKey

/// `CKQueryOperationMaximumResults`: ``QueryOperationMaximumResults``.
public let CKQueryOperationMaximumResults = QueryOperationMaximumResults

extension Notification.Name {
    /// `.CKAccountChanged`: ``Foundation/Notification/Name/AccountChanged``, which Stratus never
    /// posts (a container acts as one user for as long as it is open).
    ///
    /// ```swift
    /// _ = NotificationCenter.default.addObserver(forName: .CKAccountChanged, object: nil, queue: .main) { _ in }
    /// ```
    public static let CKAccountChanged = Notification.Name.AccountChanged
}
