import Foundation

/// A notification as a feed stores it (``NotificationRow/payload``): a small JSON object the
/// core writes by hand on the write path, and reads back into a ``StratusNotification``.
///
/// ```
/// {"type":1,"subscription":"big-orders","scope":1,"reason":1,"recordName":"o-1","zoneName":"_defaultZone",
///  "zoneOwner":"__defaultOwner__","recordType":"Order","fields":"{\"total\":[\"I\",120]}"}
/// ```
///
/// `fields` is a ``FieldDocument``; `alert` holds the texts copied from the subscription;
/// `read` is the sequence of the notification a `.readNotification` entry marks read.
struct NotificationPayload: Decodable {
    var type: Int
    var subscription: String?
    var scope: Int?
    var reason: Int?
    var recordName: String?
    var zoneName: String?
    var zoneOwner: String?
    var recordType: String?
    var fields: String?
    var alert: NotificationAlert?
    var read: Int64?

    // MARK: - Writing

    /// A query notification's payload.
    static func query(subscriptionID: String, scope: Database.Scope, reason: QueryNotification.Reason, recordID: Record.ID,
                      recordType: String, fields: [String: FieldValue], alert: NotificationAlert?) -> [UInt8] {
        var out = ByteOutput(capacity: 192)
        out.append("{\"type\":1,\"subscription\":")
        out.appendString(subscriptionID)
        out.append(",\"scope\":")
        out.appendInt(Int64(scope.rawValue))
        out.append(",\"reason\":")
        out.appendInt(Int64(reason.rawValue))
        out.append(",\"recordName\":")
        out.appendString(recordID.recordName)
        appendZone(recordID.zoneID, to: &out)
        out.append(",\"recordType\":")
        out.appendString(recordType)
        if !fields.isEmpty {
            out.append(",\"fields\":")
            out.appendString(FieldDocument.encode(fields, encryptedKeys: []))
        }
        appendAlert(alert, to: &out)
        out.append(UInt8(ascii: "}"))
        return Array(out.bytes)
    }

    /// A zone notification's payload.
    static func recordZone(subscriptionID: String, scope: Database.Scope, zoneID: RecordZone.ID, alert: NotificationAlert?) -> [UInt8] {
        var out = ByteOutput(capacity: 128)
        out.append("{\"type\":2,\"subscription\":")
        out.appendString(subscriptionID)
        out.append(",\"scope\":")
        out.appendInt(Int64(scope.rawValue))
        appendZone(zoneID, to: &out)
        appendAlert(alert, to: &out)
        out.append(UInt8(ascii: "}"))
        return Array(out.bytes)
    }

    /// A database notification's payload.
    static func database(subscriptionID: String, scope: Database.Scope, alert: NotificationAlert?) -> [UInt8] {
        var out = ByteOutput(capacity: 96)
        out.append("{\"type\":4,\"subscription\":")
        out.appendString(subscriptionID)
        out.append(",\"scope\":")
        out.appendInt(Int64(scope.rawValue))
        appendAlert(alert, to: &out)
        out.append(UInt8(ascii: "}"))
        return Array(out.bytes)
    }

    /// The entry that records that the notification at `sequence` was marked read.
    static func readMark(of sequence: Int64) -> [UInt8] {
        var out = ByteOutput(capacity: 32)
        out.append("{\"type\":3,\"read\":")
        out.appendInt(sequence)
        out.append(UInt8(ascii: "}"))
        return Array(out.bytes)
    }

    private static func appendZone(_ zoneID: RecordZone.ID, to out: inout ByteOutput) {
        out.append(",\"zoneName\":")
        out.appendString(zoneID.zoneName)
        out.append(",\"zoneOwner\":")
        out.appendString(zoneID.ownerName)
    }

    private static func appendAlert(_ alert: NotificationAlert?, to out: inout ByteOutput) {
        guard let alert, !alert.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Optional strings only: encoding cannot fail.
        let data = try! encoder.encode(alert)
        out.append(",\"alert\":")
        data.withUnsafeBytes { out.append($0.bindMemory(to: UInt8.self)) }
    }

    // MARK: - Reading

    /// The notification a stored entry holds.
    ///
    /// - Throws: `badDatabase` when the entry is not one this Stratus wrote.
    static func notification(_ stored: StoredNotification, feed: NotificationFeedID, store: String) throws -> StratusNotification {
        let payload: NotificationPayload
        do {
            payload = try JSONDecoder().decode(NotificationPayload.self, from: Data(stored.payload))
        } catch {
            throw StratusError(.badDatabase, "notification \(stored.sequence) of \(feed) is damaged: \(error)")
        }
        func damaged(_ what: String) -> StratusError {
            StratusError(.badDatabase, "notification \(stored.sequence) of \(feed) is damaged: \(what)")
        }
        guard let type = StratusNotification.NotificationType(rawValue: payload.type) else { throw damaged("unknown type \(payload.type)") }
        var parts = StratusNotification.Parts(
            type: type, id: StratusNotification.ID(store: store, feed: feed, sequence: stored.sequence), containerIdentifier: Container.Environment.split(storageContainer: feed.containerIdentifier).containerIdentifier,
            subscriber: feed.subscriber, subscriptionID: payload.subscription, creationDate: stored.createdAt.wholeMilliseconds, alert: payload.alert ?? .init(),
            feedSequence: stored.sequence)
        let scope = payload.scope.flatMap(Database.Scope.init(rawValue:)) ?? .private
        let zoneID = payload.zoneName.map { RecordZone.ID(zoneName: $0, ownerName: payload.zoneOwner ?? RecordZone.ID.currentUserDefaultOwner) }
        switch type {
        case .query:
            guard let reasonValue = payload.reason, let reason = QueryNotification.Reason(rawValue: reasonValue),
                  let name = payload.recordName, let zoneID else { throw damaged("a query notification without its record") }
            var fields: [String: FieldValue] = [:]
            if let document = payload.fields {
                fields = try FieldDocument.decodeDocument(document, zoneID: zoneID) { _ in nil }.fields
            }
            return QueryNotification(parts: parts, reason: reason, recordID: Record.ID(recordName: name, zoneID: zoneID),
                                     recordType: payload.recordType, scope: scope, fields: fields)
        case .recordZone:
            guard let zoneID else { throw damaged("a zone notification without its zone") }
            return RecordZoneNotification(parts: parts, recordZoneID: zoneID, scope: scope)
        case .database:
            return DatabaseNotification(parts: parts, scope: scope)
        case .readNotification:
            guard let read = payload.read else { throw damaged("a read mark without the notification it marks") }
            parts.id = StratusNotification.ID(store: store, feed: feed, sequence: read)
            return StratusNotification(parts: parts)
        }
    }
}
