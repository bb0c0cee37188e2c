import Foundation
import Stratus

extension RecordJSONWriter {
    /// A notification as one line of JSON, in the spirit of CloudKit JS's notification objects,
    /// with Stratus's feed place (`sequence`, unique and increasing in a feed) and creation time
    /// (milliseconds since 1970):
    ///
    /// ```
    /// {"notificationID":"12","sequence":12,"notificationType":"query","subscriptionID":"big-orders",
    ///  "containerIdentifier":"com.example.shop","databaseScope":"public","queryNotificationReason":"recordCreated",
    ///  "recordName":"o-1","recordType":"Order","zoneID":{…},"recordFields":{"total":{"value":120,"type":"INT64"}},"created":1732500000000}
    /// ```
    ///
    /// A zone notification has `"notificationType":"recordZone"` and a `zoneID`, a database
    /// notification `"database"`; a read mark `"readNotification"`, whose `notificationID` names
    /// the notification marked read. Alert texts, when the subscription has some, follow as
    /// `alertBody`, `alertLocalizationArgs`, ….
    ///
    /// ```swift
    /// for notification in batch.notifications { print(RecordJSONWriter.json(for: notification)) }
    /// ```
    public static func json(for notification: StratusNotification) -> String {
        var out = ByteOutput()
        out.append("{\"notificationID\":")
        out.appendString(notification.notificationID.map(String.init(describing:)) ?? "")
        out.append(",\"sequence\":")
        out.appendInt(notification.feedSequence)
        out.append(",\"notificationType\":")
        out.appendString(notification.notificationType.description)
        if let id = notification.subscriptionID {
            out.append(",\"subscriptionID\":")
            out.appendString(id)
        }
        if let container = notification.containerIdentifier {
            out.append(",\"containerIdentifier\":")
            out.appendString(container)
        }
        switch notification {
        case let query as QueryNotification:
            appendScope(query.databaseScope, to: &out)
            out.append(",\"queryNotificationReason\":")
            out.appendString(query.queryNotificationReason.description)
            if let id = query.recordID {
                out.append(",\"recordName\":")
                out.appendString(id.recordName)
                if let type = query.recordType {
                    out.append(",\"recordType\":")
                    out.appendString(type)
                }
                out.append(",\"zoneID\":")
                appendZoneID(id.zoneID, to: &out)
                if !query.recordFieldValues.isEmpty {
                    out.append(",\"recordFields\":{")
                    for (place, key) in query.recordFieldValues.keys.sorted().enumerated() {
                        if place > 0 { out.append(UInt8(ascii: ",")) }
                        let value = query.recordFieldValues[key]!
                        out.appendString(key)
                        out.append(":{\"value\":")
                        appendValue(value, field: key, zone: id.zoneID, to: &out)
                        out.append(",\"type\":\"")
                        out.appendRaw(value.type.rawValue)
                        out.append("\"}")
                    }
                    out.append(UInt8(ascii: "}"))
                }
            }
        case let zone as RecordZoneNotification:
            appendScope(zone.databaseScope, to: &out)
            if let zoneID = zone.recordZoneID {
                out.append(",\"zoneID\":")
                appendZoneID(zoneID, to: &out)
            }
        case let database as DatabaseNotification:
            appendScope(database.databaseScope, to: &out)
        default:
            break
        }
        appendText("alertBody", notification.alertBody, to: &out)
        appendText("alertLocalizationKey", notification.alertLocalizationKey, to: &out)
        appendTexts("alertLocalizationArgs", notification.alertLocalizationArgs, to: &out)
        appendText("title", notification.title, to: &out)
        appendText("titleLocalizationKey", notification.titleLocalizationKey, to: &out)
        appendTexts("titleLocalizationArgs", notification.titleLocalizationArgs, to: &out)
        appendText("subtitle", notification.subtitle, to: &out)
        appendText("subtitleLocalizationKey", notification.subtitleLocalizationKey, to: &out)
        appendTexts("subtitleLocalizationArgs", notification.subtitleLocalizationArgs, to: &out)
        appendText("alertActionLocalizationKey", notification.alertActionLocalizationKey, to: &out)
        appendText("alertLaunchImage", notification.alertLaunchImage, to: &out)
        appendText("soundName", notification.soundName, to: &out)
        appendText("category", notification.category, to: &out)
        out.append(",\"created\":")
        out.appendTimestamp(notification.creationDate, field: "created")
        out.append(UInt8(ascii: "}"))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// A subscription as one line of JSON, in the shape of CloudKit Web Services'
    /// subscription dictionaries (`subscriptionID`, `subscriptionType` `query` or `zone`,
    /// `firesOn`, `firesOnce`, `zoneID`, `zoneWide`), with the record type and the predicate as
    /// a format string, and `"subscriptionType":"database"` for database subscriptions:
    ///
    /// ```
    /// {"subscriptionID":"big-orders","subscriptionType":"query","recordType":"Order","predicate":"total > 100",
    ///  "firesOn":["create","update"],"firesOnce":false}
    /// ```
    ///
    /// ```swift
    /// for subscription in try await database.allSubscriptions() { print(RecordJSONWriter.json(for: subscription)) }
    /// ```
    public static func json(for subscription: Subscription) -> String {
        var out = ByteOutput()
        out.append("{\"subscriptionID\":")
        out.appendString(subscription.subscriptionID)
        switch subscription {
        case let query as QuerySubscription:
            out.append(",\"subscriptionType\":\"query\",\"recordType\":")
            out.appendString(query.recordType ?? "")
            out.append(",\"predicate\":")
            out.appendString(query.predicate.description)
            out.append(",\"firesOn\":[")
            let fires = QuerySubscription.Options.names.filter { query.querySubscriptionOptions.contains($0.1) }.map(\.0)
            for (place, name) in fires.enumerated() {
                if place > 0 { out.append(UInt8(ascii: ",")) }
                out.appendString(name)
            }
            out.append(query.querySubscriptionOptions.contains(.firesOnce) ? "],\"firesOnce\":true" : "],\"firesOnce\":false")
            if let zoneID = query.zoneID {
                out.append(",\"zoneID\":")
                appendZoneID(zoneID, to: &out)
            }
        case let zone as RecordZoneSubscription:
            out.append(",\"subscriptionType\":\"zone\",\"zoneWide\":true,\"zoneID\":")
            appendZoneID(zone.zoneID, to: &out)
            appendText("recordType", zone.recordType, to: &out)
        case let database as DatabaseSubscription:
            out.append(",\"subscriptionType\":\"database\"")
            appendText("recordType", database.recordType, to: &out)
        default:
            break
        }
        if let keys = subscription.notificationInfo?.desiredKeys {
            out.append(",\"notificationInfo\":{")
            appendTexts("desiredKeys", keys, to: &out, first: true)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    private static func appendScope(_ scope: Database.Scope, to out: inout ByteOutput) {
        out.append(",\"databaseScope\":")
        out.appendString(scope.name)
    }

    private static func appendText(_ name: String, _ text: String?, to out: inout ByteOutput) {
        guard let text else { return }
        out.append(UInt8(ascii: ","))
        out.appendString(name)
        out.append(UInt8(ascii: ":"))
        out.appendString(text)
    }

    private static func appendTexts(_ name: String, _ texts: [String]?, to out: inout ByteOutput, first: Bool = false) {
        guard let texts else { return }
        if !first { out.append(UInt8(ascii: ",")) }
        out.appendString(name)
        out.append(":[")
        for (place, text) in texts.enumerated() {
            if place > 0 { out.append(UInt8(ascii: ",")) }
            out.appendString(text)
        }
        out.append(UInt8(ascii: "]"))
    }
}
