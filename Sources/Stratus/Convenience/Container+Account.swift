import Foundation

/// Whether the current user can use a container's private data, as `CKAccountStatus`.
///
/// A Stratus container always acts as a user (``Container/userName``), so its status is
/// ``available``; the other cases exist so that code switching over them compiles.
public enum AccountStatus: Int, Hashable, Sendable {
    case couldNotDetermine = 0
    case available = 1
    case restricted = 2
    case noAccount = 3
    case temporarilyUnavailable = 4
}

/// The account calls of `CKContainer` that CloudKit tutorials make first.
extension Container {
    /// The current user's account status: always ``AccountStatus/available``.
    ///
    /// ```swift
    /// guard try await container.accountStatus() == .available else { return }
    /// ```
    public func accountStatus() async throws -> AccountStatus { .available }

    /// Calls `completionHandler` on a background queue with the account status, always
    /// ``AccountStatus/available``.
    ///
    /// ```swift
    /// container.accountStatus { status, error in if status == .available { startSync() } }
    /// ```
    public func accountStatus(completionHandler: @escaping @Sendable (AccountStatus, (any Error)?) -> Void) {
        DispatchQueue.global().async { completionHandler(.available, nil) }
    }

    /// Calls `completionHandler` on a background queue with the current user's record ID
    /// (its record name is ``userName``), as `CKContainer.fetchUserRecordID(completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchUserRecordID { id, error in print(id?.recordName ?? "-") }
    /// ```
    public func fetchUserRecordID(completionHandler: @escaping @Sendable (Record.ID?, (any Error)?) -> Void) {
        let id = userRecordID
        DispatchQueue.global().async { completionHandler(id, nil) }
    }
}
