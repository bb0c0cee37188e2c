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

    /// Appends `,"<folded>"` when ``TextSearch/equalityKey(_:)`` differs from `s`. ASCII text,
    /// by far the most common, is folded here byte by byte without making a second string.
    private static func appendEqualityKey(of s: String, to out: inout [UInt8]) {
        var isASCII = true
        var hasUpper = false
        for byte in s.utf8 {
            if byte >= 0x80 { isASCII = false; break }
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { hasUpper = true }
        }
        if isASCII {
            guard hasUpper else { return }
            out.append(UInt8(ascii: ","))
            out.append(UInt8(ascii: "\""))
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): out.append(byte + 32)
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0..<0x20: appendEscaped(byte, to: &out)
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
            return
        }
        let key = TextSearch.equalityKey(s)
        if key != s {
            out.append(UInt8(ascii: ","))
            appendString(key, to: &out)
        }
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

    // MARK: - Decoding

    /// Decodes a stored document. References get `zoneID` (references never leave their zone);
    /// `assetURL` maps a stored asset identifier to the file a reader can open.
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    public static func decode(_ text: String, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> [String: FieldValue] {
        try decodeDocument(text, zoneID: zoneID, assetURL: assetURL).fields
    }

    /// Decodes a stored document with the keys of its encrypted values.
    public static func decodeDocument(_ text: String, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> (fields: [String: FieldValue], encryptedKeys: Set<String>) {
        var text = text
        return try text.withUTF8 { bytes in
            var reader = JSONReader(bytes: bytes)
            let value = try reader.readDocument()
            guard case .object(let members) = value else { throw corrupt("the document is not an object") }
            var fields: [String: FieldValue] = [:]
            var encrypted: Set<String> = []
            fields.reserveCapacity(members.count)
            for (key, raw) in members {
                if key == encryptedKeysMember {
                    guard case .array(let names) = raw else { throw corrupt("the encrypted keys are not a list") }
                    for name in names {
                        guard case .string(let s) = name else { throw corrupt("an encrypted key is not a string") }
                        encrypted.insert(s)
                    }
                    continue
                }
                fields[key] = try decodeValue(raw, key: key, zoneID: zoneID, assetURL: assetURL)
            }
            return (fields, encrypted)
        }
    }

    private static func corrupt(_ what: String) -> StratusError {
        StratusError(.internalError, "stored field document is corrupt: \(what)")
    }

    private static func decodeValue(_ raw: JSONValue, key: String, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> FieldValue {
        guard case .array(let parts) = raw, parts.count >= 2, case .string(let tag) = parts[0] else {
            throw corrupt("field '\(key)' is not a tagged value")
        }
        let body = parts[1]
        func string(_ v: JSONValue) throws -> String {
            guard case .string(let s) = v else { throw corrupt("field '\(key)' expected a string") }
            return s
        }
        func int(_ v: JSONValue) throws -> Int64 {
            guard case .number(let n) = v, let i = Int64(n) else { throw corrupt("field '\(key)' expected an integer") }
            return i
        }
        func double(_ v: JSONValue) throws -> Double {
            guard case .number(let n) = v, let d = Double(n) else { throw corrupt("field '\(key)' expected a number") }
            return d
        }
        func array(_ v: JSONValue) throws -> [JSONValue] {
            guard case .array(let a) = v else { throw corrupt("field '\(key)' expected a list") }
            return a
        }
        func bytes(_ v: JSONValue) throws -> Data {
            guard let d = Data(base64Encoded: try string(v)) else { throw corrupt("field '\(key)' has bad base64") }
            return d
        }
        func location(_ values: ArraySlice<JSONValue>) throws -> Location {
            let d = try values.map(double)
            guard d.count == 8 else { throw corrupt("field '\(key)' has a location of \(d.count) numbers") }
            return Location(latitude: d[0], longitude: d[1], altitude: d[2], horizontalAccuracy: d[3], verticalAccuracy: d[4],
                            course: d[5], speed: d[6], timestamp: Date(timeIntervalSinceReferenceDate: d[7]))
        }
        func reference(_ name: JSONValue, _ action: JSONValue) throws -> Record.Reference {
            Record.Reference(recordID: Record.ID(recordName: try string(name), zoneID: zoneID),
                             action: Record.ReferenceAction(rawValue: Int(try int(action))) ?? .none)
        }
        func asset(_ id: JSONValue, _ size: JSONValue) throws -> Asset {
            let identifier = try string(id)
            return Asset(storedIdentifier: identifier, size: try int(size), fileURL: assetURL(identifier))
        }
        func second() throws -> JSONValue {
            guard parts.count >= 3 else { throw corrupt("field '\(key)' lacks its second list") }
            return parts[2]
        }
        switch tag {
        case Tag.string: return .string(try string(body))
        case Tag.int64: return .int64(try int(body))
        case Tag.double: return .double(try double(body))
        case Tag.date: return .date(Date(timeIntervalSinceReferenceDate: try double(body)))
        case Tag.bytes: return .bytes(try bytes(body))
        case Tag.reference: return .reference(try reference(body, try second()))
        case Tag.location: return .location(try location(parts[1...]))
        case Tag.asset: return .asset(try asset(body, try second()))
        case Tag.stringList: return .stringList(try array(body).map(string))
        case Tag.int64List: return .int64List(try array(body).map(int))
        case Tag.doubleList: return .doubleList(try array(body).map(double))
        case Tag.dateList: return .dateList(try array(body).map { Date(timeIntervalSinceReferenceDate: try double($0)) })
        case Tag.bytesList: return .bytesList(try array(body).map(bytes))
        case Tag.referenceList:
            let names = try array(body), actions = try array(try second())
            guard names.count == actions.count else { throw corrupt("field '\(key)' has unequal reference lists") }
            return .referenceList(try zip(names, actions).map { try reference($0, $1) })
        case Tag.locationList: return .locationList(try array(body).map { try location(try array($0)[...]) })
        case Tag.assetList:
            let ids = try array(body), sizes = try array(try second())
            guard ids.count == sizes.count else { throw corrupt("field '\(key)' has unequal asset lists") }
            return .assetList(try zip(ids, sizes).map { try asset($0, $1) })
        default: throw corrupt("field '\(key)' has unknown tag '\(tag)'")
        }
    }
}

// MARK: - A small JSON reader for stored documents

/// A parsed JSON value. Numbers keep their text so integers stay exact.
enum JSONValue {
    case null
    case bool(Bool)
    case number(Substring)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])
}

/// Reads JSON from UTF-8 bytes. Stored documents are written by ``FieldDocument``, so this
/// reader favours speed over error detail.
struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func readDocument() throws -> JSONValue {
        let value = try readValue()
        skipSpace()
        guard index == bytes.count else { throw fail("trailing characters") }
        return value
    }

    private func fail(_ what: String) -> StratusError {
        StratusError(.internalError, "stored field document is corrupt: \(what) at byte \(index)")
    }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
    }

    mutating func readValue() throws -> JSONValue {
        skipSpace()
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "["):
            depth += 1
            defer { depth -= 1 }
            guard depth < 64 else { throw fail("nesting too deep") }
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            while true {
                items.append(try readValue())
                skipSpace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        case UInt8(ascii: "{"):
            depth += 1
            defer { depth -= 1 }
            guard depth < 64 else { throw fail("nesting too deep") }
            index += 1
            var members: [(String, JSONValue)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try readString()
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                members.append((key, try readValue()))
                skipSpace()
                guard index < bytes.count else { throw fail("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        default:
            let start = index
            while index < bytes.count {
                let b = bytes[index]
                if (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+") || b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
                    index += 1
                } else { break }
            }
            guard index > start else { throw fail("unexpected character") }
            return .number(Substring(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)))
        }
    }

    private mutating func expectWord(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end") }
        for i in 0..<count where bytes[index + i] != word.utf8Start[i] { throw fail("unexpected word") }
        index += count
    }

    private mutating func readString() throws -> String {
        index += 1  // opening quote
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") { index += 1 }
        guard index < bytes.count else { throw fail("unterminated string") }
        if bytes[index] == UInt8(ascii: "\"") {
            let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            index += 1
            return s
        }
        var buffer = Array(bytes[start..<index])
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") { index += 1; return String(decoding: buffer, as: UTF8.self) }
            if b != UInt8(ascii: "\\") { buffer.append(b); index += 1; continue }
            index += 1
            guard index < bytes.count else { break }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "u"):
                var scalar = try readHex4()
                if scalar >= 0xD800 && scalar < 0xDC00, index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
                    index += 2
                    let low = try readHex4()
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                buffer.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar) ?? "\u{FFFD}")).utf8))
            default: buffer.append(e)
            }
        }
        throw fail("unterminated string")
    }

    private mutating func readHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            index += 1
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: throw fail("bad \\u escape")
            }
            value = value * 16 + digit
        }
        return value
    }
}
