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
    public var column: Int?
    /// For a cancelled or failed query: where to resume.
    public var resumeCursor: QueryOperation.Cursor?
    /// How many items were completed before the operation stopped (cancellation, failure).
    public var completedItemCount: Int?

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
        if !partialErrorsByRecordID.isEmpty {
            let shown = partialErrorsByRecordID.sorted { $0.key.recordName < $1.key.recordName }.prefix(5)
            text += " [" + shown.map { "\($0.key.recordName): \($0.value.code)" }.joined(separator: ", ")
            if partialErrorsByRecordID.count > shown.count { text += ", …" }
            text += "]"
        }
        if !partialErrorsByZoneID.isEmpty {
            let shown = partialErrorsByZoneID.sorted { $0.key.zoneName < $1.key.zoneName }.prefix(5)
            text += " [" + shown.map { "zone \($0.key.zoneName): \($0.value.code)" }.joined(separator: ", ")
            if partialErrorsByZoneID.count > shown.count { text += ", …" }
            text += "]"
        }
        return text
    }

    /// Whether trying the same request again later may succeed.
    public var isTransient: Bool {
        [.serviceUnavailable, .zoneBusy, .requestRateLimited, .networkFailure, .networkUnavailable].contains(code)
    }

    /// An error code, named and numbered as in `CKError.Code`. Pattern-match with `==` or `case`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let internalError = Code(rawValue: 1)
        public static let partialFailure = Code(rawValue: 2)
        public static let networkUnavailable = Code(rawValue: 3)
        public static let networkFailure = Code(rawValue: 4)
        public static let badContainer = Code(rawValue: 5)
        public static let serviceUnavailable = Code(rawValue: 6)
        public static let requestRateLimited = Code(rawValue: 7)
        public static let missingEntitlement = Code(rawValue: 8)
        public static let notAuthenticated = Code(rawValue: 9)
        public static let permissionFailure = Code(rawValue: 10)
        public static let unknownItem = Code(rawValue: 11)
        public static let invalidArguments = Code(rawValue: 12)
        public static let resultsTruncated = Code(rawValue: 13)
        public static let serverRecordChanged = Code(rawValue: 14)
        public static let serverRejectedRequest = Code(rawValue: 15)
        public static let assetFileNotFound = Code(rawValue: 16)
        public static let assetFileModified = Code(rawValue: 17)
        public static let incompatibleVersion = Code(rawValue: 18)
        public static let constraintViolation = Code(rawValue: 19)
        public static let operationCancelled = Code(rawValue: 20)
        public static let changeTokenExpired = Code(rawValue: 21)
        public static let batchRequestFailed = Code(rawValue: 22)
        public static let zoneBusy = Code(rawValue: 23)
        public static let badDatabase = Code(rawValue: 24)
        public static let quotaExceeded = Code(rawValue: 25)
        public static let zoneNotFound = Code(rawValue: 26)
        public static let limitExceeded = Code(rawValue: 27)
        public static let userDeletedZone = Code(rawValue: 28)
        public static let tooManyParticipants = Code(rawValue: 29)
        public static let alreadyShared = Code(rawValue: 30)
        public static let referenceViolation = Code(rawValue: 31)
        public static let managedAccountRestricted = Code(rawValue: 32)
        public static let participantMayNeedVerification = Code(rawValue: 33)
        public static let serverResponseLost = Code(rawValue: 34)
        public static let assetNotAvailable = Code(rawValue: 35)
        public static let accountTemporarilyUnavailable = Code(rawValue: 36)
        public static let participantAlreadyInvited = Code(rawValue: 37)

        /// Every code CloudKit defines, in number order.
        public static let allCases: [Code] = names.keys.sorted().map(Code.init(rawValue:))

        private static let names: [Int: String] = [
            1: "internalError", 2: "partialFailure", 3: "networkUnavailable", 4: "networkFailure",
            5: "badContainer", 6: "serviceUnavailable", 7: "requestRateLimited", 8: "missingEntitlement",
            9: "notAuthenticated", 10: "permissionFailure", 11: "unknownItem", 12: "invalidArguments",
            13: "resultsTruncated", 14: "serverRecordChanged", 15: "serverRejectedRequest", 16: "assetFileNotFound",
            17: "assetFileModified", 18: "incompatibleVersion", 19: "constraintViolation", 20: "operationCancelled",
            21: "changeTokenExpired", 22: "batchRequestFailed", 23: "zoneBusy", 24: "badDatabase", 25: "quotaExceeded",
            26: "zoneNotFound", 27: "limitExceeded", 28: "userDeletedZone", 29: "tooManyParticipants",
            30: "alreadyShared", 31: "referenceViolation", 32: "managedAccountRestricted",
            33: "participantMayNeedVerification", 34: "serverResponseLost", 35: "assetNotAvailable",
            36: "accountTemporarilyUnavailable", 37: "participantAlreadyInvited",
        ]

        public var description: String { Code.names[rawValue] ?? "code\(rawValue)" }

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

    /// Wraps any error thrown below the operations as a ``StratusError``.
    static func wrap(_ error: any Error) -> StratusError {
        if let error = error as? StratusError { return error }
        return StratusError(.internalError, String(describing: error))
    }
}
