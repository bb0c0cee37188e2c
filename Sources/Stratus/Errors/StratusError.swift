import Foundation

/// The one error type of Stratus. Its ``Code`` values mirror `CKError.Code` names and numbers.
///
/// It bridges to `NSError` as a `CKError` does (see `StratusError+NSError.swift`): domain
/// `CKErrorDomain`, CloudKit's code numbers and `userInfo` keys, and the message as
/// `localizedDescription`.
///
/// ```swift
/// do {
///     _ = try await database.record(for: Record.ID(recordName: "missing"))
/// } catch let error as StratusError where error.code == .unknownItem {
///     print(error.message)
/// }
/// ```
public struct StratusError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is, numbered as `CKError.Code`: what a program branches on.
    ///
    /// ```swift
    /// if error.code == .serverRecordChanged { /* merge and save again */ }
    /// ```
    public var code: Code
    /// What was wrong and where, for a person to read. Never contains field values.
    public var message: String
    /// The record the error is about, for per-item errors.
    public var recordID: Record.ID?
    /// The zone the error is about.
    public var zoneID: RecordZone.ID?
    /// For ``Code/partialFailure``: the error of each item that failed.
    public var partialErrorsByRecordID: [Record.ID: StratusError]
    /// For ``Code/partialFailure`` of a zone operation: the error of each zone that failed.
    public var partialErrorsByZoneID: [RecordZone.ID: StratusError] = [:]
    /// For ``Code/partialFailure`` of a subscription operation: the error of each subscription that failed.
    public var partialErrorsBySubscriptionID: [Subscription.ID: StratusError] = [:]
    /// For ``Code/partialFailure`` of ``MarkNotificationsReadOperation``: the error of each notification that failed.
    public var partialErrorsByNotificationID: [StratusNotification.ID: StratusError] = [:]
    /// For ``Code/serverRecordChanged``: the record as the store has it now.
    public var serverRecord: Record?
    /// For ``Code/serverRecordChanged``: the record the client tried to save.
    public var clientRecord: Record?
    /// For ``Code/serverRecordChanged``: the record the client's change was based on, if known.
    public var ancestorRecord: Record?
    /// For transient failures: seconds to wait before trying again.
    public var retryAfterSeconds: Double?
    /// The lower-level error behind this one (`NSUnderlyingErrorKey` when bridged), e.g. the
    /// `NSURLErrorTimedOut` behind a timed-out operation's `networkFailure`.
    public var underlyingError: (any Error)?
    /// For errors in text input (a predicate, a file): 1-based line and column.
    public var line: Int?
    /// For errors in text input: the 1-based column on ``line``.
    public var column: Int?
    /// For a cancelled or failed query: where to resume.
    public var resumeCursor: QueryOperation.Cursor?
    /// For a stage of a stopped pipeline (cancelled, or failed): the position every last
    /// stage reached, after which a resumed pipeline starts (see ``PipelineCheckpoint``).
    public var pipelinePosition: PipelinePosition?
    /// How many items were completed before the operation stopped (cancellation, failure).
    public var completedItemCount: Int?
    /// For a failure reported by an SQL server: its five-character SQLSTATE (`40001`), so that
    /// an engine can tell failures apart without reading the message.
    public var sqlState: String?
    /// The `userInfo` entries an error built with ``init(_:userInfo:)`` carried that no
    /// property above holds (the app's own keys, CloudKit keys Stratus does not read), kept
    /// so that ``userInfo`` gives them back.
    var keptUserInfo: KeptUserInfo?

/// An error of `code` saying `message`, about `recordID` or `zoneID` when it concerns one item;
/// `partialErrors` for a `partialFailure`, `retryAfterSeconds` for a retryable one.
///
/// ```swift
/// throw StratusError(.invalidArguments, "field 'due' must be a date", recordID: record.recordID)
/// ```
    public init(
        _ code: Code, _ message: String, recordID: Record.ID? = nil, zoneID: RecordZone.ID? = nil,
        partialErrors: [Record.ID: StratusError] = [:], retryAfterSeconds: Double? = nil
    ) {
        self.code = code
        self.message = message
        self.recordID = recordID
        self.zoneID = zoneID
        self.partialErrorsByRecordID = partialErrors
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String {
        var text = "\(code): \(message)"
        text += Self.summary(of: partialErrorsByRecordID, by: \.recordName) { $0.recordName }
        text += Self.summary(of: partialErrorsByZoneID, by: \.zoneName) { "zone \($0.zoneName)" }
        text += Self.summary(of: partialErrorsBySubscriptionID, by: \.self) { "subscription \($0)" }
        text += Self.summary(of: partialErrorsByNotificationID, by: \.sequence) { "notification \($0)" }
        return text
    }

    /// ` [name: code, …]` for the first five partial errors in `order`, or nothing when there
    /// are none: a description stays one readable line however many items failed.
    private static func summary<Key, Order: Comparable>(
        of errors: [Key: StratusError], by order: KeyPath<Key, Order>, naming name: (Key) -> String
    ) -> String {
        guard !errors.isEmpty else { return "" }
        let shown = errors.sorted { $0.key[keyPath: order] < $1.key[keyPath: order] }.prefix(5)
        let more = errors.count > shown.count ? ", …" : ""
        return " [" + shown.map { "\(name($0.key)): \($0.value.code)" }.joined(separator: ", ") + more + "]"
    }

    /// Whether trying the same request again later may succeed.
    public var isTransient: Bool {
        [.serviceUnavailable, .zoneBusy, .requestRateLimited, .networkFailure, .networkUnavailable].contains(code)
    }

    /// An error code, named and numbered as in `CKError.Code`: every case CloudKit defines, so
    /// that a `switch` written for `CKError.Code` (with `@unknown default`) compiles.
    /// Pattern-match with `==`, `case`, or against an error (`catch StratusError.unknownItem`).
    ///
    /// ```swift
    /// switch error.code {
    /// case .serverRecordChanged: merge(error.serverRecord, error.clientRecord)
    /// case .zoneBusy, .requestRateLimited: retry(after: error.retryAfterSeconds ?? 1)
    /// default: throw error
    /// }
    /// ```
    public enum Code: Int, Hashable, Sendable, CaseIterable {
        case internalError = 1
        case partialFailure = 2
        case networkUnavailable = 3
        case networkFailure = 4
        case badContainer = 5
        case serviceUnavailable = 6
        case requestRateLimited = 7
        case missingEntitlement = 8
        case notAuthenticated = 9
        case permissionFailure = 10
        case unknownItem = 11
        case invalidArguments = 12
        case resultsTruncated = 13
        case serverRecordChanged = 14
        case serverRejectedRequest = 15
        case assetFileNotFound = 16
        case assetFileModified = 17
        case incompatibleVersion = 18
        case constraintViolation = 19
        case operationCancelled = 20
        case changeTokenExpired = 21
        case batchRequestFailed = 22
        case zoneBusy = 23
        case badDatabase = 24
        case quotaExceeded = 25
        case zoneNotFound = 26
        case limitExceeded = 27
        case userDeletedZone = 28
        case tooManyParticipants = 29
        case alreadyShared = 30
        case referenceViolation = 31
        case managedAccountRestricted = 32
        case participantMayNeedVerification = 33
        case serverResponseLost = 34
        case assetNotAvailable = 35
        case accountTemporarilyUnavailable = 36
        case participantAlreadyInvited = 37

        /// The case's name (`unknownItem`), as `print` shows it.
        public var description: String { "\(self)" }

        public static func ~= (pattern: Code, error: any Error) -> Bool {
            (error as? StratusError)?.code == pattern
        }
    }
}

extension StratusError {
    static func cancelled(_ what: String, completed: Int) -> StratusError {
        var error = StratusError(.operationCancelled, "\(what) was cancelled after \(completed) item(s)")
        error.completedItemCount = completed
        return error
    }

    /// The error a stage that had completed `count` items reports, unless it says already.
    func completing(_ count: Int) -> StratusError {
        var error = self
        if error.completedItemCount == nil { error.completedItemCount = count }
        return error
    }

    /// Wraps any error thrown below the operations as a ``StratusError``, keeping it as the
    /// ``underlyingError``.
    static func wrap(_ error: any Error) -> StratusError {
        if let error = error as? StratusError { return error }
        var wrapped = StratusError(.internalError, String(describing: error))
        wrapped.underlyingError = error
        return wrapped
    }

    /// What a pipeline stage reports when a closure of the app's (a transform, a consumer's
    /// body) threw: `internalError` saying so, the app's own error as ``underlyingError`` (to
    /// `catch` or compare it there), and the items the stage completed before. A
    /// ``StratusError`` goes on as it is, but a `partialFailure`, which a stage's own writes
    /// report without stopping the pipeline, is wrapped so that it stops it.
    static func thrownByClosure(_ error: any Error, of stage: String, completed: Int) -> StratusError {
        var wrapped: StratusError
        if let error = error as? StratusError, error.code != .partialFailure {
            wrapped = error
        } else {
            wrapped = StratusError(.internalError, "the closure given to \(stage) threw \(type(of: error)): \(error)")
            wrapped.underlyingError = error
        }
        if wrapped.completedItemCount == nil { wrapped.completedItemCount = completed }
        return wrapped
    }
}

extension StratusError {
    /// Hands the records a conflict carries to the caller `viewer` (see
    /// ``Record/creatorUserRecordID``), as every record an operation hands out.
    func presentRecords(to viewer: String?) {
        guard let viewer else { return }
        serverRecord?.presented(to: viewer)
        clientRecord?.presented(to: viewer)
        ancestorRecord?.presented(to: viewer)
    }
}
