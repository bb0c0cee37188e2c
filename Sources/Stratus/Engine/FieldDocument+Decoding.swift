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

    /// A stored document's contents: field values, encrypted keys, and what the record's
    /// CloudKit JSON held beyond the model.
    public struct Decoded: Sendable {
        public var fields: [String: FieldValue]
        public var encryptedKeys: Set<String>
        public var jsonExtras: Record.JSONExtras

        /// What a record without a stored document holds: nothing.
        public static let nothing = Decoded(fields: [:], encryptedKeys: [], jsonExtras: Record.JSONExtras())
    }

    /// Decodes a stored document from text, with everything it holds.
    ///
    /// ```swift
    /// let decoded = try FieldDocument.decodeStoredDocument(text, zoneID: zone) { _ in nil }
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    public static func decodeStoredDocument(_ text: String, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> Decoded {
        var text = text
        return try text.withUTF8 { try decodeStoredDocument(utf8: $0, zoneID: zoneID, assetURL: assetURL) }
    }

    /// Decodes a stored document from its UTF-8 bytes, with everything it holds; the bytes
    /// need not outlive the call.
    ///
    /// ```swift
    /// let decoded = try FieldDocument.decodeStoredDocument(utf8: columnBytes, zoneID: zone) { _ in nil }
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    public static func decodeStoredDocument(utf8 bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> Decoded {
        var shape: Shape?
        return try decodeStoredDocument(utf8: bytes, zoneID: zoneID, shape: &shape, assetURL: assetURL)
    }

    /// The field names of the documents decoded before and the last one's dictionary. Records
    /// of a type mostly have the same fields, which their documents list in the same order:
    /// a document that has the names of the one before gets its dictionary as a copy of that
    /// one's, its values put in place by position, without hashing a name. A read of many
    /// documents keeps one and passes it to each decode.
    ///
    /// ```swift
    /// var shape: FieldDocument.Shape? = FieldDocument.Shape()
    /// for bytes in documents { records.append(try FieldDocument.decodeStoredDocument(utf8: bytes, zoneID: zone, shape: &shape) { _ in nil }) }
    /// ```
    public struct Shape {
        /// Field names in the order the last remembered document listed them.
        fileprivate var names: [String] = []
        /// That document's fields, and where each name's value lies in them.
        fileprivate var fields: [String: FieldValue] = [:]
        fileprivate var positions: [Dictionary<String, FieldValue>.Index] = []
        /// Names and values of the document being read (buffers kept between documents).
        fileprivate var readNames: [String] = []
        fileprivate var readValues: [FieldValue] = []

        public init() {}
    }

    /// Decodes a stored document from its UTF-8 bytes like
    /// ``decodeStoredDocument(utf8:zoneID:assetURL:)``, making its dictionary from the shape of
    /// the documents before (`shape`; `nil`: none is kept). `recordName`, the name of the
    /// record whose document it is, is named in the error that a damaged document throws.
    public static func decodeStoredDocument(utf8 bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, shape: inout Shape?,
                                            recordName: String? = nil, assetURL: (String) -> URL?) throws -> Decoded {
        let whose = recordName.map { " of record '\($0)' in zone '\(zoneID.zoneName)'" } ?? ""
        guard let base = bytes.baseAddress else { throw corrupt("the document is empty", whose: whose) }
        var reader = StoredDocumentReader(base: base, count: bytes.count, zoneID: zoneID)
        do {
            if shape != nil { return try reader.document(assetURL: assetURL, shape: &shape!) }
            return try reader.document(assetURL: assetURL)
        } catch {
            throw corrupt(error, whose: whose)
        }
    }

    /// Decodes a stored document from its UTF-8 bytes, as a database column holds them, with
    /// the keys of its encrypted values; the bytes need not outlive the call.
    ///
    /// ```swift
    /// let (fields, encrypted) = try FieldDocument.decodeDocument(utf8: columnBytes, zoneID: zone) { _ in nil }
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored
    ///   document, naming the byte: text that is not JSON (bad UTF-8, `+5`, `.5`, `007`), an
    ///   unknown tag, a value of the wrong kind.
    public static func decodeDocument(utf8 bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, assetURL: (String) -> URL?) throws -> (fields: [String: FieldValue], encryptedKeys: Set<String>) {
        let decoded = try decodeStoredDocument(utf8: bytes, zoneID: zoneID, assetURL: assetURL)
        return (decoded.fields, decoded.encryptedKeys)
    }

    /// Calls `field` with each field of a stored document, in the order stored (an engine may
    /// store them in an order of its own: PostgreSQL's `jsonb` orders keys by length first),
    /// without making a dictionary or a record: what writing a stored record out needs. False
    /// where the document holds more than plain values (encrypted keys, CloudKit JSON kept
    /// beside the values, an asset, whose file its engine names) or is not a valid document:
    /// decode it then, which reports the damage. `field` may have been called for some fields
    /// by then. A document can name a field twice (decoding keeps the last value).
    ///
    /// ```swift
    /// let plain = FieldDocument.forEachPlainField(utf8: columnBytes, zoneID: zone) { key, value in print(key, value) }
    /// ```
    package static func forEachPlainField(utf8 bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID, _ field: (String, PlainValue) -> Void) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        var reader = StoredDocumentReader(base: base, count: bytes.count, zoneID: zoneID)
        return (try? reader.plainFields(field)) ?? false
    }

    /// A value as ``forEachPlainField(utf8:zoneID:_:)`` hands it over: a string the document
    /// holds without escapes as its UTF-8 bytes, valid only during the call (most strings are
    /// longer than a `String` holds without allocating); any other value as itself.
    package enum PlainValue {
        case string(UnsafeBufferPointer<UInt8>)
        case value(FieldValue)
    }

    /// - Parameter whose: ` of record 'name' in zone 'zone'`, or empty.
    static func corrupt(_ what: String, whose: String = "") -> StratusError {
        StratusError(.internalError, "stored field document\(whose) is corrupt: \(what)")
    }

    /// A failure of the cursor reading a stored document, as the error its reader throws.
    static func corrupt(_ failure: JSONCursor.Failure, whose: String = "") -> StratusError {
        switch failure {
        case .syntax(let offset, let message): corrupt("\(message) at byte \(offset)", whose: whose)
        case .needMore: corrupt("unexpected end of the document", whose: whose)
        }
    }
}

// MARK: - The reader

/// Reads a stored document straight into field values with the JSON cursor (``JSONCursor``),
/// without a syntax tree: the form ``FieldDocument/encode(_:encryptedKeys:)`` writes, and any
/// other spelling of it that JSON allows (spaces, escapes, exponents).
///
/// A value is a tagged array; the parts after the ones its tag reads are skipped (a string's
/// folded copy among them), except in a location, which has exactly eight numbers. Numbers
/// follow JSON's grammar; integers are written as integers (`2`, not `2.0`), and doubles read
/// as `Double(_:)` reads them. The common forms take fast paths built on the cursor: tags read
/// off their bytes, numbers in one pass of ``DecimalText/read(_:from:limit:)``.
struct StoredDocumentReader {
    typealias Failure = JSONCursor.Failure
    typealias Token = JSONCursor.Token

    private var cursor: JSONCursor
    private let zoneID: RecordZone.ID

    init(base: UnsafePointer<UInt8>, count: Int, zoneID: RecordZone.ID) {
        cursor = JSONCursor(base: base, limit: count, isComplete: true, endName: "end of the document", pos: 0)
        self.zoneID = zoneID
    }

    /// The document, its dictionary made from `shape` when its names are the shape's (see
    /// ``FieldDocument/Shape``); otherwise the shape remembers this document.
    mutating func document(assetURL: (String) -> URL?, shape: inout FieldDocument.Shape) throws(Failure) -> FieldDocument.Decoded {
        var encrypted: Set<String> = []
        var extras = Record.JSONExtras()
        shape.readNames.removeAll(keepingCapacity: true)
        shape.readValues.removeAll(keepingCapacity: true)
        // Whether every name so far is the shape's name at that place.
        var followsShape = true
        try readMembers(&encrypted, &extras) { (reader: inout Self, key: Token) throws(Failure) in
            let name = reader.cursor.string(key)
            let place = shape.readNames.count
            if followsShape && (place >= shape.names.count || shape.names[place] != name) { followsShape = false }
            shape.readValues.append(try reader.value(of: key, assetURL: assetURL))
            shape.readNames.append(name)
        }

        let count = shape.readNames.count
        var fields: [String: FieldValue]
        if followsShape && count == shape.names.count && count > 0 {
            // The same names in the same order: the last dictionary's layout, new values.
            fields = shape.fields
            for place in 0..<count { fields.values[shape.positions[place]] = shape.readValues[place] }
        } else {
            fields = [String: FieldValue](minimumCapacity: count)
            for place in 0..<count { fields[shape.readNames[place]] = shape.readValues[place] }
            // A document that names a field twice (the last value wins) is not a shape.
            if fields.count == count {
                shape.names = shape.readNames
                shape.positions = shape.names.map { fields.index(forKey: $0)! }
            } else {
                shape.names = []
                shape.positions = []
            }
        }
        if !shape.names.isEmpty { shape.fields = fields }
        shape.readValues.removeAll(keepingCapacity: true)
        return FieldDocument.Decoded(fields: fields, encryptedKeys: encrypted, jsonExtras: extras)
    }

    mutating func document(assetURL: (String) -> URL?) throws(Failure) -> FieldDocument.Decoded {
        var fields = [String: FieldValue](minimumCapacity: memberCountEstimate())
        var encrypted: Set<String> = []
        var extras = Record.JSONExtras()
        try readMembers(&encrypted, &extras) { (reader: inout Self, key: Token) throws(Failure) in
            fields[reader.cursor.string(key)] = try reader.value(of: key, assetURL: assetURL)
        }
        return FieldDocument.Decoded(fields: fields, encryptedKeys: encrypted, jsonExtras: extras)
    }

    /// Reads the document's members to its end: the encrypted keys and JSON extras into
    /// `encrypted` and `extras`, each field by `field` (given the reader and the key's token).
    private mutating func readMembers(_ encrypted: inout Set<String>, _ extras: inout Record.JSONExtras,
                                      field: (inout Self, Token) throws(Failure) -> Void) throws(Failure) {
        try cursor.expect(UInt8(ascii: "{"), "an object")
        if !cursor.consume(UInt8(ascii: "}")) {
            repeat {
                let key = try cursor.scanKey()
                if let special = specialMember(key) {
                    if special == FieldDocument.encryptedKeysMember {
                        for name in try list({ (r: inout Self) throws(Failure) in try r.string() }) { encrypted.insert(name) }
                    } else if special == FieldDocument.jsonExtrasMember {
                        extras = try jsonExtras()
                    } else {
                        throw cursor.syntax(key.start, "unknown member '\(special)'")
                    }
                } else {
                    try field(&self, key)
                }
            } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "the document")
        }
        cursor.skipSpace()
        if cursor.pos < cursor.limit {
            throw cursor.syntax(cursor.pos, "unexpected \(JSONCursor.describe(cursor.base[cursor.pos])) after the document")
        }
        // Strings note their problems (bad UTF-8, bad escapes) and are read on; numbers are
        // checked as they are read.
        if let problem = cursor.problem { throw .syntax(offset: problem.offset, message: problem.message) }
    }

    /// See ``FieldDocument/forEachPlainField(utf8:zoneID:_:)``.
    mutating func plainFields(_ field: (String, FieldDocument.PlainValue) -> Void) throws(Failure) -> Bool {
        try cursor.expect(UInt8(ascii: "{"), "an object")
        if !cursor.consume(UInt8(ascii: "}")) {
            repeat {
                let key = try cursor.scanKey()
                if specialMember(key) != nil { return false }
                if let text = try plainString() {
                    cursor.withStringBytes(text) { field(cursor.string(key), .string($0)) }
                    continue
                }
                let value = try value(of: key) { _ in nil }
                switch value {
                case .asset: return false
                case .assetList(let assets) where !assets.isEmpty: return false
                default: field(cursor.string(key), .value(value))
                }
            } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "the document")
        }
        cursor.skipSpace()
        return cursor.pos == cursor.limit && cursor.problem == nil
    }

    /// The string token of a string value without escapes, the value read to its end; nil,
    /// with nothing read, for any other value.
    private mutating func plainString() throws(Failure) -> Token? {
        let start = cursor.pos
        try cursor.expect(UInt8(ascii: "["), "a tagged value")
        cursor.skipSpace()
        guard try tagCode() == TagCode.string.rawValue, cursor.consume(UInt8(ascii: ",")), try cursor.peek() == UInt8(ascii: "\""),
              case let text = try cursor.scanString(), text.flags & Token.hasEscape == 0 else {
            cursor.pos = start
            return nil
        }
        // Parts after the string (its folded copy) serve queries, not reading.
        while cursor.consume(UInt8(ascii: ",")) { _ = try cursor.scanValue() }
        try cursor.expect(UInt8(ascii: "]"), "',' or ']' in a tagged value")
        return text
    }

    /// `~json`: `{"m":{…},"z":{…},"o":"…","c":{…},"d":{…},"a":[…],"f":{…}}`.
    private mutating func jsonExtras() throws(Failure) -> Record.JSONExtras {
        var extras = Record.JSONExtras()
        try cursor.expect(UInt8(ascii: "{"), "an object of JSON extras")
        if cursor.consume(UInt8(ascii: "}")) { return extras }
        repeat {
            let key = try cursor.scanKey()
            switch cursor.string(key) {
            case "m": extras.members = try texts()
            case "z": extras.zoneIDMembers = try texts()
            case "o": extras.ownerRecordName = try string()
            case "c": extras.createdMembers = try texts()
            case "d": extras.modifiedMembers = try texts()
            case "a": extras.absentKeys = Set(try list { (r: inout Self) throws(Failure) in try r.string() })
            case "f": extras.fields = try texts()
            default: _ = try cursor.scanValue()   // written by a later version: not needed to read the record
            }
        } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "the JSON extras")
        return extras
    }

    /// An object whose members are strings.
    private mutating func texts() throws(Failure) -> [String: String] {
        var members: [String: String] = [:]
        try cursor.expect(UInt8(ascii: "{"), "an object of texts")
        if cursor.consume(UInt8(ascii: "}")) { return members }
        repeat {
            let key = try cursor.scanKey()
            members[cursor.string(key)] = try string()
        } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "an object of texts")
        return members
    }

    /// An asset's metadata object (see ``FieldDocument``), applied to `asset`.
    private mutating func assetMetadata(_ asset: inout Asset) throws(Failure) {
        var sizeAbsent = false
        var metadata = asset.cloudKitMetadata
        try cursor.expect(UInt8(ascii: "{"), "an asset's metadata")
        if !cursor.consume(UInt8(ascii: "}")) {
            repeat {
                let key = try cursor.scanKey()
                switch cursor.string(key) {
                case "downloadURL": metadata.downloadURL = try string()
                case "fileChecksum": metadata.fileChecksum = try string()
                case "referenceChecksum": metadata.referenceChecksum = try string()
                case "wrappingKey": metadata.wrappingKey = try string()
                case "receipt": metadata.receipt = try string()
                case "other": metadata.otherMembers = try texts()
                case "noSize":
                    let value = try cursor.scanValue()
                    sizeAbsent = value.kind == .trueLiteral
                default: _ = try cursor.scanValue()
                }
            } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "an asset's metadata")
        }
        asset = asset.replacingMetadata(metadata)
        // Only an asset without stored content can lack a size.
        if sizeAbsent && asset.storedIdentifier == nil { asset = asset.withoutContent(size: nil) }
    }

    /// How many members the document has, give or take: each member but the last ends in
    /// `],"` (a string value can hold those bytes too). Sizing the dictionary once saves
    /// growing and rehashing it member by member.
    private func memberCountEstimate() -> Int {
        var count = 1
        var at = cursor.base
        let stop = cursor.base + cursor.limit
        while let found = memchr(at, Int32(UInt8(ascii: "]")), stop - at) {
            let bracket = UnsafePointer(found.assumingMemoryBound(to: UInt8.self))
            if stop - bracket > 2 && bracket[1] == UInt8(ascii: ",") && bracket[2] == UInt8(ascii: "\"") { count += 1 }
            at = bracket + 1
        }
        return count
    }

    /// The name of a member that is not a field (``FieldDocument/encryptedKeysMember``,
    /// ``FieldDocument/jsonExtrasMember``): these alone start with `~`.
    private func specialMember(_ key: Token) -> String? {
        guard cursor.base[key.start + 1] == UInt8(ascii: "~") || key.flags & Token.hasEscape != 0 else { return nil }
        let name = cursor.string(key)
        return name.hasPrefix("~") ? name : nil
    }

    private mutating func value(of key: Token, assetURL: (String) -> URL?) throws(Failure) -> FieldValue {
        let start = cursor.pos
        try cursor.expect(UInt8(ascii: "["), "a tagged value")
        cursor.skipSpace()
        let tagStart = cursor.pos
        let code = try tagCode()
        try cursor.expect(UInt8(ascii: ","), "',' after the tag")
        assert(TagCode.matchesTags, "TagCode differs from FieldDocument.Tag")
        let value: FieldValue
        switch TagCode(rawValue: code) {
        case .string?: value = .string(try string())
        case .int64?: value = .int64(try int())
        case .double?: value = .double(try double())
        case .date?: value = .date(Date(timeIntervalSinceReferenceDate: try double()))
        case .bytes?: value = .bytes(try bytes())
        case .reference?:
            let name = try string()
            try cursor.expect(UInt8(ascii: ","), "',' before the reference's action")
            value = .reference(reference(name, try int()))
        case .location?:
            value = .location(try locationBody())
            try cursor.expect(UInt8(ascii: "]"), "']' after a location's eight numbers")
            return value
        case .asset?:
            let identifier = try string()
            try cursor.expect(UInt8(ascii: ","), "',' before the asset's size")
            var asset = storedAsset(identifier, size: try int(), assetURL: assetURL)
            if cursor.consume(UInt8(ascii: ",")) { try assetMetadata(&asset) }
            value = .asset(asset)
        case .stringList?: value = .stringList(try list { (r: inout Self) throws(Failure) in try r.string() })
        case .int64List?: value = .int64List(try list { (r: inout Self) throws(Failure) in try r.int() })
        case .doubleList?: value = .doubleList(try list { (r: inout Self) throws(Failure) in try r.double() })
        case .dateList?: value = .dateList(try list { (r: inout Self) throws(Failure) in Date(timeIntervalSinceReferenceDate: try r.double()) })
        case .bytesList?: value = .bytesList(try list { (r: inout Self) throws(Failure) in try r.bytes() })
        case .referenceList?:
            let names = try list { (r: inout Self) throws(Failure) in try r.string() }
            try cursor.expect(UInt8(ascii: ","), "',' before the references' actions")
            let actions = try list { (r: inout Self) throws(Failure) in try r.int() }
            guard names.count == actions.count else { throw cursor.syntax(start, "field '\(cursor.string(key))' has unequal reference lists") }
            value = .referenceList(zip(names, actions).map { reference($0, $1) })
        case .locationList?:
            value = .locationList(try list { (r: inout Self) throws(Failure) in
                try r.cursor.expect(UInt8(ascii: "["), "a location")
                let location = try r.locationBody()
                try r.cursor.expect(UInt8(ascii: "]"), "']' after a location's eight numbers")
                return location
            })
        case .assetList?:
            let identifiers = try list { (r: inout Self) throws(Failure) in try r.string() }
            try cursor.expect(UInt8(ascii: ","), "',' before the assets' sizes")
            let sizes = try list { (r: inout Self) throws(Failure) in try r.int() }
            guard identifiers.count == sizes.count else { throw cursor.syntax(start, "field '\(cursor.string(key))' has unequal asset lists") }
            var assets = zip(identifiers, sizes).map { storedAsset($0, size: $1, assetURL: assetURL) }
            if cursor.consume(UInt8(ascii: ",")) {
                var index = 0
                try cursor.expect(UInt8(ascii: "["), "a list of asset metadata")
                if !cursor.consume(UInt8(ascii: "]")) {
                    repeat {
                        guard index < assets.count else { throw cursor.syntax(start, "field '\(cursor.string(key))' has unequal asset lists") }
                        if try cursor.peek() == UInt8(ascii: "{") { try assetMetadata(&assets[index]) } else { _ = try cursor.scanValue() }
                        index += 1
                    } while try cursor.nextMember(close: UInt8(ascii: "]"), in: "a list of asset metadata")
                }
            }
            value = .assetList(assets)
        case nil:
            var tag = cursor
            tag.pos = tagStart
            let text = (try? tag.scanString()).map { tag.quoted($0) } ?? ""
            throw cursor.syntax(tagStart, "field '\(cursor.string(key))' has the unknown tag '\(text)'")
        }
        if cursor.pos < cursor.limit && cursor.base[cursor.pos] == UInt8(ascii: "]") {
            cursor.pos &+= 1
            return value
        }
        // Parts after the ones the tag reads (a string's folded copy) serve queries, not reading.
        while cursor.consume(UInt8(ascii: ",")) { _ = try cursor.scanValue() }
        try cursor.expect(UInt8(ascii: "]"), "',' or ']' in a tagged value")
        return value
    }

    /// The tag at the cursor as the integer ``TagCode`` switches on, 0 for no tag it knows.
    /// Tags are one or two ASCII letters, read straight off the bytes when they stand plain
    /// between their quotes; any other spelling goes through the cursor's string scan.
    @inline(__always)
    private mutating func tagCode() throws(Failure) -> Int {
        let p = cursor.pos
        let base = cursor.base
        if p &+ 4 <= cursor.limit && base[p] == UInt8(ascii: "\"") && JSONCursor.isWordByte(base[p &+ 1]) {
            if base[p &+ 2] == UInt8(ascii: "\"") {
                cursor.pos = p &+ 3
                return Int(base[p &+ 1])
            }
            if JSONCursor.isWordByte(base[p &+ 2]) && base[p &+ 3] == UInt8(ascii: "\"") {
                cursor.pos = p &+ 4
                return Int(base[p &+ 1]) << 8 | Int(base[p &+ 2])
            }
        }
        return try spelledTagCode()
    }

    private mutating func spelledTagCode() throws(Failure) -> Int {
        let tag = try string(token: "a tag")
        return cursor.withStringBytes(tag) { bytes in bytes.count <= 2 ? bytes.reduce(0) { $0 << 8 | Int($1) } : 0 }
    }

    /// The tags of ``FieldDocument/Tag`` as the integers `value(of:assetURL:)` switches on: the
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

    /// An asset as stored: with content when it has an identifier, else a CloudKit reference
    /// whose metadata follows.
    private func storedAsset(_ identifier: String, size: Int64, assetURL: (String) -> URL?) -> Asset {
        identifier.isEmpty ? Asset(fileURL: nil, storedIdentifier: nil, size: size, source: nil)
            : Asset(storedIdentifier: identifier, size: size, fileURL: assetURL(identifier))
    }

    private func reference(_ name: String, _ action: Int64) -> Record.Reference {
        Record.Reference(recordID: Record.ID(recordName: name, zoneID: zoneID), action: UInt(exactly: action).flatMap(Record.ReferenceAction.init(rawValue:)) ?? .none)
    }

    /// Latitude, longitude, altitude, the two accuracies, course, speed and the timestamp.
    private mutating func locationBody() throws(Failure) -> Location {
        var values: [Double] = []
        values.reserveCapacity(8)
        for index in 0..<8 {
            if index > 0 { try cursor.expect(UInt8(ascii: ","), "',' between a location's eight numbers") }
            values.append(try double())
        }
        return Location(latitude: values[0], longitude: values[1], altitude: values[2], horizontalAccuracy: values[3],
                        verticalAccuracy: values[4], course: values[5], speed: values[6],
                        timestamp: Date(timeIntervalSinceReferenceDate: values[7]))
    }

    private mutating func list<T>(_ element: (inout Self) throws(Failure) -> T) throws(Failure) -> [T] {
        try cursor.expect(UInt8(ascii: "["), "a list")
        var items: [T] = []
        if cursor.consume(UInt8(ascii: "]")) { return items }
        repeat { items.append(try element(&self)) } while try cursor.nextMember(close: UInt8(ascii: "]"), in: "a list")
        return items
    }

    // MARK: Scalars

    private mutating func string(token what: StaticString = "a string") throws(Failure) -> Token {
        let b = try cursor.peek()
        guard b == UInt8(ascii: "\"") else { throw cursor.syntax(cursor.pos, "expected \(what), found \(JSONCursor.describe(b))") }
        return try cursor.scanString()
    }

    private mutating func string() throws(Failure) -> String {
        // Scanned first: a mutating scan inside the call's arguments would copy the cursor.
        let token = try string(token: "a string")
        return cursor.string(token)
    }

    private mutating func bytes() throws(Failure) -> Data {
        let token = try string(token: "a base64 string")
        guard let data = cursor.base64(token) else { throw cursor.syntax(token.start, "a base64 string is not valid base64") }
        return data
    }

    /// A number, checked against JSON's grammar before it is converted.
    private mutating func number(_ what: StaticString) throws(Failure) -> Token {
        let b = try cursor.peek()
        guard b == UInt8(ascii: "-") || JSONCursor.isDigit(b) else { throw cursor.syntax(cursor.pos, "expected \(what), found \(JSONCursor.describe(b))") }
        let token = try cursor.scanNumber()
        if let problem = cursor.problem { throw .syntax(offset: problem.offset, message: problem.message) }
        return token
    }

    /// The number at the cursor in one pass of ``DecimalText/read(_:from:limit:)``, when it is
    /// well formed and a delimiter ends it; nil, with nothing consumed, for the cursor's scan.
    @inline(__always)
    private mutating func plainNumber() -> DecimalReading? {
        cursor.skipSpace()
        let reading = DecimalText.read(cursor.base, from: cursor.pos, limit: cursor.limit)
        guard reading.isWellFormed && reading.end < cursor.limit && !JSONCursor.isNumberByte(cursor.base[reading.end]) else { return nil }
        return reading
    }

    private mutating func int() throws(Failure) -> Int64 {
        if let reading = plainNumber(), case .value(let value) = reading.int64 {
            cursor.pos = reading.end
            return value
        }
        let token = try number("an integer")
        guard case .value(let value) = cursor.exactInteger(token) else {
            throw cursor.syntax(token.start, "'\(cursor.numberText(token))' is not a 64-bit integer")
        }
        return value
    }

    private mutating func double() throws(Failure) -> Double {
        if let reading = plainNumber(), let value = reading.exactDouble {
            cursor.pos = reading.end
            return value
        }
        let token = try number("a number")
        guard let value = DecimalText.double(cursor.base + token.start, count: token.end - token.start) else {
            throw cursor.syntax(token.start, "'\(cursor.numberText(token))' is not a number")
        }
        return value
    }
}

// MARK: - Reading one field for a scan

extension FieldDocument {
    /// The value of field `name` in a stored document when it has an order (a number,
    /// timestamp, string or reference: ``QueryRules/orderedFamily(of:)``), read without decoding
    /// the rest of the document; `nil` when the document lacks the field or its value has no
    /// order. A scan that orders by a field calls this once per row. A reference comes back as
    /// what it orders by, its record name (in the default zone, without its action).
    ///
    /// ```swift
    /// let value = try FieldDocument.orderedValue(ofField: nameBytes, inStoredDocument: columnBytes)
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    public static func orderedValue(ofField name: UnsafeBufferPointer<UInt8>, inStoredDocument bytes: UnsafeBufferPointer<UInt8>) throws -> FieldValue? {
        try probe(bytes) { (reader: inout StoredDocumentReader) throws(JSONCursor.Failure) in
            try reader.seekMember(name) ? try reader.orderedValue() : nil
        }
    }

    /// Calls `body` with what string equality compares for field `name` in a stored document,
    /// read without decoding the rest, and answers true: the string's folded copy when the
    /// document keeps one (`isFolded`), else the string itself, which the caller lowercases
    /// A–Z to fold it (``QueryRules/equalityKey(_:)`` of ASCII text). False, without calling
    /// `body`, when the field is missing or holds no string. Not generic, so that an engine's
    /// per-row call needs no type metadata.
    ///
    /// ```swift
    /// let isString = try FieldDocument.withEqualityText(ofField: nameBytes, inStoredDocument: columnBytes) { text, isFolded in … }
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when the document is not a valid stored document.
    @discardableResult
    public static func withEqualityText(ofField name: UnsafeBufferPointer<UInt8>, inStoredDocument bytes: UnsafeBufferPointer<UInt8>,
                                        _ body: (_ text: UnsafeBufferPointer<UInt8>, _ isFolded: Bool) -> Void) throws -> Bool {
        try probe(bytes) { (reader: inout StoredDocumentReader) throws(JSONCursor.Failure) -> Bool? in
            guard try reader.seekMember(name), let (token, isFolded) = try reader.equalityToken() else { return false }
            reader.withStringBytes(token) { body($0, isFolded) }
            return true
        } ?? false
    }

    private static func probe<R>(_ bytes: UnsafeBufferPointer<UInt8>, _ read: (inout StoredDocumentReader) throws(JSONCursor.Failure) -> R?) throws -> R? {
        guard let base = bytes.baseAddress else { throw corrupt("the document is empty") }
        var reader = StoredDocumentReader(base: base, count: bytes.count, zoneID: .default)
        do {
            return try read(&reader)
        } catch {
            throw corrupt(error)
        }
    }
}

extension StoredDocumentReader {
    /// Reads the document's members up to the field `name` (compared unescaped), leaving the
    /// cursor at its value; false, having read the whole document, when it has no such field.
    /// The first of two members of one name is found (documents Stratus writes have none).
    mutating func seekMember(_ name: UnsafeBufferPointer<UInt8>) throws(Failure) -> Bool {
        try cursor.expect(UInt8(ascii: "{"), "an object")
        if cursor.consume(UInt8(ascii: "}")) { return false }
        repeat {
            let key = try cursor.scanKey()
            if cursor.withStringBytes(key, { $0.elementsEqual(name) }) { return true }
            _ = try cursor.scanValue()
        } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "the document")
        return false
    }

    /// The tagged value at the cursor when its family has an order, else `nil`; what follows
    /// the value is not read.
    mutating func orderedValue() throws(Failure) -> FieldValue? {
        try cursor.expect(UInt8(ascii: "["), "a tagged value")
        cursor.skipSpace()
        let code = try tagCode()
        switch TagCode(rawValue: code) {
        case .string?: try cursor.expect(UInt8(ascii: ","), "',' after the tag"); return .string(try string())
        case .int64?: try cursor.expect(UInt8(ascii: ","), "',' after the tag"); return .int64(try int())
        case .double?: try cursor.expect(UInt8(ascii: ","), "',' after the tag"); return .double(try double())
        case .date?: try cursor.expect(UInt8(ascii: ","), "',' after the tag"); return .date(Date(timeIntervalSinceReferenceDate: try double()))
        case .reference?: try cursor.expect(UInt8(ascii: ","), "',' after the tag"); return .reference(reference(try string(), 0))
        default: return nil
        }
    }

    /// For a string value at the cursor: its folded copy's token when the value has one (a
    /// string after the value), else the string's token; `nil` for a value of another type.
    mutating func equalityToken() throws(Failure) -> (token: Token, isFolded: Bool)? {
        try cursor.expect(UInt8(ascii: "["), "a tagged value")
        cursor.skipSpace()
        guard TagCode(rawValue: try tagCode()) == .string else { return nil }
        try cursor.expect(UInt8(ascii: ","), "',' after the tag")
        let text = try string(token: "a string")
        // Parts after the string that are not a folded copy are skipped, as decoding skips them.
        guard cursor.consume(UInt8(ascii: ",")), try cursor.peek() == UInt8(ascii: "\"") else { return (text, false) }
        return (try string(token: "a string's folded copy"), true)
    }

    func withStringBytes<R>(_ token: Token, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        cursor.withStringBytes(token, body)
    }
}
