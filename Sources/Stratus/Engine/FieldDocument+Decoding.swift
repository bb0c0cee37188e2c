import Foundation

extension FieldDocument {
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
