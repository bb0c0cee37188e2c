import Foundation
import Stratus

extension RecordJSONWriter {
    /// A deletion as CloudKit's `changes/zone` answers carry it, plus the record type
    /// Stratus keeps in its tombstones.
    ///
    /// `{"recordName":"note-1","recordType":"Note","deleted":true,"zoneID":{"zoneName":"Notes","ownerRecordName":"__defaultOwner__"}}`
    ///
    /// ```swift
    /// print(RecordJSONWriter.json(forDeletionOf: id, recordType: "Note"))
    /// ```
    public static func json(forDeletionOf recordID: Record.ID, recordType: String?) -> String {
        var out = ByteOutput()
        out.append("{\"recordName\":")
        out.appendString(recordID.recordName)
        if let recordType {
            out.append(",\"recordType\":")
            out.appendString(recordType)
        }
        out.append(",\"deleted\":true,\"zoneID\":")
        appendZoneID(recordID.zoneID, to: &out)
        out.append(UInt8(ascii: "}"))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// A zone as CloudKit's `zones/list` answers it, with its capabilities.
    ///
    /// `{"zoneID":{"zoneName":"Photos","ownerRecordName":"__defaultOwner__"},"atomic":true,"fetchChanges":true}`
    ///
    /// ```swift
    /// for zone in try await database.allRecordZones() { print(RecordJSONWriter.json(for: zone)) }
    /// ```
    public static func json(for zone: RecordZone) -> String {
        var out = ByteOutput()
        out.append("{\"zoneID\":")
        appendZoneID(zone.zoneID, to: &out)
        out.append(zone.capabilities.contains(.atomic) ? ",\"atomic\":true" : ",\"atomic\":false")
        out.append(zone.capabilities.contains(.fetchChanges) ? ",\"fetchChanges\":true}" : ",\"fetchChanges\":false}")
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// A deleted zone as CloudKit's `changes/database` answers carry it.
    ///
    /// `{"zoneID":{"zoneName":"Scratch","ownerRecordName":"__defaultOwner__"},"deleted":true}`
    ///
    /// ```swift
    /// print(RecordJSONWriter.json(forDeletedZone: RecordZone.ID(zoneName: "Scratch")))
    /// ```
    public static func json(forDeletedZone zoneID: RecordZone.ID) -> String {
        var out = ByteOutput()
        out.append("{\"zoneID\":")
        appendZoneID(zoneID, to: &out)
        out.append(",\"deleted\":true}")
        return String(decoding: out.bytes, as: UTF8.self)
    }
}
