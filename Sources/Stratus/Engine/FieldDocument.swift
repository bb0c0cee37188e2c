import Foundation

/// The stored form of a record's field values: one JSON object per record, every value a
/// tagged array, so that types round-trip exactly and stores can still query inside it.
///
/// `["S","text"]`, `["I",2]`, `["F",2.0]`, `["D",<seconds since 2001>]`, `["B","<base64>"]`,
/// `["R","<recordName>",<action>]`, `["L",lat,lon,alt,hAcc,vAcc,course,speed,<timestamp>]`,
/// `["A","<asset id>",<size>]`; a string whose lowercase form differs carries it at index 2
/// (`["S","Milk","milk"]`); lists carry a list tag and the element values at index 1
/// (`["SL",["a","b"]]`), with reference actions and asset sizes in a parallel array at index 2.
/// Element 1 is always what a query compares, so `$.key[1]` is the value of `key` in SQL.
///
/// Engines share this codec so that every store keeps the same logical schema.
///
/// ```swift
/// let text = FieldDocument.encode(["title": .string("Milk")])   // {"title":["S","Milk"]}
/// let fields = try FieldDocument.decode(text, zoneID: .default, assetURL: { _ in nil })
/// ```
public enum FieldDocument {
    /// Type tags, as stored in element 0.
    public enum Tag {
        public static let string = "S", int64 = "I", double = "F", date = "D", bytes = "B"
        public static let reference = "R", location = "L", asset = "A"
        public static let stringList = "SL", int64List = "IL", doubleList = "FL", dateList = "DL"
        public static let bytesList = "BL", referenceList = "RL", locationList = "LL", assetList = "AL"
    }

    // MARK: - Encoding

    /// The member listing encrypted keys; `~` cannot start a field name, so it never collides.
    public static let encryptedKeysMember = "~encrypted"

    /// Encodes field values and which of them are encrypted values.
    /// Assets must carry a `storedIdentifier` (engines store the bytes first).
    public static func encode(_ fields: [String: FieldValue], encryptedKeys: Set<String>) -> String {
        var out = encode(fields)
        guard !encryptedKeys.isEmpty else { return out }
        out.removeLast()
        if fields.count > 0 { out += "," }
        JSONText.appendString(encryptedKeysMember, to: &out)
        out += ":"
        JSONText.appendArray(encryptedKeys.sorted(), to: &out) { JSONText.appendString($0, to: &$1) }
        out += "}"
        return out
    }

    /// Encodes field values. Assets must carry a `storedIdentifier` (engines store the bytes first).
    public static func encode(_ fields: [String: FieldValue]) -> String {
        var out = "{"
        var first = true
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            if !first { out += "," }
            first = false
            JSONText.appendString(key, to: &out)
            out += ":"
            appendValue(value, to: &out)
        }
        out += "}"
        return out
    }

    static func appendValue(_ value: FieldValue, to out: inout String) {
        func tag(_ t: String) { out += "[\"\(t)\"," }
        switch value {
        case .string(let s):
            tag(Tag.string)
            JSONText.appendString(s, to: &out)
            // Equality ignores case; the folded form is kept (only when it differs) so that an
            // index can serve case-insensitive equality.
            let key = TextSearch.equalityKey(s)
            if key != s {
                out += ","
                JSONText.appendString(key, to: &out)
            }
        case .int64(let i): tag(Tag.int64); out += String(i)
        case .double(let d): tag(Tag.double); JSONText.appendDouble(d, to: &out)
        case .date(let d): tag(Tag.date); JSONText.appendDouble(d.timeIntervalSinceReferenceDate, to: &out)
        case .bytes(let b): tag(Tag.bytes); JSONText.appendString(b.base64EncodedString(), to: &out)
        case .reference(let r): tag(Tag.reference); JSONText.appendString(r.recordID.recordName, to: &out); out += ",\(r.action.rawValue)"
        case .location(let l): tag(Tag.location); appendLocationBody(l, to: &out)
        case .asset(let a): tag(Tag.asset); JSONText.appendString(a.storedIdentifier ?? "", to: &out); out += ",\(a.size ?? 0)"
        case .stringList(let v): tag(Tag.stringList); JSONText.appendArray(v, to: &out) { JSONText.appendString($0, to: &$1) }
        case .int64List(let v): tag(Tag.int64List); JSONText.appendArray(v, to: &out) { $1 += String($0) }
        case .doubleList(let v): tag(Tag.doubleList); JSONText.appendArray(v, to: &out) { JSONText.appendDouble($0, to: &$1) }
        case .dateList(let v): tag(Tag.dateList); JSONText.appendArray(v, to: &out) { JSONText.appendDouble($0.timeIntervalSinceReferenceDate, to: &$1) }
        case .bytesList(let v): tag(Tag.bytesList); JSONText.appendArray(v, to: &out) { JSONText.appendString($0.base64EncodedString(), to: &$1) }
        case .referenceList(let v):
            tag(Tag.referenceList)
            JSONText.appendArray(v, to: &out) { JSONText.appendString($0.recordID.recordName, to: &$1) }
            out += ","
            JSONText.appendArray(v, to: &out) { $1 += String($0.action.rawValue) }
        case .locationList(let v):
            tag(Tag.locationList)
            JSONText.appendArray(v, to: &out) { $1 += "["; appendLocationBody($0, to: &$1); $1 += "]" }
        case .assetList(let v):
            tag(Tag.assetList)
            JSONText.appendArray(v, to: &out) { JSONText.appendString($0.storedIdentifier ?? "", to: &$1) }
            out += ","
            JSONText.appendArray(v, to: &out) { $1 += String($0.size ?? 0) }
        }
        out += "]"
    }

    private static func appendLocationBody(_ l: Location, to out: inout String) {
        for (i, d) in [l.latitude, l.longitude, l.altitude, l.horizontalAccuracy, l.verticalAccuracy, l.course, l.speed, l.timestamp.timeIntervalSinceReferenceDate].enumerated() {
            if i > 0 { out += "," }
            JSONText.appendDouble(d, to: &out)
        }
    }
}
