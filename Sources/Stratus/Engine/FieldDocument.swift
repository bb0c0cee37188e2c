import Foundation

/// The stored form of a record's field values: one JSON object per record, every value a
/// tagged array, so that types round-trip exactly and stores can still query inside it.
///
/// `["S","text"]`, `["I",2]`, `["F",2.0]`, `["D",<seconds since 2001>]`, `["B","<base64>"]`,
/// `["R","<recordName>",<action>]`, `["L",lat,lon,alt,hAcc,vAcc,course,speed,<timestamp>]`,
/// `["A","<asset id>",<size>]`; a string whose lowercase form is not its ASCII lowercasing
/// carries it at index 2 (`["S","ÉCOLE","école"]`; `["S","Milk"]` carries none, as SQLite's
/// `lower()` gives `milk`); lists carry a list tag and the element values at index 1
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
        var bytes: [UInt8] = []
        encode(fields, encryptedKeys: encryptedKeys, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Encodes field values. Assets must carry a `storedIdentifier` (engines store the bytes first).
    public static func encode(_ fields: [String: FieldValue]) -> String {
        encode(fields, encryptedKeys: [])
    }

    /// Encodes into a byte buffer (replacing its contents), which an engine can reuse from
    /// record to record and bind without making a `String`: the write path of every save.
    ///
    /// ```swift
    /// var buffer: [UInt8] = []
    /// FieldDocument.encode(record.fieldValues, encryptedKeys: record.encryptedKeys, into: &buffer)
    /// ```
    public static func encode(_ fields: [String: FieldValue], encryptedKeys: Set<String>, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        out.append(UInt8(ascii: "{"))
        // Keys in order, so that equal field sets store identical documents.
        var first = true
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendValue(value, to: &out)
        }
        if !encryptedKeys.isEmpty {
            if !first { out.append(UInt8(ascii: ",")) }
            appendString(encryptedKeysMember, to: &out)
            out.append(UInt8(ascii: ":"))
            appendArray(encryptedKeys.sorted(), to: &out) { appendString($0, to: &$1) }
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendValue(_ value: FieldValue, to out: inout [UInt8]) {
        func tag(_ t: StaticString) {
            out.append(UInt8(ascii: "["))
            out.append(UInt8(ascii: "\""))
            t.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ","))
        }
        switch value {
        case .string(let s):
            tag("S")
            appendString(s, to: &out)
            // Equality ignores case; the folded form is kept (only when it differs) so that an
            // index can serve case-insensitive equality.
            appendEqualityKey(of: s, to: &out)
        case .int64(let i): tag("I"); appendInteger(i, to: &out)
        case .double(let d): tag("F"); appendDouble(d, to: &out)
        case .date(let d): tag("D"); appendDouble(d.timeIntervalSinceReferenceDate, to: &out)
        case .bytes(let b): tag("B"); appendString(b.base64EncodedString(), to: &out)
        case .reference(let r):
            tag("R")
            appendString(r.recordID.recordName, to: &out)
            out.append(UInt8(ascii: ","))
            appendInteger(Int64(r.action.rawValue), to: &out)
        case .location(let l): tag("L"); appendLocationBody(l, to: &out)
        case .asset(let a):
            tag("A")
            appendString(a.storedIdentifier ?? "", to: &out)
            out.append(UInt8(ascii: ","))
            appendInteger(a.size ?? 0, to: &out)
        case .stringList(let v): tag("SL"); appendArray(v, to: &out) { appendString($0, to: &$1) }
        case .int64List(let v): tag("IL"); appendArray(v, to: &out) { appendInteger($0, to: &$1) }
        case .doubleList(let v): tag("FL"); appendArray(v, to: &out) { appendDouble($0, to: &$1) }
        case .dateList(let v): tag("DL"); appendArray(v, to: &out) { appendDouble($0.timeIntervalSinceReferenceDate, to: &$1) }
        case .bytesList(let v): tag("BL"); appendArray(v, to: &out) { appendString($0.base64EncodedString(), to: &$1) }
        case .referenceList(let v):
            tag("RL")
            appendArray(v, to: &out) { appendString($0.recordID.recordName, to: &$1) }
            out.append(UInt8(ascii: ","))
            appendArray(v, to: &out) { appendInteger(Int64($0.action.rawValue), to: &$1) }
        case .locationList(let v):
            tag("LL")
            appendArray(v, to: &out) { location, out in
                out.append(UInt8(ascii: "["))
                appendLocationBody(location, to: &out)
                out.append(UInt8(ascii: "]"))
            }
        case .assetList(let v):
            tag("AL")
            appendArray(v, to: &out) { appendString($0.storedIdentifier ?? "", to: &$1) }
            out.append(UInt8(ascii: ","))
            appendArray(v, to: &out) { appendInteger($0.size ?? 0, to: &$1) }
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Appends `,"<folded>"` when ``TextSearch/equalityKey(_:)`` differs from what SQLite's
    /// `lower()` makes of `s` (it folds the ASCII letters A–Z and nothing else). Stores compare
    /// `coalesce($.key[2], lower($.key[1]))`, so ASCII text, by far the most common, carries no
    /// second copy; text with other letters that fold carries its folded form.
    private static func appendEqualityKey(of s: String, to out: inout [UInt8]) {
        guard s.utf8.contains(where: { $0 >= 0x80 }) else { return }
        let key = TextSearch.equalityKey(s)
        guard !key.utf8.elementsEqual(s.utf8.lazy.map(asciiLowercased)) else { return }
        out.append(UInt8(ascii: ","))
        appendString(key, to: &out)
    }

    /// What SQLite's built-in `lower()` does to one UTF-8 byte.
    @inline(__always) private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    private static func appendLocationBody(_ l: Location, to out: inout [UInt8]) {
        for (i, d) in [l.latitude, l.longitude, l.altitude, l.horizontalAccuracy, l.verticalAccuracy, l.course, l.speed, l.timestamp.timeIntervalSinceReferenceDate].enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendDouble(d, to: &out)
        }
    }

    /// Appends a JSON string literal (the same escapes as ``JSONText/appendString(_:to:)``).
    static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var plainStart = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<index]))
                    appendEscaped(byte, to: &out)
                    plainStart = index + 1
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
        }
    }

    private static func appendInteger(_ i: Int64, to out: inout [UInt8]) {
        if i >= 0 && i < 10 { out.append(UInt8(ascii: "0") + UInt8(i)); return }
        if i < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = i.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes hold the 20 digits of UInt64.max
        withUnsafeMutableBytes(of: &digits) { buffer in
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: buffer[start...])
        }
    }

    /// The shortest text that parses back to the same Double, as Swift prints it (`2.0`, `1e-05`).
    private static func appendDouble(_ d: Double, to out: inout [UInt8]) {
        precondition(d.isFinite, "JSON cannot hold a non-finite number; validate values first")
        out.append(contentsOf: d.description.utf8)
    }

    private static func appendArray<T>(_ values: [T], to out: inout [UInt8], _ element: (T, inout [UInt8]) -> Void) {
        out.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            element(v, &out)
        }
        out.append(UInt8(ascii: "]"))
    }
}
