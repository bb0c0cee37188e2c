import Foundation
import Stratus

/// Writes records in the JSON shape of CloudKit Web Services (`records/query` answers).
///
/// `{"recordName", "recordType", "recordChangeTag", "fields": {"title": {"value": "Milk",
/// "type": "STRING"}}, "created": {"timestamp", "userRecordName"}, "modified": {…},
/// "zoneID": {"zoneName", "ownerRecordName"}}`. Timestamps are milliseconds since 1970
/// (with a fraction when the date has sub-millisecond precision), bytes are base64.
///
/// ```swift
/// print(RecordJSONWriter.json(for: record))   // one NDJSON line
/// ```
public enum RecordJSONWriter {
    /// The record as one line of JSON.
    public static func json(for record: Record) -> String {
        var out = "{\"recordName\":"
        JSONText.appendString(record.recordID.recordName, to: &out)
        out += ",\"recordType\":"
        JSONText.appendString(record.recordType, to: &out)
        if let tag = record.recordChangeTag {
            out += ",\"recordChangeTag\":"
            JSONText.appendString(tag, to: &out)
        }
        out += ",\"fields\":{"
        for (index, key) in record.allKeys().enumerated() {
            guard let value = record.value(forKey: key) else { continue }
            if index > 0 { out += "," }
            JSONText.appendString(key, to: &out)
            out += ":{\"value\":"
            appendValue(value, to: &out)
            out += ",\"type\":\"\(value.type.rawValue)\"}"
        }
        out += "}"
        let system = record.systemFields
        for (name, date, user) in [("created", system.creationDate, system.creatorUserRecordID), ("modified", system.modificationDate, system.lastModifiedUserRecordID)] {
            guard let date else { continue }
            out += ",\"\(name)\":{\"timestamp\":"
            appendTimestamp(date, to: &out)
            if let user {
                out += ",\"userRecordName\":"
                JSONText.appendString(user.recordName, to: &out)
            }
            out += "}"
        }
        out += ",\"zoneID\":{\"zoneName\":"
        JSONText.appendString(record.recordID.zoneID.zoneName, to: &out)
        out += ",\"ownerRecordName\":"
        JSONText.appendString(record.recordID.zoneID.ownerName, to: &out)
        out += "}}"
        return out
    }

    static func appendValue(_ value: FieldValue, to out: inout String) {
        switch value {
        case .string(let s): JSONText.appendString(s, to: &out)
        case .int64(let i): out += String(i)
        case .double(let d): JSONText.appendDouble(d, to: &out)
        case .date(let d): appendTimestamp(d, to: &out)
        case .bytes(let b): JSONText.appendString(b.base64EncodedString(), to: &out)
        case .reference(let r): appendReference(r, to: &out)
        case .location(let l): appendLocation(l, to: &out)
        case .asset(let a): appendAsset(a, to: &out)
        case .stringList(let v): JSONText.appendArray(v, to: &out) { JSONText.appendString($0, to: &$1) }
        case .int64List(let v): JSONText.appendArray(v, to: &out) { $1 += String($0) }
        case .doubleList(let v): JSONText.appendArray(v, to: &out) { JSONText.appendDouble($0, to: &$1) }
        case .dateList(let v): JSONText.appendArray(v, to: &out) { appendTimestamp($0, to: &$1) }
        case .bytesList(let v): JSONText.appendArray(v, to: &out) { JSONText.appendString($0.base64EncodedString(), to: &$1) }
        case .referenceList(let v): JSONText.appendArray(v, to: &out) { appendReference($0, to: &$1) }
        case .locationList(let v): JSONText.appendArray(v, to: &out) { appendLocation($0, to: &$1) }
        case .assetList(let v): JSONText.appendArray(v, to: &out) { appendAsset($0, to: &$1) }
        }
    }

    /// Milliseconds since 1970, as an integer when the date falls on a whole millisecond.
    static func appendTimestamp(_ date: Date, to out: inout String) {
        let milliseconds = date.timeIntervalSince1970 * 1000
        if milliseconds == milliseconds.rounded(), abs(milliseconds) < 9e15 {
            out += String(Int64(milliseconds))
        } else {
            JSONText.appendDouble(milliseconds, to: &out)
        }
    }

    private static func appendReference(_ reference: Record.Reference, to out: inout String) {
        out += "{\"recordName\":"
        JSONText.appendString(reference.recordID.recordName, to: &out)
        out += ",\"action\":\"\(reference.action == .deleteSelf ? "DELETE_SELF" : "NONE")\"}"
    }

    private static func appendLocation(_ l: Location, to out: inout String) {
        out += "{"
        let parts: [(String, Double)] = [("latitude", l.latitude), ("longitude", l.longitude), ("altitude", l.altitude),
                                         ("horizontalAccuracy", l.horizontalAccuracy), ("verticalAccuracy", l.verticalAccuracy),
                                         ("course", l.course), ("speed", l.speed)]
        for (name, value) in parts {
            out += "\"\(name)\":"
            JSONText.appendDouble(value, to: &out)
            out += ","
        }
        out += "\"timestamp\":"
        appendTimestamp(l.timestamp, to: &out)
        out += "}"
    }

    private static func appendAsset(_ asset: Asset, to out: inout String) {
        out += "{"
        if let size = asset.size { out += "\"size\":\(size)," }
        out += "\"downloadURL\":"
        JSONText.appendString(asset.fileURL?.absoluteString ?? "", to: &out)
        out += "}"
    }

}
