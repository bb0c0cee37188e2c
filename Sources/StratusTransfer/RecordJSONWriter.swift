import Foundation
import Stratus

/// Writes records in the JSON shape of CloudKit Web Services (`records/query` answers).
///
/// `{"recordName", "recordType", "recordChangeTag", "parent": {"recordName"}, "fields": {"title":
/// {"value": "Milk", "type": "STRING"}}, "created": {"timestamp", "userRecordName"}, "modified":
/// {…}, "zoneID": {"zoneName", "ownerRecordName"}}`. Fields come sorted by key; encrypted values
/// (``Record/encryptedValues``) are `ENCRYPTED_BYTES` for bytes and carry `"isEncrypted": true`
/// otherwise, as CloudKit writes them; `parent` appears when the record has one. Timestamps are
/// milliseconds since 1970, with a decimal fraction when the date is not on a whole
/// millisecond (chosen so that reading gives back the identical `Date`); bytes are base64;
/// references carry a `zoneID` only when it differs from the record's; assets are
/// `{"size", "downloadURL"}` with a `file:` URL. ``RecordReader`` reads all of it back.
///
/// ```swift
/// print(RecordJSONWriter.json(for: record))   // one NDJSON line
/// ```
public enum RecordJSONWriter {
    /// The record as one line of JSON. Values JSON cannot hold (a non-finite number, which a
    /// store never returns) are written as `null`; ``RecordWriter`` refuses them instead.
    public static func json(for record: Record) -> String {
        var out = ByteOutput()
        append(record, to: &out)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    static func append(_ record: Record, to out: inout ByteOutput) {
        let zoneID = record.recordID.zoneID
        out.append("{\"recordName\":")
        out.appendString(record.recordID.recordName)
        out.append(",\"recordType\":")
        out.appendString(record.recordType)
        let system = record.systemFields
        if let tag = system.recordChangeTag {
            out.append(",\"recordChangeTag\":")
            out.appendString(tag)
        }
        if let parent = record.parent {
            out.append(",\"parent\":")
            appendReference(parent, zone: zoneID, withAction: false, to: &out)
        }
        out.append(",\"fields\":{")
        let fields = record.fieldValues
        let encrypted = record.encryptedKeys
        var order: [String] = []
        swap(&order, &out.fieldOrder)
        forEachField(of: fields, sortedBy: &order) { key, value, first in
            if !first { out.append(UInt8(ascii: ",")) }
            out.appendString(key)
            out.append(":{\"value\":")
            appendValue(value, field: key, zone: zoneID, to: &out)
            if encrypted.isEmpty || !encrypted.contains(key) {
                out.append(",\"type\":\"")
                out.appendRaw(value.type.rawValue)
                out.append("\"}")
            } else if case .bytes = value {
                out.append(",\"type\":\"ENCRYPTED_BYTES\"}")
            } else {
                out.append(",\"type\":\"")
                out.appendRaw(value.type.rawValue)
                out.append("\",\"isEncrypted\":true}")
            }
        }
        swap(&order, &out.fieldOrder)
        out.append(UInt8(ascii: "}"))
        appendAuthorship("created", system.creationDate, system.creatorUserRecordID, to: &out)
        appendAuthorship("modified", system.modificationDate, system.lastModifiedUserRecordID, to: &out)
        out.append(",\"zoneID\":")
        appendZoneID(zoneID, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Calls `body` with each field in key order. `order` holds the sorted keys of the record
    /// before: records of one type mostly have the same keys, and matching each key to its
    /// place there costs less than sorting the keys and looking each one up again.
    private static func forEachField(
        of fields: [String: FieldValue], sortedBy order: inout [String], _ body: (String, FieldValue, Bool) -> Void
    ) {
        let count = fields.count
        if count == order.count && count <= 64 {
            let matched = withUnsafeTemporaryAllocation(of: (key: String, value: FieldValue).self, capacity: count) { slots -> Bool in
                var placed: UInt64 = 0
                defer {
                    for place in 0..<count where placed & (1 << place) != 0 { (slots.baseAddress! + place).deinitialize(count: 1) }
                }
                for field in fields {
                    guard let place = order.firstIndex(of: field.key) else { return false }
                    (slots.baseAddress! + place).initialize(to: field)
                    placed |= 1 << place
                }
                // Keys are unique, so a place for each key is a place for every key.
                for place in 0..<count { body(slots[place].key, slots[place].value, place == 0) }
                return true
            }
            if matched { return }
        }
        order = fields.keys.sorted()
        for (place, key) in order.enumerated() { body(key, fields[key]!, place == 0) }
    }

    private static func appendAuthorship(_ name: StaticString, _ date: Date?, _ user: Record.ID?, to out: inout ByteOutput) {
        guard date != nil || user != nil else { return }
        out.append(",\"")
        out.append(name)
        out.append("\":{")
        if let date {
            out.append("\"timestamp\":")
            out.appendTimestamp(date, field: name.description)
        }
        if let user {
            if date != nil { out.append(UInt8(ascii: ",")) }
            out.append("\"userRecordName\":")
            out.appendString(user.recordName)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendZoneID(_ zoneID: RecordZone.ID, to out: inout ByteOutput) {
        out.append("{\"zoneName\":")
        out.appendString(zoneID.zoneName)
        out.append(",\"ownerRecordName\":")
        out.appendString(zoneID.ownerName)
        out.append(UInt8(ascii: "}"))
    }

    /// Appends a value as it appears under `"value"`.
    static func appendValue(_ value: FieldValue, field: String, zone: RecordZone.ID, to out: inout ByteOutput) {
        switch value {
        case .string(let s): out.appendString(s)
        case .int64(let i): out.appendInt(i)
        case .double(let d): out.appendDouble(d, field: field)
        case .date(let d): out.appendTimestamp(d, field: field)
        case .bytes(let b): out.appendBase64(b)
        case .reference(let r): appendReference(r, zone: zone, to: &out)
        case .location(let l): appendLocation(l, field: field, to: &out)
        case .asset(let a): appendAsset(a, field: field, to: &out)
        case .stringList(let v): appendList(v, to: &out) { $1.appendString($0) }
        case .int64List(let v): appendList(v, to: &out) { $1.appendInt($0) }
        case .doubleList(let v): appendList(v, to: &out) { $1.appendDouble($0, field: field) }
        case .dateList(let v): appendList(v, to: &out) { $1.appendTimestamp($0, field: field) }
        case .bytesList(let v): appendList(v, to: &out) { $1.appendBase64($0) }
        case .referenceList(let v): appendList(v, to: &out) { appendReference($0, zone: zone, to: &$1) }
        case .locationList(let v): appendList(v, to: &out) { appendLocation($0, field: field, to: &$1) }
        case .assetList(let v): appendList(v, to: &out) { appendAsset($0, field: field, to: &$1) }
        }
    }

    private static func appendList<T>(_ values: [T], to out: inout ByteOutput, _ element: (T, inout ByteOutput) -> Void) {
        out.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            element(v, &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    static func appendReference(_ reference: Record.Reference, zone: RecordZone.ID, withAction: Bool = true, to out: inout ByteOutput) {
        out.append("{\"recordName\":")
        out.appendString(reference.recordID.recordName)
        if withAction { out.append(reference.action == .deleteSelf ? ",\"action\":\"DELETE_SELF\"" : ",\"action\":\"NONE\"") }
        if reference.recordID.zoneID != zone {
            out.append(",\"zoneID\":")
            appendZoneID(reference.recordID.zoneID, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendLocation(_ l: Location, field: String, to out: inout ByteOutput) {
        out.append("{\"latitude\":")
        out.appendDouble(l.latitude, field: field)
        out.append(",\"longitude\":")
        out.appendDouble(l.longitude, field: field)
        out.append(",\"altitude\":")
        out.appendDouble(l.altitude, field: field)
        out.append(",\"horizontalAccuracy\":")
        out.appendDouble(l.horizontalAccuracy, field: field)
        out.append(",\"verticalAccuracy\":")
        out.appendDouble(l.verticalAccuracy, field: field)
        out.append(",\"course\":")
        out.appendDouble(l.course, field: field)
        out.append(",\"speed\":")
        out.appendDouble(l.speed, field: field)
        out.append(",\"timestamp\":")
        out.appendTimestamp(l.timestamp, field: field)
        out.append(UInt8(ascii: "}"))
    }

    static func appendAsset(_ asset: Asset, field: String, to out: inout ByteOutput) {
        out.append(UInt8(ascii: "{"))
        if let size = asset.size {
            out.append("\"size\":")
            out.appendInt(size)
            out.append(UInt8(ascii: ","))
        }
        out.append("\"downloadURL\":")
        if let url = asset.fileURL {
            out.appendString(url.absoluteString)
        } else {
            if out.problem == nil { out.problem = "field '\(field)' holds an asset without a file" }
            out.append("\"\"")
        }
        out.append(UInt8(ascii: "}"))
    }
}
