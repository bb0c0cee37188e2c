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
        var out = "{\"recordName\":"
        JSONText.appendString(recordID.recordName, to: &out)
        if let recordType {
            out += ",\"recordType\":"
            JSONText.appendString(recordType, to: &out)
        }
        out += ",\"deleted\":true,\"zoneID\":"
        appendZoneID(recordID.zoneID, to: &out)
        out += "}"
        return out
    }

    /// A zone as CloudKit's `zones/list` answers it, with its capabilities.
    ///
    /// `{"zoneID":{"zoneName":"Photos","ownerRecordName":"__defaultOwner__"},"atomic":true,"fetchChanges":true}`
    ///
    /// ```swift
    /// for zone in try await database.allRecordZones() { print(RecordJSONWriter.json(for: zone)) }
    /// ```
    public static func json(for zone: RecordZone) -> String {
        var out = "{\"zoneID\":"
        appendZoneID(zone.zoneID, to: &out)
        out += ",\"atomic\":\(zone.capabilities.contains(.atomic)),\"fetchChanges\":\(zone.capabilities.contains(.fetchChanges))}"
        return out
    }

    /// A deleted zone as CloudKit's `changes/database` answers carry it.
    ///
    /// `{"zoneID":{"zoneName":"Scratch","ownerRecordName":"__defaultOwner__"},"deleted":true}`
    ///
    /// ```swift
    /// print(RecordJSONWriter.json(forDeletedZone: RecordZone.ID(zoneName: "Scratch")))
    /// ```
    public static func json(forDeletedZone zoneID: RecordZone.ID) -> String {
        var out = "{\"zoneID\":"
        appendZoneID(zoneID, to: &out)
        out += ",\"deleted\":true}"
        return out
    }

    private static func appendZoneID(_ zoneID: RecordZone.ID, to out: inout String) {
        out += "{\"zoneName\":"
        JSONText.appendString(zoneID.zoneName, to: &out)
        out += ",\"ownerRecordName\":"
        JSONText.appendString(zoneID.ownerName, to: &out)
        out += "}"
    }
}
