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
        return try text.withUTF8 { try decodeDocument(utf8: $0, zoneID: zoneID, assetURL: assetURL) }
    }

    /// Decodes a stored document from its UTF-8 bytes, as a database column holds them, with
    /// the keys of its encrypted values; the bytes need not outlive the call.
    ///
    /// ```swift
    /// let (fields, encrypted) = try FieldDocument.decodeDocument(utf8: columnBytes, zoneID: zone) { _ in nil }
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    public static func decodeDocument(utf8 bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> (fields: [String: FieldValue], encryptedKeys: Set<String>) {
        // Documents as ``encode(_:encryptedKeys:)`` writes them take the direct path; anything
        // else (spaces, escapes, unusual numbers, a malformed document) is left to the general
        // reader, so both accept and reject exactly the same documents.
        var direct = StoredDocumentReader(bytes: bytes, zoneID: zoneID)
        if let decoded = try? direct.document(assetURL: assetURL) { return decoded }
        return try decodeGeneral(bytes, zoneID: zoneID, assetURL: assetURL)
    }

    private static func decodeGeneral(_ bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> (fields: [String: FieldValue], encryptedKeys: Set<String>) {
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

// MARK: - The direct reader for documents as they are written

/// Reads a stored document in exactly the form ``FieldDocument/encode(_:encryptedKeys:)``
/// writes (no spaces, no escapes), straight into field values, without a syntax tree.
///
/// It gives up (throws ``Deferral``) at the first thing outside that form, and the caller
/// then reads the document with ``JSONReader``; so the values it returns are the ones the
/// general reader would return, and errors always come from the general reader. Numbers it
/// cannot convert exactly itself are converted as the general reader converts them.
struct StoredDocumentReader {
    /// Not the form this reader handles; not an error in itself.
    struct Deferral: Error {}

    private let base: UnsafePointer<UInt8>?
    private let end: Int
    private var index = 0
    private let zoneID: RecordZone.ID

    init(bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID) {
        base = bytes.baseAddress
        end = bytes.count
        self.zoneID = zoneID
    }

    mutating func document(assetURL: (String) -> URL?) throws(Deferral) -> (fields: [String: FieldValue], encryptedKeys: Set<String>) {
        guard base != nil else { throw Deferral() }
        var fields = [String: FieldValue](minimumCapacity: memberCountEstimate())
        var encrypted: Set<String> = []
        try expect(UInt8(ascii: "{"))
        if !consume(UInt8(ascii: "}")) {
            repeat {
                let key = try rawString()
                try expect(UInt8(ascii: ":"))
                if Self.equal(key, FieldDocument.encryptedKeysMember) {
                    for name in try list({ (r: inout Self) throws(Deferral) in try r.string() }) { encrypted.insert(name) }
                } else {
                    fields[String(decoding: key, as: UTF8.self)] = try value(assetURL: assetURL)
                }
            } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"))
        }
        guard index == end else { throw Deferral() }
        return (fields, encrypted)
    }

    /// How many members the document has, give or take: each member but the last ends in
    /// `],"` (a string value can hold those bytes too). Sizing the dictionary once saves
    /// growing and rehashing it member by member.
    private func memberCountEstimate() -> Int {
        guard let base, end > 0 else { return 0 }
        var count = 1
        var at = base
        let stop = base + end
        while let found = memchr(at, Int32(UInt8(ascii: "]")), stop - at) {
            let bracket = UnsafePointer(found.assumingMemoryBound(to: UInt8.self))
            if stop - bracket > 2 && bracket[1] == UInt8(ascii: ",") && bracket[2] == UInt8(ascii: "\"") { count += 1 }
            at = bracket + 1
        }
        return count
    }

    private mutating func value(assetURL: (String) -> URL?) throws(Deferral) -> FieldValue {
        try expect(UInt8(ascii: "["))
        let tag = try rawString()
        try expect(UInt8(ascii: ","))
        let value: FieldValue
        // Tags are one or two ASCII letters: a small integer to switch on.
        var code = 0
        guard tag.count <= 2 else { throw Deferral() }
        for b in tag { code = code << 8 | Int(b) }
        assert(TagCode.matchesTags, "TagCode differs from FieldDocument.Tag")
        switch TagCode(rawValue: code) {
        case .string?:
            let text = try string()
            // The case-folded form serves indexes; reading skips it.
            if consume(UInt8(ascii: ",")) { _ = try rawString() }
            value = .string(text)
        case .int64?: value = .int64(try int())
        case .double?: value = .double(try double())
        case .date?: value = .date(Date(timeIntervalSinceReferenceDate: try double()))
        case .bytes?: value = .bytes(try bytes())
        case .reference?:
            let name = try string()
            try expect(UInt8(ascii: ","))
            value = .reference(reference(name, try int()))
        case .location?: value = .location(try locationBody())
        case .asset?:
            let identifier = try string()
            try expect(UInt8(ascii: ","))
            value = .asset(Asset(storedIdentifier: identifier, size: try int(), fileURL: assetURL(identifier)))
        case .stringList?: value = .stringList(try list { (r: inout Self) throws(Deferral) in try r.string() })
        case .int64List?: value = .int64List(try list { (r: inout Self) throws(Deferral) in try r.int() })
        case .doubleList?: value = .doubleList(try list { (r: inout Self) throws(Deferral) in try r.double() })
        case .dateList?: value = .dateList(try list { (r: inout Self) throws(Deferral) in Date(timeIntervalSinceReferenceDate: try r.double()) })
        case .bytesList?: value = .bytesList(try list { (r: inout Self) throws(Deferral) in try r.bytes() })
        case .referenceList?:
            let names = try list { (r: inout Self) throws(Deferral) in try r.string() }
            try expect(UInt8(ascii: ","))
            let actions = try list { (r: inout Self) throws(Deferral) in try r.int() }
            guard names.count == actions.count else { throw Deferral() }
            value = .referenceList(zip(names, actions).map { reference($0, $1) })
        case .locationList?:
            value = .locationList(try list { (r: inout Self) throws(Deferral) in
                try r.expect(UInt8(ascii: "["))
                let location = try r.locationBody()
                try r.expect(UInt8(ascii: "]"))
                return location
            })
        case .assetList?:
            let identifiers = try list { (r: inout Self) throws(Deferral) in try r.string() }
            try expect(UInt8(ascii: ","))
            let sizes = try list { (r: inout Self) throws(Deferral) in try r.int() }
            guard identifiers.count == sizes.count else { throw Deferral() }
            value = .assetList(zip(identifiers, sizes).map { Asset(storedIdentifier: $0, size: $1, fileURL: assetURL($0)) })
        default:
            throw Deferral()
        }
        try expect(UInt8(ascii: "]"))
        return value
    }

    /// The tags of ``FieldDocument/Tag`` as the integers `value(assetURL:)` switches on: the
    /// ASCII letters of the tag, `"S"` is 0x53 and `"SL"` 0x534C. Literals, so that the switch
    /// needs no lazily made constants.
    private enum TagCode: Int, CaseIterable {
        case string = 0x53, int64 = 0x49, double = 0x46, date = 0x44, bytes = 0x42, reference = 0x52, location = 0x4C, asset = 0x41
        case stringList = 0x534C, int64List = 0x494C, doubleList = 0x464C, dateList = 0x444C
        case bytesList = 0x424C, referenceList = 0x524C, locationList = 0x4C4C, assetList = 0x414C

        static let matchesTags: Bool = {
            let tags = [FieldDocument.Tag.string, FieldDocument.Tag.int64, FieldDocument.Tag.double, FieldDocument.Tag.date,
                        FieldDocument.Tag.bytes, FieldDocument.Tag.reference, FieldDocument.Tag.location, FieldDocument.Tag.asset,
                        FieldDocument.Tag.stringList, FieldDocument.Tag.int64List, FieldDocument.Tag.doubleList, FieldDocument.Tag.dateList,
                        FieldDocument.Tag.bytesList, FieldDocument.Tag.referenceList, FieldDocument.Tag.locationList, FieldDocument.Tag.assetList]
            return tags.map { $0.utf8.reduce(0) { $0 << 8 | Int($1) } } == allCases.map(\.rawValue)
        }()
    }

    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { $0.count == bytes.count && memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }

    private func reference(_ name: String, _ action: Int64) -> Record.Reference {
        Record.Reference(recordID: Record.ID(recordName: name, zoneID: zoneID), action: Record.ReferenceAction(rawValue: Int(action)) ?? .none)
    }

    private mutating func locationBody() throws(Deferral) -> Location {
        let latitude = try double()
        try expect(UInt8(ascii: ","))
        let longitude = try double()
        try expect(UInt8(ascii: ","))
        let altitude = try double()
        try expect(UInt8(ascii: ","))
        let horizontalAccuracy = try double()
        try expect(UInt8(ascii: ","))
        let verticalAccuracy = try double()
        try expect(UInt8(ascii: ","))
        let course = try double()
        try expect(UInt8(ascii: ","))
        let speed = try double()
        try expect(UInt8(ascii: ","))
        let timestamp = try double()
        return Location(latitude: latitude, longitude: longitude, altitude: altitude, horizontalAccuracy: horizontalAccuracy,
                        verticalAccuracy: verticalAccuracy, course: course, speed: speed,
                        timestamp: Date(timeIntervalSinceReferenceDate: timestamp))
    }

    private mutating func list<T>(_ element: (inout Self) throws(Deferral) -> T) throws(Deferral) -> [T] {
        try expect(UInt8(ascii: "["))
        var items: [T] = []
        if consume(UInt8(ascii: "]")) { return items }
        repeat { items.append(try element(&self)) } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"))
        return items
    }

    // MARK: Tokens

    @inline(__always)
    private mutating func expect(_ byte: UInt8) throws(Deferral) {
        guard index < end, base![index] == byte else { throw Deferral() }
        index += 1
    }

    @inline(__always)
    private mutating func consume(_ byte: UInt8) -> Bool {
        guard index < end, base![index] == byte else { return false }
        index += 1
        return true
    }

    /// The bytes of a string without escapes, which are all the general reader would change.
    private mutating func rawString() throws(Deferral) -> UnsafeBufferPointer<UInt8> {
        try expect(UInt8(ascii: "\""))
        let base = base!
        let start = index
        while index < end {
            let b = base[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                return UnsafeBufferPointer(start: base + start, count: index - 1 - start)
            }
            if b == UInt8(ascii: "\\") { break }
            index += 1
        }
        throw Deferral()
    }

    private mutating func string() throws(Deferral) -> String {
        String(decoding: try rawString(), as: UTF8.self)
    }

    private mutating func bytes() throws(Deferral) -> Data {
        guard let data = Data(base64Encoded: try string()) else { throw Deferral() }
        return data
    }

    /// The extent of a number as the general reader takes it: every byte that can be part of one.
    private mutating func numberToken() throws(Deferral) -> UnsafeBufferPointer<UInt8> {
        let base = base!
        let start = index
        while index < end {
            let b = base[index]
            guard (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+")
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") else { break }
            index += 1
        }
        guard index > start else { throw Deferral() }
        return UnsafeBufferPointer(start: base + start, count: index - start)
    }

    private mutating func int() throws(Deferral) -> Int64 {
        let token = try numberToken()
        let negative = token[0] == UInt8(ascii: "-")
        let digits = negative ? token.count - 1 : token.count
        // Up to 18 digits cannot overflow; anything longer or stranger is converted as the general reader does.
        if digits > 0 && digits <= 18 {
            var magnitude: Int64 = 0
            var plain = true
            for b in token[(negative ? 1 : 0)...] {
                guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else {
                    plain = false
                    break
                }
                magnitude = magnitude * 10 + Int64(b - UInt8(ascii: "0"))
            }
            if plain { return negative ? -magnitude : magnitude }
        }
        guard let value = Int64(Substring(String(decoding: token, as: UTF8.self))) else { throw Deferral() }
        return value
    }

    private mutating func double() throws(Deferral) -> Double {
        let token = try numberToken()
        if let value = Self.exactDouble(token) { return value }
        guard let value = Double(Substring(String(decoding: token, as: UTF8.self))) else { throw Deferral() }
        return value
    }

    /// Clinger's fast path for `-?digits(.digits)?(e[+-]?digits)?`: a significand of at most
    /// 2^53 scaled by an exact power of ten is correctly rounded by one multiplication or
    /// division, as `Double(_:)` rounds. Nil for any other text.
    private static func exactDouble(_ token: UnsafeBufferPointer<UInt8>) -> Double? {
        var i = 0
        let count = token.count
        let negative = token[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        var significand: UInt64 = 0
        var significantDigits = 0
        var exponent = 0
        var integerDigits = 0
        while i < count, token[i] >= UInt8(ascii: "0") && token[i] <= UInt8(ascii: "9") {
            if significand != 0 || token[i] != UInt8(ascii: "0") {
                significantDigits += 1
                if significantDigits > 19 { return nil }
                significand = significand * 10 + UInt64(token[i] - UInt8(ascii: "0"))
            }
            integerDigits += 1
            i += 1
        }
        guard integerDigits > 0 else { return nil }
        if i < count && token[i] == UInt8(ascii: ".") {
            i += 1
            var fractionDigits = 0
            while i < count, token[i] >= UInt8(ascii: "0") && token[i] <= UInt8(ascii: "9") {
                if significand != 0 || token[i] != UInt8(ascii: "0") {
                    significantDigits += 1
                    if significantDigits > 19 { return nil }
                    significand = significand * 10 + UInt64(token[i] - UInt8(ascii: "0"))
                }
                fractionDigits += 1
                exponent -= 1
                i += 1
            }
            guard fractionDigits > 0 else { return nil }
        }
        if i < count && token[i] == UInt8(ascii: "e") {
            i += 1
            var negativeExponent = false
            if i < count && (token[i] == UInt8(ascii: "-") || token[i] == UInt8(ascii: "+")) {
                negativeExponent = token[i] == UInt8(ascii: "-")
                i += 1
            }
            var e = 0
            var exponentDigits = 0
            while i < count, token[i] >= UInt8(ascii: "0") && token[i] <= UInt8(ascii: "9") {
                e = e * 10 + Int(token[i] - UInt8(ascii: "0"))
                if e > 400 { return nil }
                exponentDigits += 1
                i += 1
            }
            guard exponentDigits > 0 else { return nil }
            exponent += negativeExponent ? -e : e
        }
        guard i == count, significand <= 1 << 53 else { return nil }
        var value = Double(significand)
        if significand != 0 {
            guard exponent >= -22 && exponent <= 22 else { return nil }
            if exponent < 0 {
                value /= powersOfTen[-exponent]
            } else if exponent > 0 {
                value *= powersOfTen[exponent]
            }
        }
        return negative ? -value : value
    }

    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]
}
