import Foundation
@_spi(StratusEngine) import Stratus

extension RecordJSONWriter {
    /// Appends the JSON that ``append(_:options:to:)`` writes for the record a stored row holds,
    /// written from the row without making the record. False, with nothing appended, for a row
    /// only its record can be written from: one with CloudKit JSON kept beside its values,
    /// encrypted values or assets, text that is not valid UTF-8, a value JSON cannot hold or
    /// a damaged document (the record's decoding or writing then reports it).
    ///
    /// - Parameters:
    ///   - zoneTail: ``zoneTail(_:options:)`` of the row's zone.
    ///   - fields: room for the written fields' keys and bytes, kept from row to row.
    static func appendStored(_ row: StoredRecordRow, zoneID: RecordZone.ID, zoneTail: [UInt8], options: Options, fields: inout [StoredField],
                             to out: inout ByteOutput) -> Bool {
        guard options.assetFolder == nil,
              isValidUTF8(row.recordName), isValidUTF8(row.recordType), isValidUTF8(row.creator), isValidUTF8(row.modifier),
              row.changeTag.map(isValidUTF8) ?? true, row.parentName.map(isValidUTF8) ?? true else { return false }
        let start = out.count
        let problem = out.problem
        out.append("{\"recordName\":")
        out.appendString(utf8: row.recordName)
        out.append(",\"recordType\":")
        out.appendString(utf8: row.recordType)
        if let tag = row.changeTag {
            out.append(",\"recordChangeTag\":")
            out.appendString(utf8: tag)
        }
        if let parent = row.parentName {
            // A parent is in its child's zone: no zoneID (see appendReference).
            out.append(",\"parent\":{\"recordName\":")
            out.appendString(utf8: parent)
            out.append(UInt8(ascii: "}"))
        }
        out.append(",\"fields\":{")
        if let document = row.document {
            let fieldsStart = out.count
            fields.removeAll(keepingCapacity: true)
            var ascending = true
            let plain = FieldDocument.forEachPlainField(utf8: document, zoneID: zoneID) { key, value in
                if let last = fields.last {
                    out.append(UInt8(ascii: ","))
                    if ascending && !(last.key < key) { ascending = false }
                }
                let fieldStart = out.count
                switch value {
                case .string(let text):
                    // appendField's bytes for a string, from the document's bytes.
                    out.appendString(key)
                    out.append(":{\"value\":")
                    out.appendString(utf8: text)
                    out.append(",\"type\":\"STRING\"}")
                case .value(let value):
                    appendField(key, value, encrypted: [], zone: zoneID, to: &out)
                }
                fields.append(StoredField(key: key, bytes: fieldStart..<out.count))
            }
            // Records are written with their fields in key order.
            guard plain, ascending || arrangeInKeyOrder(&fields, after: fieldsStart, in: &out) else {
                out.removeAll(from: start)
                out.problem = problem
                return false
            }
        }
        out.append(UInt8(ascii: "}"))
        appendStoredAuthorship(",\"created\":{\"timestamp\":", row.creationDate, row.creator, field: "created", to: &out)
        appendStoredAuthorship(",\"modified\":{\"timestamp\":", row.modificationDate, row.modifier, field: "modified", to: &out)
        zoneTail.withUnsafeBufferPointer { out.append($0) }
        guard out.problem == problem else {
            out.removeAll(from: start)
            out.problem = problem
            return false
        }
        return true
    }

    /// A field written by ``appendStored(_:zoneID:zoneTail:options:fields:to:)``: its key and
    /// where its bytes are.
    struct StoredField {
        let key: String
        let bytes: Range<Int>
    }

    /// Moves the fields written after `start` (with a comma between two) into key order;
    /// false, with the bytes left as they were, for a document that names a key twice.
    private static func arrangeInKeyOrder(_ fields: inout [StoredField], after start: Int, in out: inout ByteOutput) -> Bool {
        fields.sort { $0.key < $1.key }
        for place in fields.indices.dropFirst() where fields[place - 1].key == fields[place].key { return false }
        withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: fields.count) { pieces in
            for (place, field) in fields.enumerated() { (pieces.baseAddress! + place).initialize(to: field.bytes) }
            out.arrange(UnsafeBufferPointer(pieces), after: start, separator: UInt8(ascii: ","))
        }
        return true
    }

    /// What ends every record of `zoneID` that kept no CloudKit JSON: its `zoneID` member and
    /// the record's closing brace.
    static func zoneTail(_ zoneID: RecordZone.ID, options: Options) -> [UInt8] {
        var out = ByteOutput()
        out.append(",\"zoneID\":{\"zoneName\":")
        out.appendString(zoneID.zoneName)
        out.append(",\"ownerRecordName\":")
        out.appendString(ownerRecordName(of: zoneID, options: options))
        out.append("}}")
        return Array(out.bytes)
    }

    private static func appendStoredAuthorship(_ opening: StaticString, _ seconds: Double, _ user: UnsafeBufferPointer<UInt8>, field: StaticString,
                                               to out: inout ByteOutput) {
        out.append(opening)
        out.appendTimestamp(Date(timeIntervalSinceReferenceDate: seconds), field: field.description)
        out.append(",\"userRecordName\":")
        out.appendString(utf8: user)
        out.append(UInt8(ascii: "}"))
    }

    /// Whether the bytes are UTF-8 that a `String` holds as they are (decoding repairs other bytes).
    private static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        // ASCII, the common case, is checked a word at a time.
        var index = 0
        while index + 8 <= bytes.count {
            if UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { break }
            index += 8
        }
        while index < bytes.count && bytes[index] < 0x80 { index += 1 }
        return index == bytes.count || String(validating: bytes, as: UTF8.self) != nil
    }
}
