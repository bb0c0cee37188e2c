import Foundation
import Synchronization

/// What an operation keeps of its configuration: its own, what its database passes on
/// (`Database.configuredWith(configuration:group:body:)`), its group, and
/// whether its resource timeout fired.
struct OperationSettings: Sendable {
    var configuration: OperationConfiguration?
    var inherited: OperationConfiguration?
    var group: OperationGroup?
    var timedOut = false
}

/// `CKOperation`'s configuration API.
extension DatabaseOperation {
    /// The operation's configuration, as `CKOperation.configuration`: never `nil` when read
    /// (an empty configuration is created on first use, so
    /// `operation.configuration.timeoutIntervalForResource = 30` works); assigning copies, and
    /// assigning `nil` restores the defaults. Values it sets explicitly win over the group's
    /// ``OperationGroup/defaultConfiguration``. Set it before the operation starts.
    ///
    /// ```swift
    /// operation.configuration.timeoutIntervalForRequest = 10
    /// operation.configuration.qualityOfService = .userInitiated
    /// ```
    public var configuration: OperationConfiguration! {
        get {
            settings.withLock { settings in
                if let configuration = settings.configuration { return configuration }
                let created = OperationConfiguration()
                settings.configuration = created
                return created
            }
        }
        set {
            let copy = newValue?.copy() as? OperationConfiguration
            settings.withLock { $0.configuration = copy }
            applyQualityOfService()
        }
    }

    /// The group the operation belongs to, as `CKOperation.group`.
    ///
    /// ```swift
    /// operation.group = syncGroup
    /// ```
    public var group: OperationGroup? {
        get { settings.withLock { $0.group } }
        set {
            settings.withLock { $0.group = newValue }
            applyQualityOfService()
        }
    }

    /// `CKOperation.timeoutIntervalForRequest` (deprecated in CloudKit): the configuration's.
    public var timeoutIntervalForRequest: TimeInterval {
        get { effectiveConfiguration.timeoutIntervalForRequest }
        set { configuration.timeoutIntervalForRequest = newValue }
    }

    /// `CKOperation.timeoutIntervalForResource` (deprecated in CloudKit): the configuration's.
    public var timeoutIntervalForResource: TimeInterval {
        get { effectiveConfiguration.timeoutIntervalForResource }
        set { configuration.timeoutIntervalForResource = newValue }
    }

    /// `CKOperation.isLongLived` (deprecated in CloudKit): the configuration's
    /// ``OperationConfiguration/isLongLived``, which lists the operation while it is
    /// outstanding in this process.
    ///
    /// ```swift
    /// save.isLongLived = true
    /// ```
    public var isLongLived: Bool {
        get { effectiveConfiguration.isLongLived }
        set { configuration.isLongLived = newValue }
    }

    /// `CKOperation.allowsCellularAccess` (deprecated in CloudKit): accepted, without effect.
    public var allowsCellularAccess: Bool {
        get { effectiveConfiguration.allowsCellularAccess }
        set { configuration.allowsCellularAccess = newValue }
    }

    /// `CKOperation.container` (deprecated in CloudKit): the configuration's container, whose
    /// private database runs the operation when ``database`` is not set.
    public var container: Container? {
        get { effectiveConfiguration.container }
        set { configuration.container = newValue }
    }

    /// The configuration in force: the operation's own explicit values, then those its
    /// database passes on, then its group's default configuration, then CloudKit's defaults.
    var effectiveConfiguration: OperationConfiguration {
        let (own, inherited, group) = settings.withLock { ($0.configuration, $0.inherited, $0.group) }
        var values = own?.explicitValues ?? OperationConfiguration.Values()
        if let inherited { values = values.over(inherited.explicitValues) }
        if let groupDefaults = group?.defaultConfiguration { values = values.over(groupDefaults.explicitValues) }
        return OperationConfiguration(values: values)
    }

    /// What a configured database gives the operations added to it: its configuration (below
    /// the operation's own) and its group, when the operation has none.
    func adopt(configuration: OperationConfiguration?, group: OperationGroup?) {
        settings.withLock { settings in
            if let configuration { settings.inherited = configuration }
            if settings.group == nil, let group { settings.group = group }
        }
        applyQualityOfService()
    }

    /// Gives the `Operation` the configured quality of service, when one was set explicitly
    /// (also by changing the configuration or the group's default configuration in place,
    /// which is applied when the operation is added to a database and when it starts).
    func applyQualityOfService() {
        let configured = effectiveConfiguration
        if configured.explicitValues.qualityOfService != nil { qualityOfService = configured.qualityOfService }
    }

    // MARK: - Timeouts

    /// Starts the resource timer: when it fires, the operation stops as a cancelled one does and
    /// reports the timeout. `nil` when the timeout is not finite and positive.
    func startResourceTimer() -> DispatchWorkItem? {
        let seconds = effectiveConfiguration.timeoutIntervalForResource
        guard seconds.isFinite, seconds > 0 else { return nil }
        let fire = DispatchWorkItem { [weak self] in
            guard let self else { return }
            self.settings.withLock { $0.timedOut = true }
            self.cancel()
        }
        Self.timerQueue.asyncAfter(deadline: .now() + seconds, execute: fire)
        return fire
    }

    /// A queue of its own: operations fill Dispatch's global pool (as wide as the machine has
    /// cores), and a timer queued behind them would fire only once one of them finished.
    private static let timerQueue = DispatchQueue(label: "Stratus.resource-timeouts")

    /// The operation's final error: a cancellation caused by the resource timeout becomes
    /// CloudKit's timeout error, keeping what the cancellation reported.
    func timedOutError(for error: StratusError) -> StratusError {
        guard error.code == .operationCancelled, settings.withLock({ $0.timedOut }) else { return error }
        let seconds = effectiveConfiguration.timeoutIntervalForResource
        var timeout = Self.timeoutError(
            "\(type(of: self)) did not finish within its resource timeout (timeoutIntervalForResource, \(seconds) s); it stopped after \(error.completedItemCount ?? 0) item(s)")
        timeout.completedItemCount = error.completedItemCount
        timeout.partialErrorsByRecordID = error.partialErrorsByRecordID
        timeout.partialErrorsByZoneID = error.partialErrorsByZoneID
        timeout.resumeCursor = error.resumeCursor
        return timeout
    }

    /// CloudKit's error for a timed-out request: `networkFailure` over `NSURLErrorTimedOut`.
    static func timeoutError(_ message: String) -> StratusError {
        var error = StratusError(.networkFailure, message)
        // NSURLErrorDomain / NSURLErrorTimedOut, spelled out: they live in FoundationNetworking on Linux.
        error.underlyingError = NSError(domain: "NSURLErrorDomain", code: -1001, userInfo: [NSLocalizedDescriptionKey: "The request timed out."])
        return error
    }
}
