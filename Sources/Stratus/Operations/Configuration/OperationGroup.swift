import Foundation
import Synchronization

/// Operations that belong together, like `CKOperationGroup`: a name and expected sizes for
/// logs, and a default configuration for its operations.
///
/// An operation's explicitly set configuration values win over the group's
/// ``defaultConfiguration``. Stratus keeps the name, quantity and sizes for the caller; a local
/// store has no server logs to show them in.
///
/// ```swift
/// let group = OperationGroup()
/// group.name = "Initial sync"
/// group.defaultConfiguration.timeoutIntervalForResource = 600
/// fetch.group = group
/// save.group = group
/// ```
public final class OperationGroup: NSObject, Sendable {
    /// The expected amount of data moved, as `CKOperationGroup.TransferSize`.
    ///
    /// ```swift
    /// group.expectedSendSize = .megabytes
    /// ```
    public enum TransferSize: Int, Hashable, Sendable {
        /// Not said (Stratus moves data the same way whatever the size).
        case unknown = 0
        /// Kilobytes.
        case kilobytes = 1
        /// Megabytes.
        case megabytes = 2
        /// Tens of megabytes.
        case tensOfMegabytes = 3
        /// Hundreds of megabytes.
        case hundredsOfMegabytes = 4
        /// Gigabytes.
        case gigabytes = 5
        /// Tens of gigabytes.
        case tensOfGigabytes = 6
        /// Hundreds of gigabytes.
        case hundredsOfGigabytes = 7
    }

    private struct State: Sendable {
        var defaultConfiguration = OperationConfiguration()
        var name: String?
        var quantity = 0
        var expectedSendSize = TransferSize.unknown
        var expectedReceiveSize = TransferSize.unknown
    }

    /// A unique identifier of the group.
    public let operationGroupID = UUID().uuidString
    private let state = Mutex(State())

    public override init() { super.init() }

    /// The configuration the group's operations use where their own sets nothing; assigning
    /// copies, and `nil` restores the defaults.
    public var defaultConfiguration: OperationConfiguration! {
        get { state.withLock { $0.defaultConfiguration } }
        set {
            let copy = (newValue?.copy() as? OperationConfiguration) ?? OperationConfiguration()
            state.withLock { $0.defaultConfiguration = copy }
        }
    }

    /// A name for the group (CloudKit shows it in its logs).
    public var name: String? {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    /// How many items the group's operations are expected to move.
    public var quantity: Int {
        get { state.withLock { $0.quantity } }
        set { state.withLock { $0.quantity = newValue } }
    }

    public var expectedSendSize: TransferSize {
        get { state.withLock { $0.expectedSendSize } }
        set { state.withLock { $0.expectedSendSize = newValue } }
    }

    public var expectedReceiveSize: TransferSize {
        get { state.withLock { $0.expectedReceiveSize } }
        set { state.withLock { $0.expectedReceiveSize = newValue } }
    }

    public override var description: String {
        "OperationGroup(\(name ?? operationGroupID))"
    }
}
