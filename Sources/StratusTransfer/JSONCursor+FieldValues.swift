import Foundation
import Stratus

/// What a `"type"` string names.
enum TypeName {
    case known(FieldType)
    /// `ENCRYPTED_BYTES` (CloudKit's type for an encrypted BYTES value), or `ENCRYPTED_` before
    /// another type (as CloudKit's schema language spells encrypted fields): an encrypted value.
    case encrypted(FieldType)
    /// `UNKNOWN_LIST`: CloudKit's type for an empty list whose element type it does not know.
    case unknownList
    case unknown(String)
}

extension FieldType {
    /// The list type whose elements are of this (scalar) type.
    var listType: FieldType {
        switch self {
        case .string: .stringList
        case .int64: .int64List
        case .double: .doubleList
        case .timestamp: .timestampList
        case .bytes: .bytesList
        case .reference: .referenceList
        case .location: .locationList
        case .asset: .assetList
        default: self
        }
    }

    /// The element type of a list type.
    var elementType: FieldType {
        switch self {
        case .stringList: .string
        case .int64List: .int64
        case .doubleList: .double
        case .timestampList: .timestamp
        case .bytesList: .bytes
        case .referenceList: .reference
        case .locationList: .location
        case .assetList: .asset
        default: self
        }
    }

    /// Reads CloudKit's type names, including `ASSET` for ``asset``, `ENCRYPTED_` types and
    /// `NUMBER_` types.
    static func named(_ text: String) -> TypeName {
        if let type = FieldType(rawValue: text) { return .known(type) }
        switch text {
        case "ASSET": return .known(.asset)
        case "ASSET_LIST": return .known(.assetList)
        case "UNKNOWN_LIST": return .unknownList
        default:
            if text.hasPrefix("ENCRYPTED_"), case .known(let type) = named(String(text.dropFirst(10))) { return .encrypted(type) }
            // CloudKit Web Services types the value of a field its schema declares NUMBER
            // (`NUMBER PREFERRED AS …`, or grown by a save) as NUMBER_INT64 or NUMBER_DOUBLE:
            // the value is that number. Its spelling is kept by keepsFieldText.
            if text.hasPrefix("NUMBER_"), let type = FieldType(rawValue: String(text.dropFirst(7))),
                [.int64, .double, .int64List, .doubleList].contains(type)
            {
                return .known(type)
            }
            if let type = cktoolTypes[text] { return .known(type) }
            if text == "encryptedBytesType" { return .encrypted(.bytes) }
            return .unknown(text)
        }
    }

    /// The type names of `xcrun cktool` record fields (`--fields-json '{"title": {"type":
    /// "stringType", "value": "…"}}'`, as Apple's examples write them), lists and assets
    /// included, as CloudKit's management API names them (and `encryptedBytesType`, read by
    /// ``named(_:)``). Their spelling is kept by keepsFieldText.
    static let cktoolTypes: [String: FieldType] = [
        "stringType": .string, "int64Type": .int64, "doubleType": .double, "timestampType": .timestamp,
        "bytesType": .bytes, "referenceType": .reference, "locationType": .location, "assetType": .asset,
        "stringListType": .stringList, "int64ListType": .int64List, "doubleListType": .doubleList,
        "timestampListType": .timestampList, "bytesListType": .bytesList, "referenceListType": .referenceList,
        "locationListType": .locationList, "assetListType": .assetList,
    ]

    /// The name a field of this type has in record JSON and CSV headers.
    func name(encrypted: Bool) -> String {
        guard encrypted else { return rawValue }
        return "ENCRYPTED_" + rawValue
    }
}

extension JSONCursor {
    // MARK: - Field values

    /// Converts one scanned field: typed by its `"type"`, else by the schema, else as an
    /// earlier record of the input declared it (`declaredByInput`), else inferred.
    /// Answers nil for a `null` value (the field is removed), and whether the value is an
    /// encrypted value (`ENCRYPTED_…` type or `"isEncrypted": true`). `numbers` are the fields
    /// the schema declares `NUMBER PREFERRED AS …` (see ``numberType(_:preferred:)``);
    /// `encrypted` the fields the schema, or the input's earlier records, declare encrypted,
    /// whose values without a `"type"` are encrypted values.
    func fieldValue(
        _ field: PendingField, key: String, schema: [String: FieldType]?, declaredByInput: [String: FieldType]? = nil, numbers: Set<String>? = nil,
        encrypted declaredEncrypted: (bySchema: Set<String>?, byInput: Set<String>?) = (nil, nil), zone: RecordZone.ID, context: DecodeContext
    ) throws(FieldError) -> (FieldValue?, encrypted: Bool) {
        let token = field.value
        guard token.isPresent else { throw FieldError(offset: field.name.start, message: "field '\(key)' has no 'value'") }
        let type: FieldType
        var encrypted = field.isEncrypted
        if field.type.isPresent {
            switch typeName(field.type) {
            case .known(let known):
                type = known
            case .encrypted(let plain):
                type = plain
                encrypted = true
            case .unknownList:
                guard token.kind == .array, isEmptyContainer(token) else {
                    throw FieldError(offset: field.type.start, message: "field '\(key)' has type UNKNOWN_LIST but holds elements; give the list's type")
                }
                type = schema?[key].flatMap { $0.isList ? $0 : nil } ?? .stringList
            case .unknown(let name):
                throw FieldError(
                    offset: field.type.start,
                    message: "field '\(key)' has type '\(name.count > 40 ? String(name.prefix(40)) + "…" : name)', which this version does not know; the record is rejected rather than losing the field")
            }
        } else if let declared = schema?[key] {
            type = numbers?.contains(key) == true ? numberType(token, preferred: declared) : declared
            if declaredEncrypted.bySchema?.contains(key) == true { encrypted = true }
        } else if let declared = declaredByInput?[key] {
            type = declared
            if declaredEncrypted.byInput?.contains(key) == true { encrypted = true }
        } else {
            guard let inferred = try inferredType(token, key: key) else { return (nil, encrypted) }
            type = inferred
        }
        if token.kind == .null { return (nil, encrypted) }
        // CloudKit's ENCRYPTED_BYTES are opaque: ciphertext in base64 as a rule, kept as its
        // text's bytes otherwise (and written back as it came, see keepsFieldText).
        if encrypted && type == .bytes && token.kind == .string && base64(token) == nil {
            return (.bytes(Data(string(token).utf8)), true)
        }
        return (try value(token, as: type, key: key, zone: zone, context: context), encrypted)
    }

    /// The type of an untyped value in a `NUMBER PREFERRED AS …` field (or a list of them),
    /// which takes INT64 and DOUBLE: the preferred type, except DOUBLE for a number INT64
    /// cannot hold (`2.5`; a whole number written with a fraction is an integer) and INT64 for
    /// `true`/`false` and for an integer DOUBLE cannot hold exactly (`9007199254740993`, which
    /// a double would make `9007199254740992`). Anything else takes the preferred type, whose
    /// reader says what is wrong.
    func numberType(_ token: Token, preferred: FieldType) -> FieldType {
        func isFraction(_ t: Token) -> Bool {
            guard t.kind == .number else { return false }
            if case .value = integer(t) { return false }
            return true
        }
        switch preferred {
        case .int64:
            return isFraction(token) ? .double : .int64
        case .int64List:
            return token.kind == .array && anyElement(token, isFraction) ? .doubleList : .int64List
        case .double:
            return token.kind == .trueLiteral || token.kind == .falseLiteral || isInexactAsDouble(token) ? .int64 : .double
        case .doubleList:
            // Every element an integer, one of which a double cannot hold exactly: INT64 keeps them all.
            guard token.kind == .array, anyElement(token, isInexactAsDouble) else { return .doubleList }
            return anyElement(token) { if case .value = integer($0) { false } else { true } } ? .doubleList : .int64List
        default:
            return preferred
        }
    }

    /// The number a string holds when it holds a JSON number and nothing else (`"42"`,
    /// `"-1.5"`, `"1700000000000"`), as a number token over the string's text; nil for any
    /// other string. CloudKit JS and CloudKit Web Services write every number of a record's
    /// fields as such a string when asked to (`numbersAsStrings`, which JavaScript needs for
    /// INT64 values beyond 2^53), and their answers are saved that way.
    func numberInString(_ t: Token) -> Token? {
        guard t.kind == .string, t.flags & Token.hasEscape == 0, t.end - t.start > 2 else { return nil }
        let first = base[t.start + 1]
        guard first == UInt8(ascii: "-") || JSONCursor.isDigit(first) else { return nil }
        var c = JSONCursor(base: base, limit: t.end - 1, isComplete: true, pos: t.start + 1)
        guard let number = try? c.scanNumber(), number.end == t.end - 1, c.problem == nil else { return nil }
        return number
    }

    /// What is wrong with the number a string holds when ``numberInString(_:)`` has none for
    /// it (`"1000…0"`, longer than a number may be); nil when the string holds no number.
    func numberInStringProblem(_ t: Token) -> String? {
        guard t.kind == .string, t.flags & Token.hasEscape == 0, t.end - t.start > 2 else { return nil }
        let first = base[t.start + 1]
        guard first == UInt8(ascii: "-") || JSONCursor.isDigit(first) else { return nil }
        // A well-formed number has one problem a string's number may have: its length.
        let reading = DecimalText.read(base, from: t.start + 1, limit: t.end - 1)
        guard reading.isWellFormed, reading.end == t.end - 1, t.end - 1 - (t.start + 1) > JSONCursor.maximumNumberLength else { return nil }
        return "a number is longer than \(JSONCursor.maximumNumberLength) characters"
    }

    /// Whether the number is an INT64 that a double cannot hold exactly (beyond 2^53 and not a
    /// double's value).
    private func isInexactAsDouble(_ token: Token) -> Bool {
        guard token.kind == .number, case .value(let value) = integer(token) else { return false }
        return Double(exactly: value) == nil
    }

    /// Whether writing the typed value back would give other JSON than the field came as, so
    /// that the field's JSON is kept (``Stratus/Record/JSONExtras/fields``).
    ///
    /// When the JSON holds what the typed value cannot: keys besides value, type and
    /// isEncrypted; bytes whose text is not the padded base64 a writer gives (`"YQ"`, `"abc"`,
    /// escapes) or, encrypted, not base64 at all; references with `VALIDATE`, a `zoneID`, other
    /// keys or given as a name; locations without all eight members or with other keys. And
    /// when the JSON is only spelled otherwise than a writer spells it: no type, a type such
    /// as `ENCRYPTED_STRING` or `UNKNOWN_LIST`, `"isEncrypted"` on `ENCRYPTED_BYTES` or BYTES,
    /// `"isEncrypted": false`, `true`/`false` for INT64, a reference without an action. Every
    /// JSON format keeps these alike: a field goes back as it came. Assets are written back
    /// from their CloudKit metadata, which they keep whole; what else their field held is kept
    /// by ``assetFieldTemplate(_:encrypted:)``.
    func keepsFieldText(_ field: PendingField, value: FieldValue, encrypted: Bool) -> Bool {
        let type = value.type
        if type == .asset || type == .assetList { return false }
        if field.keepsText { return true }
        let token = field.value
        switch type {
        case .bytes where token.kind == .string && !bytesTextIsWritten(token, encrypted: encrypted): return true
        case .bytesList where anyElement(token) { $0.kind == .string && !bytesTextIsWritten($0, encrypted: encrypted) }: return true
        case .reference where referenceLosesText(token): return true
        case .referenceList where anyElement(token, referenceLosesText): return true
        case .location where locationLosesText(token): return true
        case .locationList where anyElement(token, locationLosesText): return true
        default: break
        }
        // What follows is spelling only.
        guard field.type.isPresent, !field.saysNotEncrypted else { return true }
        let written = encrypted && type == .bytes ? "ENCRYPTED_BYTES" : type.rawValue
        // Compared with memcmp: a generic comparison of the two byte sequences cost 2% of an import.
        guard field.type.flags & Token.hasEscape == 0, field.type.end - field.type.start - 2 == written.utf8.count else { return true }
        let typeText = UnsafeBufferPointer(start: base + field.type.start + 1, count: written.utf8.count)
        let spelledAsWritten = written.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, typeText.baseAddress!, $0.count) == 0 }
            ?? written.utf8.elementsEqual(typeText)
        guard spelledAsWritten else { return true }
        // BYTES with "isEncrypted": true is written as ENCRYPTED_BYTES, and ENCRYPTED_BYTES
        // without it.
        if encrypted && type == .bytes && field.isEncrypted { return true }
        switch type {
        case .int64: return token.kind != .number
        case .int64List: return anyElement(token) { $0.kind != .number }
        // Numbers written as strings (numbersAsStrings) go back as strings; an ISO 8601 date
        // goes back as milliseconds.
        case .double: return token.kind != .number
        case .doubleList: return anyElement(token) { $0.kind != .number }
        case .timestamp: return numberInString(token) != nil
        case .timestampList: return anyElement(token) { numberInString($0) != nil }
        case .reference: return !hasAction(token)
        case .referenceList: return anyElement(token) { !hasAction($0) }
        default: return false
        }
    }

    /// Whether a BYTES string is the text a writer gives its bytes: padded base64 without
    /// escapes (the decoder refuses bits beyond the last byte, so each byte string has one
    /// such text). An encrypted value that is not base64 is kept as its text's bytes, which a
    /// writer would give as base64.
    private func bytesTextIsWritten(_ token: Token, encrypted: Bool) -> Bool {
        guard token.flags & Token.hasEscape == 0, (token.end - token.start - 2) % 4 == 0 else { return false }
        return !encrypted || base64(token) != nil
    }

    /// The members of an asset field besides `value`, as a JSON object's text, when a writer
    /// would not give them back from the asset: no type, a type spelled `ASSET` or
    /// `ASSET_LIST`, `isEncrypted`, other keys. Nil when the field is as a writer writes it.
    /// A writer puts the asset's `value` back in front of these (``RecordJSONWriter``).
    func assetFieldTemplate(_ field: PendingField, encrypted: Bool) -> String? {
        let spelledAsWritten: Bool
        if field.keepsText || field.saysNotEncrypted || field.isEncrypted || encrypted || !field.type.isPresent {
            spelledAsWritten = false
        } else {
            spelledAsWritten = stringEquals(field.type, "ASSETID") || stringEquals(field.type, "ASSETID_LIST")
        }
        if spelledAsWritten { return nil }
        var text = "{"
        try? forEachMember(field.object) { (k, v) throws(FieldError) in
            if stringEquals(k, "value") { return }
            if text.utf8.count > 1 { text += "," }
            text += compactText(k) + ":" + compactText(v)
        }
        return text + "}"
    }

    func anyElement(_ token: Token, _ test: (Token) -> Bool) -> Bool {
        guard token.kind == .array else { return false }
        var sub = JSONCursor(base: base, limit: token.end, isComplete: true, pos: token.start + 1)
        guard let first = try? sub.peek(), first != UInt8(ascii: "]") else { return false }
        while true {
            guard let element = try? sub.scanValue() else { return true }
            if test(element) { return true }
            guard let more = try? sub.nextMember(close: UInt8(ascii: "]"), in: "an array") else { return true }
            if !more { return false }
        }
    }

    /// Whether a reference holds what `{"recordName": …, "action": "NONE"|"DELETE_SELF"}`
    /// cannot: `VALIDATE`, a `zoneID`, other keys, or a bare name.
    func referenceLosesText(_ token: Token) -> Bool {
        guard token.kind == .object else { return true }
        var loses = false
        try? forEachMember(token) { (k, v) throws(FieldError) in
            if stringEquals(k, "recordName") { return }
            if stringEquals(k, "action"), v.kind == .string, stringEquals(v, "NONE") || stringEquals(v, "DELETE_SELF") { return }
            loses = true
        }
        return loses
    }

    private func hasAction(_ token: Token) -> Bool {
        var found = false
        try? forEachMember(token) { (k, _) throws(FieldError) in if stringEquals(k, "action") { found = true } }
        return found
    }

    /// Whether a location lacks some of the eight members a writer gives, or has others.
    func locationLosesText(_ token: Token) -> Bool {
        guard token.kind == .object else { return true }
        var seen: UInt32 = 0
        var needs = false
        try? forEachMember(token) { (k, _) throws(FieldError) in
            let names: [StaticString] = ["latitude", "longitude", "altitude", "horizontalAccuracy", "verticalAccuracy", "course", "speed", "timestamp"]
            guard let index = names.firstIndex(where: { stringEquals(k, $0) }) else {
                needs = true
                return
            }
            seen |= 1 << UInt32(index)
        }
        return needs || seen != 0xFF
    }

    /// Whether writing a REFERENCE or LOCATION value (or a list of them) back from its typed
    /// value would lose what its JSON held: an action `VALIDATE` or none, a `zoneID`, some
    /// location members only, other keys.
    func objectValueLosesText(_ token: Token, as type: FieldType) -> Bool {
        switch type {
        case .reference: referenceLosesText(token) || !hasAction(token)
        case .referenceList: anyElement(token) { referenceLosesText($0) || !hasAction($0) }
        case .location: locationLosesText(token)
        case .locationList: anyElement(token, locationLosesText)
        default: false
        }
    }

    /// The JSON text of the `value` member of a kept field's text (``Stratus/Record/JSONExtras/fields``),
    /// or nil when it has none.
    static func keptValueText(_ kept: String) -> String? {
        var copy = kept
        return copy.withUTF8 { bytes -> String? in
            guard let base = bytes.baseAddress else { return nil }
            var cursor = JSONCursor(base: base, limit: bytes.count, isComplete: true, pos: 0)
            do throws(ScanFailure) {
                guard try cursor.peek() == UInt8(ascii: "{"), try cursor.openObject() else { return nil }
                repeat {
                    let key = try cursor.scanKey()
                    let value = try cursor.scanValue()
                    if cursor.stringEquals(key, "value") { return cursor.compactText(value) }
                } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "a field")
            } catch {
                return nil
            }
            return nil
        }
    }

    /// A reference outside the fields (the record's parent).
    func reference(_ token: Token, what: String, zone: RecordZone.ID, context: DecodeContext) throws(FieldError) -> Record.Reference {
        try referenceValue(token, what, .reference, -2, zone: zone, context: context)
    }

    func typeName(_ token: Token) -> TypeName {
        // The common names without a String; anything else through the slow path.
        if token.flags & Token.hasEscape == 0 {
            let count = token.end - token.start - 2
            let at = token.start + 1
            switch count {
            case 6:
                if matches(at, "STRING") { return .known(.string) }
                if matches(at, "DOUBLE") { return .known(.double) }
            case 5:
                if matches(at, "INT64") { return .known(.int64) }
            case 9:
                if matches(at, "TIMESTAMP") { return .known(.timestamp) }
                if matches(at, "REFERENCE") { return .known(.reference) }
            default: break
            }
        }
        return FieldType.named(string(token))
    }

    /// Converts a value of a known type.
    func value(_ token: Token, as type: FieldType, key: String, zone: RecordZone.ID, context: DecodeContext) throws(FieldError) -> FieldValue {
        switch type {
        case .string: return .string(try stringValue(token, key, type, -1))
        case .int64: return .int64(try int64Value(token, key, type, -1))
        case .double: return .double(try doubleValue(token, key, type, -1))
        case .timestamp: return .date(try dateValue(token, key, type, -1))
        case .bytes: return .bytes(try bytesValue(token, key, type, -1))
        case .reference: return .reference(try referenceValue(token, key, type, -1, zone: zone, context: context))
        case .location: return .location(try locationValue(token, key, type, -1))
        case .asset: return .asset(try assetValue(token, key, type, -1, context: context))
        case .stringList:
            var list: [String] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try stringValue(t, key, type, i)) }
            return .stringList(list)
        case .int64List:
            var list: [Int64] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try int64Value(t, key, type, i)) }
            return .int64List(list)
        case .doubleList:
            var list: [Double] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try doubleValue(t, key, type, i)) }
            return .doubleList(list)
        case .timestampList:
            var list: [Date] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try dateValue(t, key, type, i)) }
            return .dateList(list)
        case .bytesList:
            var list: [Data] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try bytesValue(t, key, type, i)) }
            return .bytesList(list)
        case .referenceList:
            var list: [Record.Reference] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try referenceValue(t, key, type, i, zone: zone, context: context)) }
            return .referenceList(list)
        case .locationList:
            var list: [Location] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try locationValue(t, key, type, i)) }
            return .locationList(list)
        case .assetList:
            var list: [Asset] = []
            try forEachElement(token, key, type) { (i, t) throws(FieldError) in list.append(try assetValue(t, key, type, i, context: context)) }
            return .assetList(list)
        }
    }

    /// "field 'count': INT64 value" or "field 'tags': STRING_LIST element 2".
    private func site(_ key: String, _ type: FieldType, _ index: Int) -> String {
        if index == -2 { return key }  // not a field: the parent
        return index < 0 ? "field '\(key)': \(type.rawValue) value" : "field '\(key)': \(type.rawValue) element \(index + 1)"
    }

    /// A number as shown after the site: bare after "value", in parentheses after "element 2".
    private func shown(_ t: Token, _ index: Int) -> String {
        index < 0 ? numberText(t) : "(\(numberText(t)))"
    }

    private func fail(_ token: Token, _ key: String, _ type: FieldType, _ index: Int, _ text: String) -> FieldError {
        FieldError(offset: token.start, message: "\(site(key, type, index)) \(text)")
    }

    // MARK: - Scalars

    private func stringValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> String {
        guard t.kind == .string else { throw fail(t, key, type, i, "must be a string, not \(t.kindName)") }
        return string(t)
    }

    private func int64Value(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> Int64 {
        switch t.kind {
        case .number:
            switch integer(t) {
            case .value(let v): return v
            case .notInteger: throw fail(t, key, type, i, "\(shown(t, i)) is not an integer")
            case .outOfRange: throw fail(t, key, type, i, "\(shown(t, i)) is out of range for a 64-bit integer")
            }
        // CloudKit stores booleans as INT64 1 and 0.
        case .trueLiteral: return 1
        case .falseLiteral: return 0
        case .string:
            guard let number = numberInString(t) else {
                throw fail(t, key, type, i, numberInStringProblem(t).map { "is a string whose number cannot be read: \($0)" } ?? "must be an integer, not a string that is not a number")
            }
            return try int64Value(number, key, type, i)
        default: throw fail(t, key, type, i, "must be an integer, not \(t.kindName)")
        }
    }

    private func doubleValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> Double {
        if t.kind == .string {
            guard let number = numberInString(t) else {
                let text = string(t)
                if JSONCursor.spellsNonFiniteNumber(text) { throw fail(t, key, type, i, "is the string '\(text)': \(JSONCursor.nonFiniteNumberReason)") }
                throw fail(t, key, type, i, numberInStringProblem(t).map { "is a string whose number cannot be read: \($0)" } ?? "must be a number, not a string that is not a number")
            }
            return try doubleValue(number, key, type, i)
        }
        guard t.kind == .number else { throw fail(t, key, type, i, "must be a number, not \(t.kindName)") }
        guard let value = double(t) else { throw fail(t, key, type, i, "\(shown(t, i)) is too large for a double") }
        if value == 0, !spellsZero(t) { throw fail(t, key, type, i, "\(shown(t, i)) is too small for a double: it would be stored as 0") }
        // A whole number a double cannot hold is not silently made another one: the nearest
        // double is written back as other digits (9007199254740993 would be 9007199254740992).
        if changesAsDouble(t, value) {
            throw fail(t, key, type, i, abs(value) < 9.223372036854775808e18
                ? "\(shown(t, i)) is a whole number a DOUBLE cannot hold exactly (it would be stored as \(Self.wholeDigits(value))); give it as INT64 (a NUMBER field takes both)"
                : "\(shown(t, i)) is a whole number a DOUBLE cannot hold exactly (it would be stored as \(Self.wholeDigits(value))), and too large for INT64; give it as a STRING to keep every digit")
        }
        return value
    }

    /// Whether the number `t` is zero as written (`0`, `-0.0`, `0e5`), rather than a nonzero
    /// value (`1e-400`) too small for any double. Asked only of numbers that read as 0.
    private func spellsZero(_ t: Token) -> Bool {
        var i = t.start
        while i < t.end {
            let b = base[i]
            if b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { return true }
            if b >= UInt8(ascii: "1") && b <= UInt8(ascii: "9") { return false }
            i += 1
        }
        return true
    }

    /// Whether the whole number `t` spells is not what its double `value` writes back: an
    /// integer beyond 2^53 that no double is. Digits a writer gave a double (JavaScript's
    /// `1152921504606847000` for 2^60) are that double, and so are kept.
    private func changesAsDouble(_ t: Token, _ value: Double) -> Bool {
        // Every integer below 2^53 is a double: only a number that reads as 2^53 or more can
        // be an integer no double is (this keeps the exact reading off the common path).
        guard value.magnitude >= 9_007_199_254_740_992 else { return false }
        switch integer(t) {
        case .notInteger: return false
        case .value(let exact) where exact.magnitude <= 1 << 53: return false
        case .value, .outOfRange:
            let given = ExactDecimal(base + t.start, count: t.end - t.start)
            // The double's own value, exactly (glibc prints every digit): 2^64 written out is
            // that double, as much as its shortest form 18446744073709552000 is.
            return given != ExactDecimal(value.description) && given != ExactDecimal(String(format: "%.0f", value))
        }
    }

    /// A double as a message writes it: its whole digits when it is whole and not too long.
    private static func wholeDigits(_ value: Double) -> String {
        value == value.rounded() && value.magnitude < 1e21 ? String(format: "%.0f", value) : value.description
    }

    private func dateValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> Date {
        guard t.kind == .number || t.kind == .string else {
            throw fail(t, key, type, i, "must be a number of milliseconds since 1970 or an ISO 8601 date-time, not \(t.kindName)")
        }
        if let number = numberInString(t) { return try dateValue(number, key, type, i) }
        if let problem = numberInStringProblem(t) { throw fail(t, key, type, i, "is a string whose number cannot be read: \(problem)") }
        guard let value = timestamp(t) else {
            if t.kind == .string { throw fail(t, key, type, i, "\(shown(t, i)) is not an ISO 8601 date-time with a zone (2024-03-01T12:00:00Z), nor a number of milliseconds since 1970") }
            throw fail(t, key, type, i, "\(shown(t, i)) \(timestampRefusal(t))")
        }
        return value
    }

    private func bytesValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> Data {
        guard t.kind == .string else { throw fail(t, key, type, i, "must be a base64 string, not \(t.kindName)") }
        guard let data = base64(t) else { throw fail(t, key, type, i, "is not valid base64") }
        return data
    }

    // MARK: - Objects

    private func referenceValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int, zone: RecordZone.ID, context: DecodeContext) throws(FieldError) -> Record.Reference {
        var name = Token.none
        var action = Record.ReferenceAction.none
        var zoneName = Token.none, zoneOwner = Token.none
        var zoneStart = -1
        var zoneFromZoneID = false
        switch t.kind {
        case .string:
            name = t
        case .object:
            _ = try forEachDistinctMember(t, key, type, i) { (k, v) throws(FieldError) -> UInt32 in
                let bit: UInt32
                if stringEquals(k, "recordName") {
                    bit = 1
                    guard v.kind == .string else { throw fail(v, key, type, i, "has a recordName that is \(v.kindName), not a string") }
                    name = v
                } else if stringEquals(k, "action") {
                    bit = 2
                    guard v.kind == .string else { throw fail(v, key, type, i, "has an action that is \(v.kindName), not a string") }
                    // VALIDATE (CloudKit checks the target exists when saving) has no Stratus
                    // equivalent beyond what every save checks, so it reads as .none.
                    if stringEquals(v, "NONE") || stringEquals(v, "VALIDATE") {
                        action = .none
                    } else if stringEquals(v, "DELETE_SELF") {
                        action = .deleteSelf
                    } else {
                        throw fail(v, key, type, i, "has the action '\(quoted(v))'; it must be NONE, DELETE_SELF or VALIDATE")
                    }
                } else if stringEquals(k, "zoneID") || stringEquals(k, "zone") {
                    // CKTool JS names a reference's zone "zone" (CKDBNullableReference), as it
                    // names a record's: it places the reference as a zoneID does, which wins
                    // when both are given; the field's JSON keeps it as it came.
                    let isZoneID = stringEquals(k, "zoneID")
                    bit = isZoneID ? 4 : 8
                    if !isZoneID && v.kind == .null { return bit }
                    guard v.kind == .object else { throw fail(v, key, type, i, "has a \(isZoneID ? "zoneID" : "zone") that is \(v.kindName), not an object") }
                    if !isZoneID && zoneFromZoneID { return bit }
                    zoneFromZoneID = isZoneID
                    zoneStart = v.start
                    zoneName = .none
                    zoneOwner = .none
                    var sub = JSONCursor(base: base, limit: v.end, isComplete: true, pos: v.start)
                    do { try sub.scanZoneID(name: &zoneName, owner: &zoneOwner, in: isZoneID ? "zoneID" : "zone") } catch { throw unreadable(v) }
                    if let problem = sub.problem { throw fail(v, key, type, i, "has a bad \(isZoneID ? "zoneID" : "zone"): \(problem.message)") }
                } else {
                    // Kept with the field's JSON (keepsFieldText); not part of the reference.
                    bit = 0
                }
                return bit
            }
        default:
            throw fail(t, key, type, i, "must be an object with a recordName, not \(t.kindName)")
        }
        guard name.isPresent else { throw fail(t, key, type, i, "has no recordName") }
        let recordName = string(name)
        if !Self.isPlainRecordName(name, base) {
            // Names with a leading `_` too, as a save in Swift takes them: a user's record (`_`
            // and 32 hex digits) is what an author or owner field refers to.
            do { try Naming.checkRecordName(recordName, allowSystemNames: true) } catch { throw fail(name, key, type, i, "names a bad record: \(error.message)") }
        }
        if zoneStart >= 0 {
            let given = try zoneID(name: zoneName, owner: zoneOwner, at: zoneStart, what: zoneFromZoneID ? "zoneID" : "zone")
            // A reference never leaves its record's zone; the same zone spelled with another
            // owner name is still that zone, so the record's zone ID is used. Another zone is
            // kept as the reference's, so that the save refuses it (Record.validateForSave()):
            // for a record that names no zone, the zone it goes into is the importer's choice.
            if given.zoneName != zone.zoneName {
                guard !context.cache.recordZoneIsKnown else {
                    throw fail(t, key, type, i, "points into zone '\(given.zoneName)', but references must stay in the record's zone '\(zone.zoneName)'")
                }
                return Record.Reference(recordID: Record.ID(recordName: recordName, zoneID: given), action: action)
            }
        }
        return Record.Reference(recordID: Record.ID(recordName: recordName, zoneID: zone), action: action)
    }

    private func locationValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int) throws(FieldError) -> Location {
        guard t.kind == .object else { throw fail(t, key, type, i, "must be an object with latitude and longitude, not \(t.kindName)") }
        // Defaults as Location(latitude:longitude:) sets them.
        var latitude = Double.nan, longitude = Double.nan, altitude = 0.0, horizontalAccuracy = 0.0
        var verticalAccuracy = -1.0, course = -1.0, speed = -1.0, when = Date(timeIntervalSinceReferenceDate: 0)
        let seen = try forEachDistinctMember(t, key, type, i) { (k, v) throws(FieldError) -> UInt32 in
            let bit: UInt32
            func number() throws(FieldError) -> Double {
                guard v.kind == .number else { throw fail(v, key, type, i, "has '\(quoted(k))' as \(v.kindName), not a number") }
                guard let d = double(v) else { throw fail(v, key, type, i, "has '\(quoted(k))' \(numberText(v)), which is too large") }
                if d == 0, !spellsZero(v) { throw fail(v, key, type, i, "has '\(quoted(k))' \(numberText(v)), which is too small for a double: it would be stored as 0") }
                return d
            }
            if stringEquals(k, "latitude") { bit = 1; latitude = try number() }
            else if stringEquals(k, "longitude") { bit = 2; longitude = try number() }
            else if stringEquals(k, "altitude") { bit = 4; altitude = try number() }
            else if stringEquals(k, "horizontalAccuracy") { bit = 8; horizontalAccuracy = try number() }
            else if stringEquals(k, "verticalAccuracy") { bit = 16; verticalAccuracy = try number() }
            else if stringEquals(k, "course") { bit = 32; course = try number() }
            else if stringEquals(k, "speed") { bit = 64; speed = try number() }
            else if stringEquals(k, "timestamp") {
                bit = 128
                guard v.kind == .number || v.kind == .string else { throw fail(v, key, type, i, "has a timestamp that is \(v.kindName), not a number or an ISO 8601 date-time") }
                guard let date = timestamp(v) else {
                    if v.kind == .string { throw fail(v, key, type, i, "has a timestamp '\(quoted(v))' that is not an ISO 8601 date-time with a zone") }
                    throw fail(v, key, type, i, "has a timestamp \(numberText(v)) that \(timestampRefusal(v))")
                }
                when = date
            } else {
                // Kept with the field's JSON (keepsFieldText).
                bit = 0
            }
            return bit
        }
        guard seen & 3 == 3 else { throw fail(t, key, type, i, "needs both latitude and longitude") }
        return Location(latitude: latitude, longitude: longitude, altitude: altitude, horizontalAccuracy: horizontalAccuracy,
                        verticalAccuracy: verticalAccuracy, course: course, speed: speed, timestamp: when)
    }

    private func assetValue(_ t: Token, _ key: String, _ type: FieldType, _ i: Int, context: DecodeContext) throws(FieldError) -> Asset {
        var location = Token.none
        var size: Int64?
        var texts: [String: String] = [:]
        var others: [String: String] = [:]
        var urlSpelling: String?
        switch t.kind {
        case .string:
            location = t
        case .object:
            _ = try forEachDistinctMember(t, key, type, i) { (k, v) throws(FieldError) -> UInt32 in
                let name = string(k)
                switch name {
                case "downloadURL", "downloadUrl", "fileChecksum", "referenceChecksum", "wrappingKey", "receipt":
                    // CKTool JS's asset (CKDBAsset) spells the URL downloadUrl.
                    let member = name == "downloadUrl" ? "downloadURL" : name
                    if member == "downloadURL", urlSpelling != nil {
                        throw fail(k, key, type, i, "has both downloadURL and downloadUrl (CKTool JS's spelling of it); give one")
                    }
                    switch v.kind {
                    case .string:
                        if member == "downloadURL" { location = v } else { texts[name] = string(v) }
                    case .null:
                        others[name] = "null"
                    default:
                        throw fail(v, key, type, i, "has a \(name) that is \(v.kindName), not a string")
                    }
                    if member == "downloadURL" { urlSpelling = name }
                    return 1 << UInt32(["downloadURL", "fileChecksum", "referenceChecksum", "wrappingKey", "receipt"].firstIndex(of: member)!)
                case AssetExportFolder.contentFileMember:
                    // Stratus's own: where its export put the content of a CloudKit asset that has
                    // no fileChecksum to name it by. It means something only with the folder.
                    guard v.kind == .string else { throw fail(v, key, type, i, "has a \(name) that is \(v.kindName), not a string") }
                    let file = string(v)
                    // Only a digest names a file there: another name (a path) is refused, not
                    // dropped unseen.
                    guard SHA256Hasher.Digest.isHexadecimal(file) else {
                        throw fail(v, key, type, i, "has a \(name) '\(file)', which names no content file: the export writes the 64 hexadecimal digits of the content's SHA-256 there")
                    }
                    texts[name] = file
                    return 1 << 6
                case "size":
                    guard v.kind == .number else { throw fail(v, key, type, i, "has 'size' as \(v.kindName), not a number") }
                    guard case .value(let bytes) = integer(v), bytes >= 0 else {
                        throw fail(v, key, type, i, "has a size that is not a whole number of bytes (0 or more)")
                    }
                    size = bytes
                    return 1 << 5
                default:
                    // Other members of CloudKit's asset dictionary go back as they came.
                    others[name] = compactText(v)
                    return 0
                }
            }
        default:
            throw fail(t, key, type, i, "must be an object with a downloadURL, or a file path, not \(t.kindName)")
        }
        var metadata = Asset(downloadURL: nil, fileChecksum: texts["fileChecksum"], size: size, referenceChecksum: texts["referenceChecksum"],
                             wrappingKey: texts["wrappingKey"], receipt: texts["receipt"], otherMembers: others)
        if !location.isPresent {
            guard metadata.hasCloudKitMetadata else { throw fail(t, key, type, i, "has no downloadURL (a file path or CloudKit's URL) and no fileChecksum, receipt or other member of CloudKit's asset, so it names no content") }
        }
        let text = location.isPresent ? string(location) : nil
        // Where a refusal points: the URL, or the asset of a records/modify answer, which has none.
        let at = location.isPresent ? location : t
        if let remote = text.flatMap({ Self.isRemoteURL($0) ? $0 : nil }) {
            metadata = metadata.replacingMetadata({ var described = metadata.cloudKitMetadata; described.downloadURL = remote; return described }())
        }
        if text == nil || metadata.downloadURL != nil {
            // CloudKit's copy: kept as a reference with its metadata. Its content in the asset
            // folder is read from there: named by its checksum (downloaded from CloudKit, or
            // attached), else by the member Stratus's export writes for an asset that has no
            // checksum.
            let names = [(metadata.fileChecksum.flatMap(AssetAttacher.checksumFileName), "fileChecksum"),
                         (texts[AssetExportFolder.contentFileMember], AssetExportFolder.contentFileMember)]
            // Looked at without following links: a link is the confined open's to follow or
            // refuse, so that nothing here reads (or tells the size of) a file outside the folder.
            func present(_ name: String, in directory: URL) -> Bool {
                var info = stat()
                return lstat(directory.appendingPathComponent(name).path, &info) == 0
            }
            if let directory = context.assetDirectory,
               let (name, member) = names.lazy.compactMap({ name, member in name.map { ($0, member) } }).first(where: { present($0.0, in: directory) }) {
                // CloudKit's size is the content's: a file of another size is another content.
                // A link is looked through only where links are followed and it stays inside.
                var info = stat()
                let candidate = directory.appendingPathComponent(name).path
                let looked = context.followsAssetSymlinks && Self.staysInside(candidate, directory) ? stat(candidate, &info) : lstat(candidate, &info)
                if let size, looked == 0, info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) != size {
                    throw fail(at, key, type, i, "names by its \(member) the file '\(name)' in the assets folder \(directory.path), which has \(info.st_size) bytes where the asset's size says \(size): another content")
                }
                // A file named by the member Stratus's export writes is named by its SHA-256.
                return Asset(path: name, in: directory, followsSymlinks: context.followsAssetSymlinks, expectedDigest: member == AssetExportFolder.contentFileMember ? name : nil)
                    .withMetadata(of: metadata, size: size)
            }
            if let directory = context.assetDirectory {
                // Stratus's export names the file it wrote: its absence is lost content, not an
                // asset whose content was never downloaded.
                if let name = names[1].0 {
                    throw fail(at, key, type, i, "names by its \(AssetExportFolder.contentFileMember) the file '\(name)', which is not in the assets folder \(directory.path): the export wrote the asset's content there, and it is missing; put the file back, or import without the folder to keep CloudKit's metadata alone")
                }
                context.cache.cloudKitAssetsWithoutContent += 1
            }
            return metadata
        }
        let source: Asset
        // A size beside a file named like a digest is what Stratus's exports write: the name
        // is then the content's SHA-256, checked as the content is read.
        switch Self.localAsset(text!, quoted: quoted(location), context: context, namesDigest: size != nil) {
        case .success(let asset): source = asset
        case .failure(let refusal): throw fail(location, key, type, i, refusal.message)
        }
        // A local file's own size counts; other CloudKit metadata stays with it.
        return source.withMetadata(of: metadata, size: nil)
    }

    /// Why an asset's local path is not read.
    struct AssetPathRefusal: Error {
        let message: String
    }

    /// The asset file a local path (or `file:` URL) in the input names, as the read options
    /// allow: inside the asset folder only (relative, no `..`, links as the options say), or,
    /// without a folder, anywhere only when the caller chose so. Both readers, JSON and CSV,
    /// ask here, so that no input format reaches files the other would refuse.
    ///
    /// - Parameter namesDigest: whether a file named like a SHA-256 (64 lowercase hexadecimal
    ///   digits) is named by its content's digest, which reading it then checks.
    static func localAsset(_ text: String, quoted: String, context: DecodeContext, namesDigest: Bool = false) -> Result<Asset, AssetPathRefusal> {
        let path = localPath(text)
        if let path, path.hasPrefix("/") || context.assetDirectory != nil, path.split(separator: "/").contains("..") {
            let folder = context.assetDirectory.map { " \($0.path)" } ?? ""
            return .failure(AssetPathRefusal(message: "names the file '\(path)' with a '..' component; asset paths stay inside the assets folder\(folder)"))
        }
        if let path, path.hasPrefix("/") {
            // An export without an asset folder names the store's own files by absolute paths:
            // read where the path lies in a folder the user (or the store) vouches for, never
            // where the input alone says.
            if let directory = context.assetDirectory, let inside = relativePath(path, inside: directory) {
                return .success(confinedAsset(inside.path, in: inside.folder, followsSymlinks: context.followsAssetSymlinks, namesDigest: namesDigest))
            }
            if let directory = context.storeContentDirectory, let inside = relativePath(path, inside: directory) {
                // The store's own content files are named by their digests, always.
                return .success(confinedAsset(inside.path, in: inside.folder, followsSymlinks: false, namesDigest: true))
            }
            if context.assetDirectory != nil || context.assetPaths != .anywhere {
                let given = context.assetDirectory.map { "outside the assets folder \($0.path)" } ?? "outside the store's own asset folder"
                // The path is the input's word: the advice names its folder only when that is a
                // Stratus store's content folder (a plain export of another store), never one of
                // the input's choosing (`/etc`) for the user to open.
                let folder = (path as NSString).deletingLastPathComponent
                // `<store>.sqlite.assets/sha256`, or a PostgreSQL engine's `stratus-assets-…/sha256`.
                let parent = ((folder as NSString).deletingLastPathComponent as NSString).lastPathComponent
                let storeContent = (folder as NSString).lastPathComponent == "sha256" && (parent.hasSuffix(".assets") || parent.hasPrefix("stratus-assets-"))
                let advice = storeContent ? "to read this store's files, import with --assets-dir \(folder)" : "if the input is yours and its asset files are meant to be read, give --assets-dir the folder that holds them"
                return .failure(AssetPathRefusal(message: "names the file '\(path)' by an absolute path \(given); asset files are read only inside the folder named with --assets-dir (in Swift, RecordReadOptions.assetDirectory): \(advice)"))
            }
        }
        if let directory = context.assetDirectory {
            guard let path else {
                return .failure(AssetPathRefusal(message: "has the downloadURL '\(quoted)', which is neither a path nor an https URL"))
            }
            return .success(confinedAsset(path, in: directory, followsSymlinks: context.followsAssetSymlinks, namesDigest: namesDigest))
        }
        guard case .anywhere = context.assetPaths else {
            return .failure(AssetPathRefusal(message: "names the file '\(quoted)'; name the folder asset files are read from with --assets-dir (in Swift, RecordReadOptions.assetDirectory): paths in the input are relative to it"))
        }
        guard let url = assetFileURL(text) else {
            return .failure(AssetPathRefusal(message: "has the downloadURL '\(quoted)', which is not a local file"))
        }
        return .success(Asset(fileURL: url))
    }

    /// The asset of the file at `path` in `folder`. With `namesDigest`, a file named like a
    /// SHA-256 (64 lowercase hexadecimal digits), as Stratus's exports and stores name content,
    /// must hold the content of that digest: a changed or truncated backup is refused, not stored.
    static func confinedAsset(_ path: String, in folder: URL, followsSymlinks: Bool, namesDigest: Bool) -> Asset {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return Asset(path: path, in: folder, followsSymlinks: followsSymlinks, expectedDigest: namesDigest && SHA256Hasher.Digest.isHexadecimal(name) ? name : nil)
    }

    /// The part of the absolute `path` below `folder` (as given, or with its links resolved)
    /// and that folder; `nil` when the path does not lie in it. Only the folder's own path is
    /// resolved: what lies below it is opened confined, so a link there is not followed out.
    static func relativePath(_ path: String, inside folder: URL) -> (path: String, folder: URL)? {
        var roots = [(folder.standardizedFileURL.path, folder)]
        if let resolved = realpath(folder.path, nil) {
            let root = String(cString: resolved)
            free(resolved)
            roots.append((root, URL(fileURLWithPath: root, isDirectory: true)))
        }
        for (root, url) in roots {
            let prefix = root.hasSuffix("/") ? root : root + "/"
            guard path.hasPrefix(prefix), path.count > prefix.count else { continue }
            return (String(path.dropFirst(prefix.count)), url)
        }
        return nil
    }

    /// Whether `path`, its links resolved, is inside `folder` (its links resolved too).
    static func staysInside(_ path: String, _ folder: URL) -> Bool {
        guard let resolved = realpath(path, nil), let base = realpath(folder.path, nil) else { return false }
        defer { free(resolved); free(base) }
        let file = String(cString: resolved), root = String(cString: base)
        return file.hasPrefix(root.hasSuffix("/") ? root : root + "/")
    }

    /// Whether an asset's `downloadURL` names a remote copy (CloudKit's `https` URLs).
    static func isRemoteURL(_ text: String) -> Bool {
        guard let scheme = text.range(of: "://") else { return false }
        return !text[..<scheme.lowerBound].lowercased().hasPrefix("file")
    }

    /// The local path a `downloadURL` names: a `file:` URL's path or the text itself.
    static func localPath(_ text: String) -> String? {
        if text.isEmpty { return nil }
        // A URL's scheme is case-insensitive (RFC 3986): FILE:/// is a file: URL too.
        if text.utf8.count >= 5, text.prefix(5).lowercased() == "file:" {
            guard let url = URL(string: "file:" + text.dropFirst(5)), url.isFileURL, !url.path.isEmpty else { return nil }
            return url.path
        }
        return text.contains("://") ? nil : text
    }

    /// A file URL for a `file:` URL or a path (relative ones against the current directory);
    /// nil for anything else, such as CloudKit's `https` download URLs, which Stratus does not
    /// fetch. Paths inside an asset folder are ``Stratus/Asset/init(path:in:followsSymlinks:)``'s.
    static func assetFileURL(_ text: String) -> URL? {
        guard let path = localPath(text) else { return nil }
        if path.hasPrefix("/") { return URL(fileURLWithPath: path) }
        let base = FileManager.default.currentDirectoryPath
        return URL(fileURLWithPath: base.hasSuffix("/") ? base + path : base + "/" + path)
    }

    // MARK: - Inference

    /// The type of an untyped value: string → STRING, integer or boolean → INT64, number with
    /// a fraction or exponent → DOUBLE, object with recordName → REFERENCE, with latitude →
    /// LOCATION, with downloadURL → ASSETID, array → the list of its elements' type (INT64
    /// and DOUBLE mixed → DOUBLE_LIST, empty → STRING_LIST). Nil for `null`.
    func inferredType(_ token: Token, key: String) throws(FieldError) -> FieldType? {
        switch token.kind {
        case .null:
            return nil
        case .array:
            var element: FieldType?
            try forEachElement(token, key, .stringList) { (i, t) throws(FieldError) in
                guard t.kind != .array && t.kind != .null, let type = try inferredType(t, key: key) else {
                    throw FieldError(offset: t.start, message: "field '\(key)': element \(i + 1) is \(t.kindName); a list holds values of one type")
                }
                switch (element, type) {
                case (nil, _): element = type
                case (let e?, _) where e == type: break
                case (.int64?, .double), (.double?, .int64): element = .double
                case (let e?, _):
                    throw FieldError(offset: t.start, message: "field '\(key)': element \(i + 1) is \(type.rawValue) but earlier ones are \(e.rawValue); give the field a type")
                }
            }
            return (element ?? .string).listType
        case .object:
            var found: FieldType?
            try forEachMember(token) { (k, _) throws(FieldError) in
                if found != nil { return }
                if stringEquals(k, "recordName") { found = .reference }
                else if stringEquals(k, "latitude") { found = .location }
                else if stringEquals(k, "downloadURL") || stringEquals(k, "downloadUrl") { found = .asset }
            }
            guard let found else {
                throw FieldError(offset: token.start, message: "field '\(key)': cannot tell the type of an object without recordName, latitude or downloadURL; give the field a type")
            }
            return found
        default:
            return try scalarType(token, key: key)
        }
    }

    private func scalarType(_ token: Token, key: String) throws(FieldError) -> FieldType {
        switch token.kind {
        case .string: return .string
        case .number: return token.flags & Token.isInteger != 0 ? .int64 : .double
        case .trueLiteral, .falseLiteral: return .int64
        default: throw FieldError(offset: token.start, message: "field '\(key)': cannot tell the type of \(token.kindName)")
        }
    }

    // MARK: - Walking validated containers

    private func unreadable(_ token: Token) -> FieldError {
        FieldError(offset: token.start, message: "a value could not be read again")
    }

    /// Calls `body` for each member of an object that ``skipContainer()`` already checked.
    func forEachMember(_ token: Token, _ body: (Token, Token) throws(FieldError) -> Void) throws(FieldError) {
        var sub = JSONCursor(base: base, limit: token.end, isComplete: true, pos: token.start)
        guard let nonEmpty = try? sub.openObject() else { throw unreadable(token) }
        if !nonEmpty { return }
        while true {
            guard let key = try? sub.scanKey(), let value = try? sub.scanValue() else { throw unreadable(token) }
            try body(key, value)
            guard let more = try? sub.nextMember(close: UInt8(ascii: "}"), in: "an object") else { throw unreadable(token) }
            if !more { return }
        }
    }

    /// Calls `body` for each member of an object value; `body` checks the value and answers the
    /// bit that stands for its key, and a key seen before is then an error. Answers the bits seen.
    private func forEachDistinctMember(
        _ t: Token, _ key: String, _ type: FieldType, _ i: Int, _ body: (Token, Token) throws(FieldError) -> UInt32
    ) throws(FieldError) -> UInt32 {
        var seen: UInt32 = 0
        try forEachMember(t) { (k, v) throws(FieldError) in
            let bit = try body(k, v)
            if seen & bit != 0 { throw fail(k, key, type, i, "has the key '\(quoted(k))' twice") }
            seen |= bit
        }
        return seen
    }

    /// Calls `body` with the index and token of each element of a checked array.
    private func forEachElement(_ token: Token, _ key: String, _ type: FieldType, _ body: (Int, Token) throws(FieldError) -> Void) throws(FieldError) {
        guard token.kind == .array else {
            throw FieldError(offset: token.start, message: "field '\(key)': \(type.rawValue) value must be an array, not \(token.kindName)")
        }
        var sub = JSONCursor(base: base, limit: token.end, isComplete: true, pos: token.start + 1)
        guard let first = try? sub.peek() else { throw unreadable(token) }
        if first == UInt8(ascii: "]") { return }
        var index = 0
        while true {
            guard let element = try? sub.scanValue() else { throw unreadable(token) }
            try body(index, element)
            index += 1
            guard let more = try? sub.nextMember(close: UInt8(ascii: "]"), in: "an array") else { throw unreadable(token) }
            if !more { return }
        }
    }
}
