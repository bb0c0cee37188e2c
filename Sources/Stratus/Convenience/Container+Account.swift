import Foundation

/// Whether the current user can use a container's private data, as `CKAccountStatus`.
///
/// A Stratus container acts as a user (``Container/userName``), and its status is then
/// ``available``; a container with no user (``Container/anonymous(identifier:engine:environment:retryPolicy:)``)
/// is ``noAccount``, as CloudKit reports a device without an iCloud account. The other cases
/// exist so that code switching over them compiles.
///
/// ```swift
/// guard try await container.accountStatus() == .available else { return }
/// ```
public enum AccountStatus: Int, Hashable, Sendable {
    /// The status could not be found out; never given by Stratus.
    case couldNotDetermine = 0
    /// The container acts as a user.
    case available = 1
    /// The account may not be used (parental controls, device management); never given by Stratus.
    case restricted = 2
    /// No user: a container made with `anonymous(identifier:…)`.
    case noAccount = 3
    /// The account needs attention before it can be used; never given by Stratus.
    case temporarilyUnavailable = 4
}

/// The account calls of `CKContainer` that CloudKit tutorials make first.
extension Container {
    /// The current user's account status: ``AccountStatus/available``, or
    /// ``AccountStatus/noAccount`` for a container with no user.
    ///
    /// ```swift
    /// guard try await container.accountStatus() == .available else { return }
    /// ```
    ///
    /// - Throws: `badContainer` or `invalidArguments` for a container opened with an identifier
    ///   or user name CloudKit refuses (see ``Container/checkOpening(identifier:userName:)``).
    public func accountStatus() async throws -> AccountStatus {
        // As CloudKit answers for a container it cannot reach.
        if let refusal = user.refusal { throw refusal }
        return userName == nil ? .noAccount : .available
    }

    /// Calls `completionHandler` on a background queue with the account status
    /// (``accountStatus()``).
    ///
    /// ```swift
    /// container.accountStatus { status, error in if status == .available { startSync() } }
    /// ```
    @preconcurrency public func accountStatus(completionHandler: @escaping @Sendable (AccountStatus, (any Error)?) -> Void) {
        // The async call's answer, refusals included (CloudKit's `.couldNotDetermine` and an error).
        let status: AccountStatus = userName == nil ? .noAccount : .available
        let refusal = user.refusal
        DispatchQueue.global().async { refusal.map { completionHandler(.couldNotDetermine, $0) } ?? completionHandler(status, nil) }
    }

    /// Calls `completionHandler` on a background queue with the current user's record ID
    /// (``userRecordID()``), as `CKContainer.fetchUserRecordID(completionHandler:)`; a
    /// container with no user gets `notAuthenticated`.
    ///
    /// ```swift
    /// container.fetchUserRecordID { id, error in print(id?.recordName ?? "-") }
    /// ```
    @preconcurrency public func fetchUserRecordID(completionHandler: @escaping @Sendable (Record.ID?, (any Error)?) -> Void) {
        Task.detached {
            do {
                completionHandler(try await self.userRecordID(), nil)
            } catch {
                completionHandler(nil, error)
            }
        }
    }
}

extension Notification.Name {
    /// CloudKit's `.CKAccountChanged` (`CKAccountChangedNotification`), which CloudKit posts when
    /// the device's iCloud account changes. A Stratus container acts as one user for as long as it
    /// is open, so Stratus never posts it: code that observes it runs unchanged, and its observer
    /// is not called.
    ///
    /// ```swift
    /// let observer = NotificationCenter.default.addObserver(forName: .AccountChanged, object: nil, queue: nil) { _ in
    ///     refreshAccountStatus()
    /// }
    /// ```
    public static let AccountChanged = Notification.Name("CKAccountChangedNotification")
}
