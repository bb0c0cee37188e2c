import Foundation

// MARK: - CloudKit's error domain and userInfo keys

/// The domain of every Stratus error bridged to `NSError`: CloudKit's `CKErrorDomain`, so that
/// code checking `(error as NSError).domain == CKErrorDomain` keeps working after a port.
///
/// ```swift
/// let nsError = error as NSError
/// if nsError.domain == ErrorDomain && nsError.code == StratusError.Code.zoneBusy.rawValue { retryLater() }
/// ```
public let ErrorDomain = "CKErrorDomain"

/// `CKPartialErrorsByItemIDKey` (the string CloudKit's is: `"CKPartialErrors"`, as code that
/// reads `userInfo` by the literal expects): in a `partialFailure`'s `userInfo`, a dictionary from each
/// failed item's ID (a ``Record/ID`` or a ``RecordZone/ID``) to its error.
public let PartialErrorsByItemIDKey = "CKPartialErrors"

/// `CKRecordChangedErrorAncestorRecordKey`: in a `serverRecordChanged` error, the record the
/// client's change was based on.
public let RecordChangedErrorAncestorRecordKey = "AncestorRecord"

/// `CKRecordChangedErrorServerRecordKey`: in a `serverRecordChanged` error, the record as stored.
public let RecordChangedErrorServerRecordKey = "ServerRecord"

/// `CKRecordChangedErrorClientRecordKey`: in a `serverRecordChanged` error, the record the
/// client tried to save.
public let RecordChangedErrorClientRecordKey = "ClientRecord"

/// `CKErrorRetryAfterKey` (CloudKit's string, `"CKRetryAfter"`): seconds to wait before trying
/// again, an `NSNumber` (a `Double`).
public let ErrorRetryAfterKey = "CKRetryAfter"

/// `CKErrorUserDidResetEncryptedDataKey`. Stratus never sets it: its stores have no
/// account-level encryption keys to reset.
public let ErrorUserDidResetEncryptedDataKey = "CKErrorUserDidResetEncryptedDataKey"

// MARK: - Bridging to NSError

/// A ``StratusError`` is a `CKError` when seen as an `NSError`: the same domain, code numbers,
/// `userInfo` keys, and the message as `localizedDescription`.
///
/// As `CKError`, it conforms to `CustomNSError` and not to `LocalizedError`, so an app may add
/// that conformance with its own `errorDescription` (its text for each code), as CloudKit apps
/// do; `localizedDescription` stays the message.
///
/// ```swift
/// database.save(record) { saved, error in
///     guard let error = error as NSError?, error.domain == ErrorDomain else { return }
///     if let seconds = error.userInfo[ErrorRetryAfterKey] as? Double { retry(after: seconds) }
///     print(error.code, error.localizedDescription)
/// }
/// ```
extension StratusError: CustomNSError {
    /// `CKErrorDomain`.
    public static var errorDomain: String { ErrorDomain }

    /// CloudKit's number for the code (`CKError.Code.rawValue`).
    public var errorCode: Int { code.rawValue }

    /// The `userInfo` a `CKError` carries: `NSLocalizedDescriptionKey` (the message),
    /// ``ErrorRetryAfterKey`` (an `NSNumber`), ``PartialErrorsByItemIDKey`` (item IDs to errors),
    /// the three record-changed keys, `NSUnderlyingErrorKey` when there is one, and every
    /// other key the error was built with (``init(_:userInfo:)``).
    public var errorUserInfo: [String: Any] {
        var info = keptUserInfo?.entries ?? [:]
        info[NSLocalizedDescriptionKey] = message
        if let retryAfterSeconds { info[ErrorRetryAfterKey] = NSNumber(value: retryAfterSeconds) }
        if let partialErrorsByItemID { info[PartialErrorsByItemIDKey] = partialErrorsByItemID }
        if let serverRecord { info[RecordChangedErrorServerRecordKey] = serverRecord }
        if let clientRecord { info[RecordChangedErrorClientRecordKey] = clientRecord }
        if let ancestorRecord { info[RecordChangedErrorAncestorRecordKey] = ancestorRecord }
        if let underlyingError { info[NSUnderlyingErrorKey] = underlyingError as NSError }
        return info
    }

    /// The `userInfo` dictionary, as `CKError.userInfo` offers it.
    public var userInfo: [String: Any] { errorUserInfo }

    /// The `userInfo` as an `NSDictionary`, answering the standard library's `Error._userInfo`
    /// as a `CKError` does on Apple's platforms.
    ///
    /// Older CloudKit code reads an error's retry delay through it, for any `Error`. On Linux the
    /// standard library answers `nil` for every Swift error and swift-corelibs-foundation does not
    /// fill it in for `CustomNSError`s, so without this such code never sees the delay.
    ///
    /// ```swift
    /// if let userInfo = error._userInfo as? NSDictionary,
    ///    let seconds = userInfo[ErrorRetryAfterKey] as? NSNumber {
    ///     scheduleRetry(after: Double(truncating: seconds))
    /// }
    /// ```
    public var _userInfo: AnyObject? { NSDictionary(dictionary: errorUserInfo) }

    /// For a `partialFailure`: each failed item's error, keyed by its ``Record/ID`` (record
    /// operations) or ``RecordZone/ID`` (zone operations), as `CKError.partialErrorsByItemID`;
    /// `nil` when no item failed on its own.
    ///
    /// ```swift
    /// for (id, itemError) in error.partialErrorsByItemID ?? [:] {
    ///     if let recordID = id as? Record.ID, (itemError as? StratusError)?.code == .serverRecordChanged { merge(recordID) }
    /// }
    /// ```
    public var partialErrorsByItemID: [AnyHashable: any Error]? {
        if partialErrorsByRecordID.isEmpty && partialErrorsByZoneID.isEmpty && partialErrorsBySubscriptionID.isEmpty && partialErrorsByNotificationID.isEmpty
            && (keptUserInfo?.otherPartialErrors.isEmpty ?? true) { return nil }
        var errors: [AnyHashable: any Error] = [:]
        errors.reserveCapacity(partialErrorsByRecordID.count + partialErrorsByZoneID.count)
        for (id, error) in partialErrorsByRecordID { errors[AnyHashable(id)] = error }
        for (id, error) in partialErrorsByZoneID { errors[AnyHashable(id)] = error }
        for (id, error) in partialErrorsBySubscriptionID { errors[AnyHashable(id)] = error }
        for (id, error) in partialErrorsByNotificationID { errors[AnyHashable(id)] = error }
        for (id, error) in keptUserInfo?.otherPartialErrors ?? [:] where errors[id] == nil { errors[id] = error }
        return errors
    }

    /// Creates an error as `CKError(_:userInfo:)` does, keeping every `userInfo` entry.
    ///
    /// CloudKit's keys fill the error's properties: the message from `NSLocalizedDescriptionKey`
    /// (else the code's name), ``retryAfterSeconds`` from ``ErrorRetryAfterKey`` (a `Double`,
    /// an `Int` or any number, or an `NSNumber`, as CloudKit code writes it),
    /// ``PartialErrorsByItemIDKey`` (keys that are ``Record/ID``s, ``RecordZone/ID``s,
    /// subscription or notification IDs), the record-changed keys and `NSUnderlyingErrorKey`.
    /// Every other entry, and a known key whose value is not of a type it takes, is kept as
    /// given: ``userInfo`` and the bridged `NSError` give it back. Test doubles of sync code use this.
    ///
    /// ```swift
    /// let busy = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 2, "attempt": 3])
    /// busy.retryAfterSeconds          // 2.0
    /// busy.userInfo["attempt"]        // 3
    /// ```
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.init(code, userInfo[NSLocalizedDescriptionKey] as? String ?? "\(code)")
        var kept = userInfo
        if userInfo[NSLocalizedDescriptionKey] is String { kept[NSLocalizedDescriptionKey] = nil }
        if let value = userInfo[ErrorRetryAfterKey], let seconds = Self.seconds(value) {
            retryAfterSeconds = seconds
            kept[ErrorRetryAfterKey] = nil
        }
        var otherPartialErrors: [AnyHashable: any Error] = [:]
        if let partial = userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: any Error] {
            kept[PartialErrorsByItemIDKey] = nil
            for (key, error) in partial {
                if let id = key.base as? Record.ID {
                    partialErrorsByRecordID[id] = StratusError(bridging: error)
                } else if let id = key.base as? RecordZone.ID {
                    partialErrorsByZoneID[id] = StratusError(bridging: error)
                } else if let id = key.base as? Subscription.ID {
                    partialErrorsBySubscriptionID[id] = StratusError(bridging: error)
                } else if let id = key.base as? StratusNotification.ID {
                    partialErrorsByNotificationID[id] = StratusError(bridging: error)
                } else {
                    // An item ID of a kind Stratus has no property for: kept as given.
                    otherPartialErrors[key] = error
                }
            }
        }
        if let record = userInfo[RecordChangedErrorServerRecordKey] as? Record { serverRecord = record; kept[RecordChangedErrorServerRecordKey] = nil }
        if let record = userInfo[RecordChangedErrorClientRecordKey] as? Record { clientRecord = record; kept[RecordChangedErrorClientRecordKey] = nil }
        if let record = userInfo[RecordChangedErrorAncestorRecordKey] as? Record { ancestorRecord = record; kept[RecordChangedErrorAncestorRecordKey] = nil }
        if let error = userInfo[NSUnderlyingErrorKey] as? any Error { underlyingError = error; kept[NSUnderlyingErrorKey] = nil }
        if !kept.isEmpty || !otherPartialErrors.isEmpty { keptUserInfo = KeptUserInfo(entries: kept, otherPartialErrors: otherPartialErrors) }
    }

    /// Seconds given as CloudKit code gives ``ErrorRetryAfterKey``: a `Double`, an `Int` (or
    /// any integer or floating-point number), or an `NSNumber`.
    static func seconds(_ value: Any) -> Double? {
        switch value {
        case let seconds as Double: seconds
        case let seconds as Int: Double(seconds)
        case let number as NSNumber: number.doubleValue
        case let seconds as any BinaryInteger: Double(seconds)
        case let seconds as any BinaryFloatingPoint: Double(seconds)
        default: nil
        }
    }

    /// The error as a ``StratusError``: itself, the same error after a trip through `NSError`
    /// (domain `CKErrorDomain`), or any other error as `internalError`.
    ///
    /// ```swift
    /// let error = StratusError(bridging: nsError)      // nsError.domain == ErrorDomain
    /// ```
    public init(bridging error: any Error) {
        if let error = error as? StratusError {
            self = error
            return
        }
        let nsError = error as NSError
        if nsError.domain == ErrorDomain {
            self.init(Code(rawValue: nsError.code) ?? .internalError, userInfo: nsError.userInfo)
        } else {
            self.init(.internalError, String(describing: error))
            underlyingError = error
        }
    }

    /// The error an `NSError` of domain `CKErrorDomain` carries, as `CKError(_nsError:)`: its
    /// code and CloudKit's `userInfo` keys (see ``init(bridging:)``; an error of another domain
    /// becomes `internalError`, where CloudKit's initializer traps).
    ///
    /// ```swift
    /// let error = StratusError(_nsError: NSError(domain: ErrorDomain, code: StratusError.Code.networkFailure.rawValue,
    ///                                            userInfo: [ErrorRetryAfterKey: 1.5]))
    /// ```
    public init(_nsError error: NSError) {
        self.init(bridging: error)
    }
}

extension StratusError {
    /// Every code as a static member of the error type, as `CKError` has them, so that
    /// `catch StratusError.unknownItem` matches by code.
    ///
    /// ```swift
    /// do { _ = try await database.record(for: id) } catch StratusError.unknownItem { print("gone") }
    /// ```
    public static var internalError: Code { .internalError }
    public static var partialFailure: Code { .partialFailure }
    public static var networkUnavailable: Code { .networkUnavailable }
    public static var networkFailure: Code { .networkFailure }
    public static var badContainer: Code { .badContainer }
    public static var serviceUnavailable: Code { .serviceUnavailable }
    public static var requestRateLimited: Code { .requestRateLimited }
    public static var missingEntitlement: Code { .missingEntitlement }
    public static var notAuthenticated: Code { .notAuthenticated }
    public static var permissionFailure: Code { .permissionFailure }
    public static var unknownItem: Code { .unknownItem }
    public static var invalidArguments: Code { .invalidArguments }
    public static var resultsTruncated: Code { .resultsTruncated }
    public static var serverRecordChanged: Code { .serverRecordChanged }
    public static var serverRejectedRequest: Code { .serverRejectedRequest }
    public static var assetFileNotFound: Code { .assetFileNotFound }
    public static var assetFileModified: Code { .assetFileModified }
    public static var incompatibleVersion: Code { .incompatibleVersion }
    public static var constraintViolation: Code { .constraintViolation }
    public static var operationCancelled: Code { .operationCancelled }
    public static var changeTokenExpired: Code { .changeTokenExpired }
    public static var batchRequestFailed: Code { .batchRequestFailed }
    public static var zoneBusy: Code { .zoneBusy }
    public static var badDatabase: Code { .badDatabase }
    public static var quotaExceeded: Code { .quotaExceeded }
    public static var zoneNotFound: Code { .zoneNotFound }
    public static var limitExceeded: Code { .limitExceeded }
    public static var userDeletedZone: Code { .userDeletedZone }
    public static var tooManyParticipants: Code { .tooManyParticipants }
    public static var alreadyShared: Code { .alreadyShared }
    public static var referenceViolation: Code { .referenceViolation }
    public static var managedAccountRestricted: Code { .managedAccountRestricted }
    public static var participantMayNeedVerification: Code { .participantMayNeedVerification }
    public static var serverResponseLost: Code { .serverResponseLost }
    public static var assetNotAvailable: Code { .assetNotAvailable }
    public static var accountTemporarilyUnavailable: Code { .accountTemporarilyUnavailable }
    public static var participantAlreadyInvited: Code { .participantAlreadyInvited }
}

/// The `userInfo` entries of an error that its properties do not hold, as the error was built
/// with them.
///
/// Unchecked Sendable: the dictionaries are constants set once, like the `userInfo` of an
/// `NSError` (itself Sendable); their values are what the caller handed to the error, as
/// `NSError` holds them.
final class KeptUserInfo: @unchecked Sendable {
    /// Entries under keys Stratus does not read, or whose values are not of a type it takes.
    let entries: [String: Any]
    /// ``PartialErrorsByItemIDKey`` entries whose item IDs are of no kind Stratus knows.
    let otherPartialErrors: [AnyHashable: any Error]

    init(entries: [String: Any], otherPartialErrors: [AnyHashable: any Error]) {
        self.entries = entries
        self.otherPartialErrors = otherPartialErrors
    }
}
