import Foundation

/// The stored form of a record's field values: one JSON object per record, every value a
/// tagged array, so that types round-trip exactly and stores can still query inside it.
///
/// `["S","text"]`, `["I",2]`, `["F",2.0]`, `["D",<seconds since 2001>]`, `["B","<base64>"]`,
/// `["R","<recordName>",<action>]`, `["L",lat,lon,alt,hAcc,vAcc,course,speed,<timestamp>]`,
/// `["A","<content SHA-256>",<size>]` (with a fourth element, an object of CloudKit's metadata,
/// when the asset has some: `{"downloadURL":…,"fileChecksum":…,"referenceChecksum":…,
/// "wrappingKey":…,"receipt":…,"other":{"key":"<JSON text>"},"noSize":true}`; an asset without
/// stored content has the identifier `""`); a string whose case folding (``QueryRules/equalityKey(_:)``)
/// is not its ASCII lowercasing carries it at index 2 (`["S","ÉCOLE","école"]`,
/// `["S","Straße","strasse"]`; `["S","Milk"]` carries none, as lowercasing A–Z gives `milk`); lists carry a list tag and the element values at index 1
/// (`["SL",["a","b"]]`), with reference actions and asset sizes in a parallel array at index 2
/// (and assets' metadata, or `null`, in one at index 3 when any has some).
/// What a record's CloudKit JSON held beyond the model (``Record/JSONExtras``) is the member
/// `~json`: `{"m":{…},"z":{…},"o":"…","c":{…},"d":{…},"a":[…],"f":{…}}`, JSON texts as strings.
/// Element 1 is always what a query compares, so `$.key[1]` is the value of `key` in SQL.
///
/// Engines share this codec so that every store keeps the same logical schema.
///
/// ```swift
/// let text = FieldDocument.encode(["title": .string("Milk")])   // {"title":["S","Milk"]}
/// let fields = try FieldDocument.decode(text, zoneID: .default, assetURL: { _ in nil })
/// ```
@_spi(StratusEngine)
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
    /// The member holding a record's ``Record/JSONExtras``.
    public static let jsonExtrasMember = "~json"

    /// Encodes field values and which of them are encrypted values.
    /// Assets must carry a `storedIdentifier` (engines store the bytes first).
    public static func encode(_ fields: [String: FieldValue], encryptedKeys: Set<String>, jsonExtras: Record.JSONExtras = Record.JSONExtras()) -> String {
        var out = ByteOutput()
        encode(fields, encryptedKeys: encryptedKeys, jsonExtras: jsonExtras, into: &out)
        return String(decoding: out.bytes, as: UTF8.self)
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
        var output = ByteOutput()
        encode(fields, encryptedKeys: encryptedKeys, into: &output)
        out.removeAll(keepingCapacity: true)
        out.append(contentsOf: output.bytes)
    }

    /// The document as a new byte array (what a record caches).
    package static func encodedBytes(_ fields: [String: FieldValue], encryptedKeys: Set<String>, jsonExtras: Record.JSONExtras = Record.JSONExtras()) -> [UInt8] {
        var out = ByteOutput()
        encode(fields, encryptedKeys: encryptedKeys, jsonExtras: jsonExtras, into: &out)
        return Array(out.bytes)
    }

    /// Appends the document to `out`.
    package static func encode(_ fields: [String: FieldValue], encryptedKeys: Set<String>, jsonExtras: Record.JSONExtras = Record.JSONExtras(), into out: inout ByteOutput) {
        out.append(UInt8(ascii: "{"))
        // Keys in order, so that equal field sets store identical documents.
        out.appendInKeyOrder(fields, separator: UInt8(ascii: ",")) { key, value, out in
            out.appendString(key)
            out.append(UInt8(ascii: ":"))
            appendValue(value, to: &out)
        }
        if !encryptedKeys.isEmpty {
            if !fields.isEmpty { out.append(UInt8(ascii: ",")) }
            out.appendString(encryptedKeysMember)
            out.append(UInt8(ascii: ":"))
            appendArray(encryptedKeys.sorted(), to: &out) { $1.appendString($0) }
        }
        if !jsonExtras.isEmpty {
            if !fields.isEmpty || !encryptedKeys.isEmpty { out.append(UInt8(ascii: ",")) }
            out.appendString(jsonExtrasMember)
            out.append(UInt8(ascii: ":"))
            appendExtras(jsonExtras, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// `{"m":{…},"z":{…},"o":"…","c":{…},"d":{…},"a":[…],"f":{…}}`, empty parts left out.
    private static func appendExtras(_ extras: Record.JSONExtras, to out: inout ByteOutput) {
        var first = true
        func key(_ name: StaticString, _ out: inout ByteOutput) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(name)
            out.append("\":")
        }
        func texts(_ name: StaticString, _ members: [String: String], _ out: inout ByteOutput) {
            guard !members.isEmpty else { return }
            key(name, &out)
            appendTexts(members, to: &out)
        }
        out.append(UInt8(ascii: "{"))
        texts("m", extras.members, &out)
        texts("z", extras.zoneIDMembers, &out)
        if let owner = extras.ownerRecordName {
            key("o", &out)
            out.appendString(owner)
        }
        texts("c", extras.createdMembers, &out)
        texts("d", extras.modifiedMembers, &out)
        if !extras.absentKeys.isEmpty {
            key("a", &out)
            appendArray(extras.absentKeys.sorted(), to: &out) { $1.appendString($0) }
        }
        texts("f", extras.fields, &out)
        out.append(UInt8(ascii: "}"))
    }

    /// An object of strings, in key order.
    static func appendTexts(_ members: [String: String], to out: inout ByteOutput) {
        out.append(UInt8(ascii: "{"))
        out.appendInKeyOrder(members, separator: UInt8(ascii: ",")) { key, text, out in
            out.appendString(key)
            out.append(UInt8(ascii: ":"))
            out.appendString(text)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// An asset's CloudKit metadata, or nothing when it has none and a size.
    private static func appendAssetMetadata(_ a: Asset, to out: inout ByteOutput) -> Bool {
        guard a.hasCloudKitMetadata || a.size == nil else { return false }
        var first = true
        func member(_ name: StaticString, _ value: String?, _ out: inout ByteOutput) {
            guard let value else { return }
            out.append(first ? "{\"" : ",\"")
            first = false
            out.append(name)
            out.append("\":")
            out.appendString(value)
        }
        member("downloadURL", a.downloadURL, &out)
        member("fileChecksum", a.fileChecksum, &out)
        member("referenceChecksum", a.referenceChecksum, &out)
        member("wrappingKey", a.wrappingKey, &out)
        member("receipt", a.receipt, &out)
        if !a.otherMembers.isEmpty {
            out.append(first ? "{\"other\":" : ",\"other\":")
            first = false
            appendTexts(a.otherMembers, to: &out)
        }
        if a.size == nil {
            out.append(first ? "{\"noSize\":true" : ",\"noSize\":true")
            first = false
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    static func appendValue(_ value: FieldValue, to out: inout ByteOutput) {
        switch value {
        case .string(let s):
            out.append("[\"S\",")
            out.appendString(s)
            // Equality ignores case; the folded form is kept where ASCII lowercasing cannot
            // make it, so that an index can serve case-insensitive equality.
            appendEqualityKey(of: s, to: &out)
        case .int64(let i): out.append("[\"I\","); out.appendInt(i)
        case .double(let d): out.append("[\"F\","); appendDouble(d, to: &out)
        case .date(let d): out.append("[\"D\","); appendDouble(d.timeIntervalSinceReferenceDate, to: &out)
        case .bytes(let b): out.append("[\"B\","); out.appendBase64(b)
        case .reference(let r):
            out.append("[\"R\",")
            out.appendString(r.recordID.recordName)
            out.append(UInt8(ascii: ","))
            out.appendInt(Int64(r.action.rawValue))
        case .location(let l): out.append("[\"L\","); appendLocationBody(l, to: &out)
        case .asset(let a):
            out.append("[\"A\",")
            out.appendString(a.storedIdentifier ?? "")
            out.append(UInt8(ascii: ","))
            out.appendInt(a.size ?? 0)
            let mark = out.count
            out.append(UInt8(ascii: ","))
            if !appendAssetMetadata(a, to: &out) { out.removeAll(from: mark) }
        case .stringList(let v): out.append("[\"SL\","); appendArray(v, to: &out) { $1.appendString($0) }
        case .int64List(let v): out.append("[\"IL\","); appendArray(v, to: &out) { $1.appendInt($0) }
        case .doubleList(let v): out.append("[\"FL\","); appendArray(v, to: &out) { appendDouble($0, to: &$1) }
        case .dateList(let v): out.append("[\"DL\","); appendArray(v, to: &out) { appendDouble($0.timeIntervalSinceReferenceDate, to: &$1) }
        case .bytesList(let v): out.append("[\"BL\","); appendArray(v, to: &out) { $1.appendBase64($0) }
        case .referenceList(let v):
            out.append("[\"RL\",")
            appendArray(v, to: &out) { $1.appendString($0.recordID.recordName) }
            out.append(UInt8(ascii: ","))
            appendArray(v, to: &out) { $1.appendInt(Int64($0.action.rawValue)) }
        case .locationList(let v):
            out.append("[\"LL\",")
            appendArray(v, to: &out) { location, out in
                out.append(UInt8(ascii: "["))
                appendLocationBody(location, to: &out)
                out.append(UInt8(ascii: "]"))
            }
        case .assetList(let v):
            out.append("[\"AL\",")
            appendArray(v, to: &out) { $1.appendString($0.storedIdentifier ?? "") }
            out.append(UInt8(ascii: ","))
            appendArray(v, to: &out) { $1.appendInt($0.size ?? 0) }
            if v.contains(where: { $0.hasCloudKitMetadata || $0.size == nil }) {
                out.append(UInt8(ascii: ","))
                appendArray(v, to: &out) { asset, out in if !appendAssetMetadata(asset, to: &out) { out.append("null") } }
            }
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Appends `,"<folded>"` when the string's equality key differs from its ASCII lowercasing
    /// (``QueryRules/foldedFormToStore(_:)``). Engines compare `coalesce($.key[2],
    /// <ASCII-lowercase of $.key[1]>)`, so ASCII text, by far the most common, carries no
    /// second copy; text with other letters that fold carries its folded form.
    private static func appendEqualityKey(of s: String, to out: inout ByteOutput) {
        guard let key = QueryRules.foldedFormToStore(s) else { return }
        out.append(UInt8(ascii: ","))
        out.appendString(key)
    }

    private static func appendLocationBody(_ l: Location, to out: inout ByteOutput) {
        for (i, d) in [l.latitude, l.longitude, l.altitude, l.horizontalAccuracy, l.verticalAccuracy, l.course, l.speed, l.timestamp.timeIntervalSinceReferenceDate].enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendDouble(d, to: &out)
        }
    }

    /// The shortest text that parses back to the same Double, as Swift prints it (`2.0`, `1e-05`).
    private static func appendDouble(_ d: Double, to out: inout ByteOutput) {
        precondition(d.isFinite, "JSON cannot hold a non-finite number; validate values first")
        out.appendFiniteDouble(d)
    }

    private static func appendArray<T>(_ values: [T], to out: inout ByteOutput, _ element: (T, inout ByteOutput) -> Void) {
        out.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            element(v, &out)
        }
        out.append(UInt8(ascii: "]"))
    }
}
