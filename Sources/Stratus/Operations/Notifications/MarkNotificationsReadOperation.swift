import Foundation

/// Marks notifications of the current user's feed read, like `CKMarkNotificationsReadOperation`.
///
/// Marking a notification read appends a `.readNotification` entry naming it to the feed (once,
/// however often it is marked), so that every reader of the feed learns it. An ID that is not
/// in the feed (of another store, or compacted away) fails alone with `unknownItem`, and the
/// final result is then `partialFailure`.
///
/// ```swift
/// let op = MarkNotificationsReadOperation(notificationIDsToMarkRead: handled.compactMap(\.notificationID))
/// op.markNotificationsReadResultBlock = { print("marked:", $0) }
/// container.add(op)
/// ```
open class MarkNotificationsReadOperation: DatabaseOperation, @unchecked Sendable {
    /// The IDs of the notifications to mark read; each gets a ``perNotificationIDResultBlock``
    /// call.
    public var notificationIDs: [StratusNotification.ID]
    /// Each ID, with success or its own error (`unknownItem` for an ID not in the feed).
    ///
    /// ```swift
    /// op.perNotificationIDResultBlock = { id, result in print(id, result) }
    /// ```
    public var perNotificationIDResultBlock: ((StratusNotification.ID, Result<Void, any Error>) -> Void)?
    /// Called once at the end: success, `partialFailure` when some ID failed, or the error that
    /// failed the whole request.
    ///
    /// ```swift
    /// op.markNotificationsReadResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var markNotificationsReadResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's final block: the IDs marked read and the error; after ``markNotificationsReadResultBlock``.
    public var markNotificationsReadCompletionBlock: (([StratusNotification.ID]?, (any Error)?) -> Void)?

    private var marked: [StratusNotification.ID] = []

    /// An operation that marks the notifications with `notificationIDs` read, as
    /// `CKMarkNotificationsReadOperation(notificationIDsToMarkRead:)`.
    ///
    /// ```swift
    /// let op = MarkNotificationsReadOperation(notificationIDsToMarkRead: handled.compactMap(\.notificationID))
    /// ```
    public convenience init(notificationIDsToMarkRead notificationIDs: [StratusNotification.ID]) {
        self.init()
        self.notificationIDs = notificationIDs
    }

    /// An operation that marks nothing yet, as `CKMarkNotificationsReadOperation()`: set
    /// ``notificationIDs`` before it runs.
    ///
    /// ```swift
    /// let op = MarkNotificationsReadOperation()
    /// op.notificationIDs = handled.compactMap(\.notificationID)
    /// ```
    public override init() {
        notificationIDs = []
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        try SubscriptionRules.checkSubscriber(context, doing: "marking notifications read")
        let feed = context.notificationFeed
        let store = try engine.storeIdentifier
        var errors: [StratusNotification.ID: StratusError] = [:]
        func unknown(_ id: StratusNotification.ID) -> StratusError {
            StratusError(.unknownItem, "notification \(id) is not in \(feed) (from another store, or removed by compaction)")
        }
        let ours = notificationIDs.filter { $0.belongs(to: feed, store: store) }
        var marks: [NotificationReadMark] = []
        var seen: Set<Int64> = []
        for id in ours where seen.insert(id.sequence).inserted {
            marks.append(NotificationReadMark(sequence: id.sequence, entry: NotificationPayload.readMark(of: id.sequence)))
        }
        if isCancelled { return StratusError.cancelled("MarkNotificationsReadOperation", completed: 0) }
        let found = marks.isEmpty ? [] : try withRetry { try engine.markNotificationsRead(marks, in: feed) }
        for id in notificationIDs {
            if id.belongs(to: feed, store: store) && found.contains(id.sequence) {
                marked.append(id)
                perNotificationIDResultBlock?(id, .success(()))
            } else {
                let error = unknown(id)
                errors[id] = error
                perNotificationIDResultBlock?(id, .failure(error))
            }
        }
        guard !errors.isEmpty else { return nil }
        var error = StratusError(.partialFailure, "\(errors.count) of \(notificationIDs.count) notification(s) could not be marked read")
        error.partialErrorsByNotificationID = errors
        return error
    }

    override func complete(with error: StratusError?) {
        markNotificationsReadResultBlock?(error.map { .failure($0) } ?? .success(()))
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        markNotificationsReadCompletionBlock?(wholeFailure ? nil : marked, error)
    }
}
