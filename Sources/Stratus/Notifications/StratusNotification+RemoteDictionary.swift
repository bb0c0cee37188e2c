import Foundation

/// What lets `StratusNotification(fromRemoteNotificationDictionary:)` answer a
/// ``QueryNotification``, ``RecordZoneNotification`` or ``DatabaseNotification``, as
/// `CKNotification(fromRemoteNotificationDictionary:)` answers the subclass a payload names.
///
/// A Swift class's own initializer cannot make an instance of a subclass; an initializer of a
/// protocol extension can, and this protocol exists to hold it. Every notification class
/// adopts it; nothing else needs to.
///
/// ```swift
/// if let query = CKNotification(fromRemoteNotificationDictionary: userInfo) as? CKQueryNotification { print(query.recordID!) }
/// ```
public protocol RemoteNotificationDictionaryReadable {}

extension StratusNotification: RemoteNotificationDictionaryReadable {}

extension RemoteNotificationDictionaryReadable {
    /// The notification a push payload in CloudKit's layout holds (a `userInfo` your program
    /// received, or a ``StratusNotification/remoteNotificationDictionary`` a server sent on), as
    /// an instance of the class it names; `nil` when the dictionary holds no CloudKit
    /// notification, or one of another class than the one called.
    ///
    /// ```swift
    /// let notification = StratusNotification(fromRemoteNotificationDictionary: userInfo)
    /// let zoneChange = RecordZoneNotification(fromRemoteNotificationDictionary: userInfo)   // nil for a query's
    /// ```
    ///
    /// A notification read this way has the ``StratusNotification/notificationID`` of its feed
    /// when a Stratus store wrote the payload (so it can be marked read there), and none when
    /// CloudKit did.
    public init?(fromRemoteNotificationDictionary dictionary: [AnyHashable: Any]) {
        guard let notification = StratusNotification.read(remoteNotificationDictionary: dictionary) as? Self else { return nil }
        self = notification
    }
}

extension StratusNotification {
    /// The notification as a push payload in CloudKit's layout: `ck` (the container `cid`, the
    /// notification `nid`, the subscriber `ckuserid`, and `qry`, `fet` or `met` for a query,
    /// zone or database notification, each with the subscription `sid` and the database scope
    /// `dbs`), and `aps` with the subscription's alert texts. A Stratus addition, for a server
    /// that sends notifications on to clients which read them with
    /// `CKNotification(fromRemoteNotificationDictionary:)`; the dictionary is valid JSON.
    ///
    /// ```swift
    /// let body = try JSONSerialization.data(withJSONObject: notification.remoteNotificationDictionary)
    /// ```
    ///
    /// `dbs` is the database scope's raw value (1 public, 2 private, 3 shared) and `fo` the query
    /// notification's reason (1 created, 2 updated, 3 deleted). A query notification's desired
    /// values (`af`) are JSON values: strings, numbers, dates as milliseconds since 1970,
    /// references as record names, and lists of those; other values are left out. `crt` (the
    /// creation time, in milliseconds since 1970) is Stratus's own.
    public var remoteNotificationDictionary: [AnyHashable: Any] {
        var ck: [String: Any] = ["crt": Int64((creationDate.timeIntervalSince1970 * 1000).rounded())]
        if let containerIdentifier { ck["cid"] = containerIdentifier }
        if let notificationID { ck["nid"] = notificationID.remoteText }
        if let owner = subscriptionOwnerUserRecordID { ck["ckuserid"] = owner.recordName }
        var subscription: [String: Any] = [:]
        if let subscriptionID { subscription["sid"] = subscriptionID }
        switch self {
        case let query as QueryNotification:
            subscription["dbs"] = query.databaseScope.rawValue
            subscription["fo"] = query.queryNotificationReason.rawValue
            if let recordID = query.recordID {
                subscription["rid"] = recordID.recordName
                subscription["zid"] = recordID.zoneID.zoneName
                subscription["zoid"] = recordID.zoneID.ownerName
            }
            if let recordType = query.recordType { subscription["rt"] = recordType }
            let fields = query.recordFieldValues.compactMapValues(Self.jsonValue)
            if !fields.isEmpty { subscription["af"] = fields }
            ck["qry"] = subscription
        case let zone as RecordZoneNotification:
            subscription["dbs"] = zone.databaseScope.rawValue
            if let zoneID = zone.recordZoneID {
                subscription["zid"] = zoneID.zoneName
                subscription["zoid"] = zoneID.ownerName
            }
            ck["fet"] = subscription
        case let database as DatabaseNotification:
            subscription["dbs"] = database.databaseScope.rawValue
            ck["met"] = subscription
        default:
            break
        }
        var payload: [AnyHashable: Any] = ["ck": ck]
        let aps = alert.apsDictionary
        if !aps.isEmpty { payload["aps"] = aps }
        return payload
    }

    private static func jsonValue(_ value: FieldValue) -> Any? {
        switch value {
        case .string(let text): text
        case .int64(let number): number
        case .double(let number): number.isFinite ? number : nil
        case .date(let date): Int64((date.timeIntervalSince1970 * 1000).rounded())
        case .reference(let reference): reference.recordID.recordName
        case .stringList(let texts): texts
        case .int64List(let numbers): numbers
        case .doubleList(let numbers): numbers.allSatisfy(\.isFinite) ? numbers : nil
        case .dateList(let dates): dates.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
        case .referenceList(let references): references.map(\.recordID.recordName)
        case .bytes, .location, .asset, .bytesList, .locationList, .assetList: nil
        }
    }

    /// The notification `dictionary` holds in CloudKit's push layout, or nil.
    static func read(remoteNotificationDictionary dictionary: [AnyHashable: Any]) -> StratusNotification? {
        guard let ck = dictionary["ck"] as? [AnyHashable: Any] else { return nil }
        let (type, subscription): (NotificationType, [AnyHashable: Any])
        if let query = ck["qry"] as? [AnyHashable: Any] {
            (type, subscription) = (.query, query)
        } else if let zone = ck["fet"] as? [AnyHashable: Any] {
            (type, subscription) = (.recordZone, zone)
        } else if let database = ck["met"] as? [AnyHashable: Any] {
            (type, subscription) = (.database, database)
        } else {
            return nil
        }
        let created = (ck["crt"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue / 1000) } ?? Date()
        let parts = Parts(
            type: type, id: (ck["nid"] as? String).flatMap(ID.init(remoteText:)), containerIdentifier: ck["cid"] as? String ?? "",
            subscriber: ck["ckuserid"] as? String ?? RecordZone.ID.currentUserDefaultOwner, subscriptionID: subscription["sid"] as? String,
            creationDate: created, alert: NotificationAlert(apsDictionary: dictionary["aps"] as? [AnyHashable: Any] ?? [:]),
            feedSequence: 0)
        let scope = (subscription["dbs"] as? NSNumber).flatMap { Database.Scope(rawValue: $0.intValue) } ?? .private
        let zoneID = (subscription["zid"] as? String).map {
            RecordZone.ID(zoneName: $0, ownerName: subscription["zoid"] as? String ?? RecordZone.ID.currentUserDefaultOwner)
        }
        switch type {
        case .query:
            let reason = (subscription["fo"] as? NSNumber).flatMap { QueryNotification.Reason(rawValue: $0.intValue) } ?? .recordUpdated
            let recordID = (subscription["rid"] as? String).map { Record.ID(recordName: $0, zoneID: zoneID ?? .default) }
            let given = subscription["af"] as? [AnyHashable: Any] ?? [:]
            var fields: [String: FieldValue] = [:]
            for (key, value) in given {
                if let key = key as? String, let field = fieldValue(value) { fields[key] = field }
            }
            return QueryNotification(parts: parts, reason: reason, recordID: recordID, recordType: subscription["rt"] as? String, scope: scope, fields: fields)
        case .recordZone:
            guard let zoneID else { return nil }
            return RecordZoneNotification(parts: parts, recordZoneID: zoneID, scope: scope)
        default:
            return DatabaseNotification(parts: parts, scope: scope)
        }
    }

    /// A desired value as JSON gives it: a string, a number (whole numbers as INT64), or a
    /// list of either.
    private static func fieldValue(_ value: Any) -> FieldValue? {
        switch value {
        case let text as String: return .string(text)
        case let number as NSNumber: return isWhole(number) ? .int64(number.int64Value) : .double(number.doubleValue)
        case let texts as [String]: return .stringList(texts)
        case let numbers as [NSNumber]:
            return numbers.allSatisfy(isWhole) ? .int64List(numbers.map(\.int64Value)) : .doubleList(numbers.map(\.doubleValue))
        default: return nil
        }
    }

    private static func isWhole(_ number: NSNumber) -> Bool {
        // JSON's numbers come as NSNumbers; one written with a fraction or exponent is a double.
        let kind = String(cString: number.objCType)
        return kind != "d" && kind != "f"
    }
}

extension StratusNotification.ID {
    /// The ID as a push payload's `nid`: the store, the feed and the place in it.
    var remoteText: String { [store, feed, String(sequence)].joined(separator: "\u{1F}") }

    /// An ID a Stratus payload's `nid` holds; nil for CloudKit's own (a UUID).
    init?(remoteText: String) {
        // The feed holds one separator of its own (container, subscriber).
        let parts = remoteText.split(separator: "\u{1F}", omittingEmptySubsequences: false)
        guard parts.count == 4, let sequence = Int64(parts[3]) else { return nil }
        self.store = String(parts[0])
        self.feed = String(parts[1]) + "\u{1F}" + String(parts[2])
        self.sequence = sequence
    }
}

extension NotificationAlert {
    /// The alert as APNs' `aps` dictionary carries it.
    var apsDictionary: [String: Any] {
        var alert: [String: Any] = [:]
        alert["body"] = alertBody
        alert["loc-key"] = alertLocalizationKey
        alert["loc-args"] = alertLocalizationArgs
        alert["title"] = title
        alert["title-loc-key"] = titleLocalizationKey
        alert["title-loc-args"] = titleLocalizationArgs
        alert["subtitle"] = subtitle
        alert["subtitle-loc-key"] = subtitleLocalizationKey
        alert["subtitle-loc-args"] = subtitleLocalizationArgs
        alert["action-loc-key"] = alertActionLocalizationKey
        alert["launch-image"] = alertLaunchImage
        var aps: [String: Any] = [:]
        if !alert.isEmpty { aps["alert"] = alert }
        aps["sound"] = soundName
        aps["category"] = category
        return aps
    }

    /// The alert an `aps` dictionary carries (`alert` as a dictionary, or a plain body text).
    init(apsDictionary aps: [AnyHashable: Any]) {
        self.init()
        if let body = aps["alert"] as? String { alertBody = body }
        let alert = aps["alert"] as? [AnyHashable: Any] ?? [:]
        alertBody = alert["body"] as? String ?? alertBody
        alertLocalizationKey = alert["loc-key"] as? String
        alertLocalizationArgs = alert["loc-args"] as? [String]
        title = alert["title"] as? String
        titleLocalizationKey = alert["title-loc-key"] as? String
        titleLocalizationArgs = alert["title-loc-args"] as? [String]
        subtitle = alert["subtitle"] as? String
        subtitleLocalizationKey = alert["subtitle-loc-key"] as? String
        subtitleLocalizationArgs = alert["subtitle-loc-args"] as? [String]
        alertActionLocalizationKey = alert["action-loc-key"] as? String
        alertLaunchImage = alert["launch-image"] as? String
        soundName = aps["sound"] as? String
        category = aps["category"] as? String
    }
}
