import Foundation
import Synchronization

extension FetchRecordZoneChangesOperation {
    /// Where to start in one zone, and how, like `CKFetchRecordZoneChangesOperation.ZoneConfiguration`.
    ///
    /// A class, as CloudKit's: a configuration changed after it was handed to an operation
    /// that has not started yet changes what the operation fetches.
    ///
    /// ```swift
    /// let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: token, resultsLimit: 200, desiredKeys: ["title"])
    /// ```
    public final class ZoneConfiguration: NSObject, NSCopying, Sendable {
        private struct Values: Sendable {
            var previousServerChangeToken: ServerChangeToken?
            var resultsLimit: Int
            var desiredKeys: [Record.FieldKey]?
        }
        private let values: Mutex<Values>

        /// A configuration; `resultsLimit` `nil` or 0 means
        /// ``FetchRecordZoneChangesOperation/defaultResultsLimit`` changes per batch.
        public init(previousServerChangeToken: ServerChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [Record.FieldKey]? = nil) {
            values = Mutex(Values(previousServerChangeToken: previousServerChangeToken, resultsLimit: resultsLimit ?? 0, desiredKeys: desiredKeys))
            super.init()
        }

        public override convenience init() { self.init(previousServerChangeToken: nil) }

        /// The token from the last fetch; `nil` fetches the zone from its beginning.
        public var previousServerChangeToken: ServerChangeToken? {
            get { values.withLock { $0.previousServerChangeToken } }
            set { values.withLock { $0.previousServerChangeToken = newValue } }
        }

        /// Changes per batch; 0 means ``FetchRecordZoneChangesOperation/defaultResultsLimit``.
        public var resultsLimit: Int {
            get { values.withLock { $0.resultsLimit } }
            set { values.withLock { $0.resultsLimit = newValue } }
        }

        /// The keys changed records carry; all keys when `nil`.
        public var desiredKeys: [Record.FieldKey]? {
            get { values.withLock { $0.desiredKeys } }
            set { values.withLock { $0.desiredKeys = newValue } }
        }

        public func copy(with zone: NSZone? = nil) -> Any {
            let v = values.withLock { $0 }
            return ZoneConfiguration(previousServerChangeToken: v.previousServerChangeToken, resultsLimit: v.resultsLimit, desiredKeys: v.desiredKeys)
        }

        public override func isEqual(_ object: Any?) -> Bool {
            guard let other = object as? ZoneConfiguration else { return false }
            return previousServerChangeToken == other.previousServerChangeToken && resultsLimit == other.resultsLimit && desiredKeys == other.desiredKeys
        }

        public override var hash: Int {
            var hasher = Hasher()
            hasher.combine(previousServerChangeToken)
            hasher.combine(resultsLimit)
            hasher.combine(desiredKeys)
            return hasher.finalize()
        }
    }

    /// CloudKit's older per-zone options (`CKFetchRecordZoneChangesOperation.ZoneOptions`,
    /// deprecated in favour of ``ZoneConfiguration``), for ``init(recordZoneIDs:optionsByRecordZoneID:)``.
    ///
    /// ```swift
    /// let options = FetchRecordZoneChangesOperation.ZoneOptions()
    /// options.previousServerChangeToken = token
    /// let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], optionsByRecordZoneID: [zoneID: options])
    /// ```
    public final class ZoneOptions: NSObject, Sendable {
        private struct Values: Sendable {
            var previousServerChangeToken: ServerChangeToken?
            var resultsLimit = 0
            var desiredKeys: [Record.FieldKey]?
        }
        private let values = Mutex(Values())

        public override init() { super.init() }

        /// The token from the last fetch; `nil` fetches the zone from its beginning.
        public var previousServerChangeToken: ServerChangeToken? {
            get { values.withLock { $0.previousServerChangeToken } }
            set { values.withLock { $0.previousServerChangeToken = newValue } }
        }

        /// Changes per batch; 0 (the default) means ``FetchRecordZoneChangesOperation/defaultResultsLimit``.
        public var resultsLimit: Int {
            get { values.withLock { $0.resultsLimit } }
            set { values.withLock { $0.resultsLimit = newValue } }
        }

        /// The keys changed records carry; all keys when `nil`.
        public var desiredKeys: [Record.FieldKey]? {
            get { values.withLock { $0.desiredKeys } }
            set { values.withLock { $0.desiredKeys = newValue } }
        }

        /// The same options as a ``ZoneConfiguration``.
        var configuration: ZoneConfiguration {
            ZoneConfiguration(previousServerChangeToken: previousServerChangeToken, resultsLimit: resultsLimit, desiredKeys: desiredKeys)
        }
    }
}
