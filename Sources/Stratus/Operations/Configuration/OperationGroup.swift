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

    /// A unique identifier of the group (kept by an archive).
    public let operationGroupID: String
    private let state: Mutex<State>

    public override init() {
        operationGroupID = UUID().uuidString
        state = Mutex(State())
        super.init()
    }

    private init(operationGroupID: String, state: State) {
        self.operationGroupID = operationGroupID
        self.state = Mutex(state)
        super.init()
    }

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

/// Archiving groups as apps archive `CKOperationGroup`s (a group kept to tie a resumed sync to
/// the one it continues): the ID, name, quantity and sizes. The default configuration is not
/// archived, as CloudKit's is not.
extension OperationGroup: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let operationGroupID = "StratusOperationGroupID"
        static let name = "StratusOperationGroupName"
        static let quantity = "StratusOperationGroupQuantity"
        static let expectedSendSize = "StratusOperationGroupSendSize"
        static let expectedReceiveSize = "StratusOperationGroupReceiveSize"
    }

    /// Writes the group (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: group, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        let state = state.withLock { $0 }
        coder.encode(operationGroupID as NSString, forKey: Key.operationGroupID)
        if let name = state.name { coder.encode(name as NSString, forKey: Key.name) }
        coder.encode(Int64(state.quantity), forKey: Key.quantity)
        coder.encode(Int64(state.expectedSendSize.rawValue), forKey: Key.expectedSendSize)
        coder.encode(Int64(state.expectedReceiveSize.rawValue), forKey: Key.expectedReceiveSize)
    }

    /// Reads a group written by ``encode(with:)``, with its ID; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let group = try NSKeyedUnarchiver.unarchivedObject(ofClass: OperationGroup.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let operationGroupID = coder.archivedText(forKey: Key.operationGroupID) else { return nil }
        func size(_ key: String) -> TransferSize { TransferSize(rawValue: Int(truncatingIfNeeded: coder.decodeInt64(forKey: key))) ?? .unknown }
        var state = State()
        state.name = coder.archivedText(forKey: Key.name)
        state.quantity = Int(truncatingIfNeeded: coder.decodeInt64(forKey: Key.quantity))
        state.expectedSendSize = size(Key.expectedSendSize)
        state.expectedReceiveSize = size(Key.expectedReceiveSize)
        self.init(operationGroupID: operationGroupID, state: state)
    }
}
