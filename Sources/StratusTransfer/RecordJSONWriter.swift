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
        let (system, fields, encrypted, parent) = record.contents
        if let tag = system.recordChangeTag {
            out.append(",\"recordChangeTag\":")
            out.appendString(tag)
        }
        if let parent {
            out.append(",\"parent\":")
            appendReference(parent, zone: zoneID, withAction: false, to: &out)
        }
        out.append(",\"fields\":{")
        if !appendFieldsInLastOrder(fields, encrypted: encrypted, zone: zoneID, to: &out) {
            let order = fields.keys.sorted()
            for (place, key) in order.enumerated() {
                if place > 0 { out.append(UInt8(ascii: ",")) }
                appendField(key, fields[key]!, encrypted: encrypted, zone: zoneID, to: &out)
            }
            out.fieldOrder = order
        }
        out.append(UInt8(ascii: "}"))
        appendAuthorship("created", system.creationDate, system.creatorUserRecordID, to: &out)
        appendAuthorship("modified", system.modificationDate, system.lastModifiedUserRecordID, to: &out)
        out.append(",\"zoneID\":")
        appendZoneID(zoneID, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    private static func appendField(_ key: String, _ value: FieldValue, encrypted: Set<String>, zone: RecordZone.ID, to out: inout ByteOutput) {
        out.appendString(key)
        out.append(":{\"value\":")
        appendValue(value, field: key, zone: zone, to: &out)
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

    /// Writes the fields in key order when they have the keys of the record written before
    /// (``ByteOutput/fieldOrder``), as records of one type mostly do: each field as the
    /// dictionary yields it, then the pieces moved into order. That costs less than sorting the
    /// keys and looking each one up again. False, with nothing written, for other keys, and
    /// when a field has a problem (problems are reported for the first field in key order).
    private static func appendFieldsInLastOrder(_ fields: [String: FieldValue], encrypted: Set<String>, zone: RecordZone.ID, to out: inout ByteOutput) -> Bool {
        let count = fields.count
        guard count > 0 && count == out.fieldOrder.count else { return false }
        let start = out.count
        let problem = out.problem
        var order: [String] = []
        swap(&order, &out.fieldOrder)
        let written = withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: count) { pieces -> Bool in
            for (key, value) in fields {
                // Keys are unique, so a place for each key is a place for every key.
                guard let place = order.firstIndex(of: key) else { return false }
                let pieceStart = out.count
                appendField(key, value, encrypted: encrypted, zone: zone, to: &out)
                (pieces.baseAddress! + place).initialize(to: pieceStart..<out.count)
            }
            guard out.problem == problem else { return false }
            out.arrange(UnsafeBufferPointer(pieces), after: start, separator: UInt8(ascii: ","))
            return true
        }
        swap(&order, &out.fieldOrder)
        if !written {
            out.removeAll(from: start)
            out.problem = problem
        }
        return written
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
        case .stringList(let v): out.appendArray(v) { $1.appendString($0) }
        case .int64List(let v): out.appendArray(v) { $1.appendInt($0) }
        case .doubleList(let v): out.appendArray(v) { $1.appendDouble($0, field: field) }
        case .dateList(let v): out.appendArray(v) { $1.appendTimestamp($0, field: field) }
        case .bytesList(let v): out.appendArray(v) { $1.appendBase64($0) }
        case .referenceList(let v): out.appendArray(v) { appendReference($0, zone: zone, to: &$1) }
        case .locationList(let v): out.appendArray(v) { appendLocation($0, field: field, to: &$1) }
        case .assetList(let v): out.appendArray(v) { appendAsset($0, field: field, to: &$1) }
        }
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
        let members: [(StaticString, Double)] = [
            ("{\"latitude\":", l.latitude), (",\"longitude\":", l.longitude), (",\"altitude\":", l.altitude),
            (",\"horizontalAccuracy\":", l.horizontalAccuracy), (",\"verticalAccuracy\":", l.verticalAccuracy),
            (",\"course\":", l.course), (",\"speed\":", l.speed),
        ]
        for (name, value) in members {
            out.append(name)
            out.appendDouble(value, field: field)
        }
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
