import Foundation
import Synchronization

extension Operation {
    /// `CKOperation.Configuration`'s name for ``OperationConfiguration``, so that ported code
    /// writing `Operation.Configuration()` compiles.
    public typealias Configuration = OperationConfiguration
}

/// How an operation behaves, like `CKOperation.Configuration`: its timeouts, quality of
/// service and container.
///
/// Every property has a default; a property set explicitly wins over the same property of the
/// database's configuration (`Database.configuredWith(configuration:group:body:)`)
/// and of the operation group's ``OperationGroup/defaultConfiguration``, as CloudKit combines
/// them. Assigning a configuration to an operation or group copies it.
///
/// ```swift
/// let configuration = Operation.Configuration()
/// configuration.timeoutIntervalForResource = 30
/// configuration.qualityOfService = .userInitiated
/// operation.configuration = configuration
/// ```
public final class OperationConfiguration: NSObject, NSCopying, Sendable {
    /// The values set explicitly; `nil` means "the default".
    struct Values: Sendable {
        var container: Container?
        var qualityOfService: QualityOfService?
        var allowsCellularAccess: Bool?
        var isLongLived: Bool?
        var timeoutIntervalForRequest: TimeInterval?
        var timeoutIntervalForResource: TimeInterval?

        /// These values, with each unset one taken from `lower`.
        func over(_ lower: Values) -> Values {
            Values(container: container ?? lower.container,
                   qualityOfService: qualityOfService ?? lower.qualityOfService,
                   allowsCellularAccess: allowsCellularAccess ?? lower.allowsCellularAccess,
                   isLongLived: isLongLived ?? lower.isLongLived,
                   timeoutIntervalForRequest: timeoutIntervalForRequest ?? lower.timeoutIntervalForRequest,
                   timeoutIntervalForResource: timeoutIntervalForResource ?? lower.timeoutIntervalForResource)
        }
    }

    /// CloudKit's default for ``timeoutIntervalForRequest``: 60 seconds.
    public static let defaultTimeoutIntervalForRequest: TimeInterval = 60
    /// CloudKit's default for ``timeoutIntervalForResource``: 7 days.
    public static let defaultTimeoutIntervalForResource: TimeInterval = 604_800

    private let values: Mutex<Values>

    public override init() {
        values = Mutex(Values())
        super.init()
    }

    init(values: Values) {
        self.values = Mutex(values)
        super.init()
    }

    var explicitValues: Values { values.withLock { $0 } }

    /// The container whose private database runs an operation that was given no database.
    public var container: Container? {
        get { values.withLock { $0.container } }
        set { values.withLock { $0.container = newValue } }
    }

    /// The operation's quality of service, applied to it as an `Operation`; `.default` unless set.
    public var qualityOfService: QualityOfService {
        get { values.withLock { $0.qualityOfService } ?? .default }
        set { values.withLock { $0.qualityOfService = newValue } }
    }

    /// Accepted and kept for CloudKit code; a local store uses no cellular network. `true` unless set.
    public var allowsCellularAccess: Bool {
        get { values.withLock { $0.allowsCellularAccess } ?? true }
        set { values.withLock { $0.allowsCellularAccess = newValue } }
    }

    /// Whether the operation is listed by `Container.fetchAllLongLivedOperationIDs(completionHandler:)`
    /// while it is outstanding in this process (from when it is added to a database, or starts
    /// on a queue of the app's own, until its final block is called). `false` unless set.
    ///
    /// ```swift
    /// save.configuration.isLongLived = true
    /// database.add(save)   // listed until its final block is called
    /// ```
    ///
    /// Unlike CloudKit's, a Stratus operation does not outlive its process: it runs in the
    /// process that adds it and ends with it, its writes committed or not, and the next process
    /// finds no long-lived operation. What survives a process is its cursors and change tokens,
    /// which a new operation continues from.
    public var isLongLived: Bool {
        get { values.withLock { $0.isLongLived } ?? false }
        set { values.withLock { $0.isLongLived = newValue } }
    }

    /// How long one request may wait for the store, in seconds (default 60): retries of a busy
    /// store stop once this much time has passed since the request began, and the operation
    /// fails with `networkFailure` whose underlying error is `NSURLErrorTimedOut`, as a timed-out
    /// CloudKit request does. A store call already waiting (SQLite's busy timeout, 5 s by
    /// default) finishes its wait first.
    public var timeoutIntervalForRequest: TimeInterval {
        get { values.withLock { $0.timeoutIntervalForRequest } ?? Self.defaultTimeoutIntervalForRequest }
        set { values.withLock { $0.timeoutIntervalForRequest = newValue } }
    }

    /// How long the whole operation may run, in seconds (default 7 days): when it passes, the
    /// operation stops at its next item or batch as a cancelled one does (``DatabaseOperation``
    /// then reports `isCancelled`), and its final block gets `networkFailure` with
    /// `NSURLErrorTimedOut` underneath, the partial errors, completed item count and resume
    /// cursor a cancellation would carry.
    public var timeoutIntervalForResource: TimeInterval {
        get { values.withLock { $0.timeoutIntervalForResource } ?? Self.defaultTimeoutIntervalForResource }
        set { values.withLock { $0.timeoutIntervalForResource = newValue } }
    }

    /// A configuration with the same explicitly set values.
    public func copy(with zone: NSZone? = nil) -> Any { OperationConfiguration(values: explicitValues) }

    public override var description: String {
        let v = explicitValues
        var set: [String] = []
        if let q = v.qualityOfService { set.append("qualityOfService=\(q.rawValue)") }
        if let t = v.timeoutIntervalForRequest { set.append("timeoutIntervalForRequest=\(t)") }
        if let t = v.timeoutIntervalForResource { set.append("timeoutIntervalForResource=\(t)") }
        if let l = v.isLongLived { set.append("isLongLived=\(l)") }
        if let c = v.allowsCellularAccess { set.append("allowsCellularAccess=\(c)") }
        if let c = v.container { set.append("container=\(c.identifier)") }
        return "OperationConfiguration(\(set.joined(separator: ", ")))"
    }
}
