import Foundation
import Stratus

/// Writes records in the JSON shape of CloudKit Web Services (`records/query` answers).
///
/// `{"recordName", "recordType", "recordChangeTag", "parent": {"recordName"}, "fields": {"title":
/// {"value": "Milk", "type": "STRING"}}, "created": {"timestamp", "userRecordName"}, "modified":
/// {…}, "zoneID": {"zoneName", "ownerRecordName"}}`. Fields come sorted by key; encrypted values
/// (``Record/encryptedValues``) are `ENCRYPTED_BYTES` for bytes and carry `"isEncrypted": true`
/// otherwise, as CloudKit writes them; `parent` appears when the record has one. Timestamps are
/// milliseconds since 1970, with a decimal fraction when the date is not on a whole
/// millisecond (chosen so that reading gives back the identical `Date`); bytes are base64;
/// references carry a `zoneID` only when it differs from the record's; assets are
/// `{"size", "downloadURL"}` with a `file:` URL, or CloudKit's asset dictionary as it came
/// (`downloadURL`, `fileChecksum`, `size`, `referenceChecksum`, `wrappingKey`, `receipt`).
/// What a record's CloudKit JSON held beyond the model (``Stratus/Record/JSONExtras``) is
/// written back as it came: members such as `pluginFields`, a `zoneType`, `deviceID`s, fields
/// kept whole (an asset field's kept members after its value), and members the input did not
/// have are left out. ``RecordReader`` reads all of it back.
///
/// ```swift
/// print(RecordJSONWriter.json(for: record))   // one NDJSON line
/// ```
public enum RecordJSONWriter {
    /// How records are written beyond their values.
    ///
    /// ```swift
    /// var options = RecordJSONWriter.Options()
    /// options.writesEveryZoneID = true
    /// print(RecordJSONWriter.json(for: record, options: options))
    /// ```
    public struct Options: Sendable {
        /// The `ownerRecordName` written for zones of the current user (`__defaultOwner__` when nil),
        /// so that an export names the user as CloudKit does: by the user's record name.
        public var currentUserRecordName: String?
        /// Where asset content is written beside the JSON (`stratus export --assets-dir`): an
        /// asset with content names its file there.
        public var assetFolder: AssetExportFolder?
        /// Whether every record names its zone, also one that came without a `zoneID` (which is
        /// otherwise written back without one): an export of several zones.
        ///
        /// ```swift
        /// options.writesEveryZoneID = true   // records of all zones in one file
        /// ```
        public var writesEveryZoneID = false
        /// Whether every record's change tag, `created` and `modified` are written as the store
        /// has them, also for a record whose JSON came without them (which is otherwise written
        /// back without them): a backup or mirror that an administrator's import restores needs
        /// the user who made each record, which the store knows and the JSON did not say.
        ///
        /// ```swift
        /// options.writesEverySystemField = true   // stratus export --as-administrator
        /// ```
        public var writesEverySystemField = false

        /// Records as they are, assets by their store files.
        public init() {}
    }

    /// The record as one line of JSON. Values JSON cannot hold (a non-finite number, which a
    /// store never returns) are written as `null`; ``RecordWriter`` refuses them instead.
    public static func json(for record: Record) -> String {
        var out = ByteOutput()
        append(record, options: Options(), to: &out)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// The record as one line of JSON, written with `options`.
    ///
    /// ```swift
    /// var options = RecordJSONWriter.Options()
    /// options.currentUserRecordName = "_2f8a…"
    /// print(RecordJSONWriter.json(for: record, options: options))
    /// ```
    public static func json(for record: Record, options: Options) -> String {
        var out = ByteOutput()
        append(record, options: options, to: &out)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// The record as one line of JSON, written with `options`, refusing what the line cannot
    /// hold rather than writing a stand-in: a non-finite number, or an asset whose content
    /// cannot be written into ``Options/assetFolder`` (`stratus changes --assets-dir`).
    ///
    /// ```swift
    /// var options = RecordJSONWriter.Options()
    /// options.assetFolder = try AssetExportFolder(directory: URL(fileURLWithPath: "assets"))
    /// let line = try RecordJSONWriter.checkedJSON(for: record, options: options)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the record and the field, as
    ///   ``RecordWriter/write(_:)`` does.
    public static func checkedJSON(for record: Record, options: Options) throws -> String {
        var out = ByteOutput()
        append(record, options: options, to: &out)
        // The asset folder could not be written: the output failed, not the record.
        if let failure = options.assetFolder?.takeFailure(writing: record) { throw failure }
        if let problem = out.problem {
            throw StratusError(.invalidArguments, "record '\(record.recordID.recordName)': \(problem)", recordID: record.recordID)
        }
        return String(decoding: out.bytes, as: UTF8.self)
    }

    static func append(_ record: Record, options: Options, to out: inout ByteOutput) {
        let zoneID = record.recordID.zoneID
        out.append("{\"recordName\":")
        out.appendString(record.recordID.recordName)
        out.append(",\"recordType\":")
        out.appendString(record.recordType)
        let (system, fields, encrypted, parent, extras) = record.contents
        let absent = options.writesEverySystemField && !extras.absentKeys.isEmpty ? extras.absentKeys.subtracting(Self.systemMembers) : extras.absentKeys
        if let tag = system.recordChangeTag, absent.isEmpty || !absent.contains("recordChangeTag") {
            out.append(",\"recordChangeTag\":")
            out.appendString(tag)
        }
        if let parent, extras.members["parent"] == nil {
            out.append(",\"parent\":")
            appendReference(parent, zone: zoneID, withAction: false, to: &out)
        }
        if !fields.isEmpty || absent.isEmpty || !absent.contains("fields") {
            out.append(",\"fields\":{")
            if !extras.fields.isEmpty || options.assetFolder != nil
                || !appendFieldsInLastOrder(fields, encrypted: encrypted, zone: zoneID, to: &out) {
                let order = fields.keys.sorted()
                for (place, key) in order.enumerated() {
                    if place > 0 { out.append(UInt8(ascii: ",")) }
                    if let kept = extras.fields[key] {
                        out.appendString(key)
                        out.append(UInt8(ascii: ":"))
                        if let value = fields[key], value.isAsset {
                            appendAssetField(value, template: kept, field: key, zone: zoneID, options: options, to: &out)
                        } else {
                            out.appendRaw(kept)
                        }
                    } else {
                        appendField(key, fields[key]!, encrypted: encrypted, zone: zoneID, options: options, to: &out)
                    }
                }
                out.fieldOrder = order
            }
            out.append(UInt8(ascii: "}"))
        }
        appendAuthorship("created", system.creationDate, system.creatorUserRecordID, others: extras.createdMembers, absent: absent, to: &out)
        appendAuthorship("modified", system.modificationDate, system.lastModifiedUserRecordID, others: extras.modifiedMembers, absent: absent, to: &out)
        if absent.isEmpty || !absent.contains("zoneID") || options.writesEveryZoneID {
            out.append(",\"zoneID\":{\"zoneName\":")
            out.appendString(zoneID.zoneName)
            if absent.isEmpty || !absent.contains("zoneID.ownerRecordName") {
                out.append(",\"ownerRecordName\":")
                out.appendString(extras.ownerRecordName ?? ownerRecordName(of: zoneID, options: options))
            }
            appendMembers(extras.zoneIDMembers, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        appendMembers(extras.members, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The `ownerRecordName` written for `zoneID`: the current user's record name for the
    /// current user's zones (``Options/currentUserRecordName``), else the zone's owner.
    static func ownerRecordName(of zoneID: RecordZone.ID, options: Options) -> String {
        (zoneID.ownerName == RecordZone.ID.currentUserDefaultOwner ? options.currentUserRecordName : nil) ?? zoneID.ownerName
    }

    /// Appends `,"key":<JSON text>` for each member, in key order.
    private static func appendMembers(_ members: [String: String], to out: inout ByteOutput) {
        guard !members.isEmpty else { return }
        for key in members.keys.sorted() {
            out.append(UInt8(ascii: ","))
            out.appendString(key)
            out.append(UInt8(ascii: ":"))
            out.appendRaw(members[key]!)
        }
    }

    static func appendField(_ key: String, _ value: FieldValue, encrypted: Set<String>, zone: RecordZone.ID, options: Options = Options(), to out: inout ByteOutput) {
        out.appendString(key)
        out.append(":{\"value\":")
        if let folder = options.assetFolder, value.isAsset {
            appendValue(value, field: key, zone: zone, assetFolder: folder, to: &out)
        } else {
            appendValue(value, field: key, zone: zone, to: &out)
        }
        if encrypted.isEmpty || !encrypted.contains(key) {
            out.append(",\"type\":\"")
            out.appendRaw(value.type.rawValue)
            out.append("\"}")
        } else if case .bytes = value {
            out.append(",\"type\":\"ENCRYPTED_BYTES\"}")
        } else {
            out.append(",\"type\":\"")
            out.appendRaw(value.type.rawValue)
            out.append("\",\"isEncrypted\":true}")
        }
    }

    /// An asset field whose other members were kept (``JSONCursor/assetFieldTemplate``: no
    /// type, `ASSET`, `isEncrypted`, other keys): `{"value": …}` from the asset, then those
    /// members as they came.
    private static func appendAssetField(_ value: FieldValue, template: String, field: String, zone: RecordZone.ID, options: Options, to out: inout ByteOutput) {
        out.append("{\"value\":")
        if let folder = options.assetFolder {
            appendValue(value, field: field, zone: zone, assetFolder: folder, to: &out)
        } else {
            appendValue(value, field: field, zone: zone, to: &out)
        }
        let members = template.utf8.dropFirst()
        if members.first != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
        for byte in members { out.append(byte) }
    }

    /// Writes the fields in key order when they have the keys of the record written before
    /// (``ByteOutput/fieldOrder``), as records of one type mostly do: each field as the
    /// dictionary yields it, then the pieces moved into order. That costs less than sorting the
    /// keys and looking each one up again. False, with nothing written, for other keys, and
    /// when a field has a problem (problems are reported for the first field in key order).
    private static func appendFieldsInLastOrder(_ fields: [String: FieldValue], encrypted: Set<String>, zone: RecordZone.ID, to out: inout ByteOutput) -> Bool {
        let count = fields.count
        guard count > 0 && count == out.fieldOrder.count else { return false }
        let start = out.count
        let problem = out.problem
        var order: [String] = []
        swap(&order, &out.fieldOrder)
        let written = withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: count) { pieces -> Bool in
            for (key, value) in fields {
                // Keys are unique, so a place for each key is a place for every key.
                guard let place = order.firstIndex(of: key) else { return false }
                let pieceStart = out.count
                appendField(key, value, encrypted: encrypted, zone: zone, to: &out)
                (pieces.baseAddress! + place).initialize(to: pieceStart..<out.count)
            }
            guard out.problem == problem else { return false }
            out.arrange(UnsafeBufferPointer(pieces), after: start, separator: UInt8(ascii: ","))
            return true
        }
        swap(&order, &out.fieldOrder)
        if !written {
            out.removeAll(from: start)
            out.problem = problem
        }
        return written
    }

    /// The members that say a record's system fields, with their parts.
    private static let systemMembers: Set<String> = [
        "recordChangeTag", "created", "created.timestamp", "created.userRecordName", "modified", "modified.timestamp", "modified.userRecordName",
    ]

    private static func appendAuthorship(_ name: StaticString, _ date: Date?, _ user: Record.ID?, others: [String: String], absent: Set<String>,
                                         to out: inout ByteOutput) {
        var date = date, user = user
        // The member names are made only for a record that lacked members (rare).
        if !absent.isEmpty {
            let key = name.description
            if absent.contains(key) { return }
            if absent.contains(key + ".timestamp") { date = nil }
            if absent.contains(key + ".userRecordName") { user = nil }
        }
        guard date != nil || user != nil || !others.isEmpty else { return }
        out.append(",\"")
        out.append(name)
        out.append("\":{")
        var first = true
        if let date {
            out.append("\"timestamp\":")
            out.appendTimestamp(date, field: name.description)
            first = false
        }
        if let user {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append("\"userRecordName\":")
            out.appendString(user.recordName)
            first = false
        }
        // Members kept from CloudKit's JSON are rare: no keys are sorted (an array made) for none.
        if !others.isEmpty {
            for member in others.keys.sorted() {
                if !first { out.append(UInt8(ascii: ",")) }
                out.appendString(member)
                out.append(UInt8(ascii: ":"))
                out.appendRaw(others[member]!)
                first = false
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendZoneID(_ zoneID: RecordZone.ID, to out: inout ByteOutput) {
        out.append("{\"zoneName\":")
        out.appendString(zoneID.zoneName)
        out.append(",\"ownerRecordName\":")
        out.appendString(zoneID.ownerName)
        out.append(UInt8(ascii: "}"))
    }

    /// Appends a value as it appears under `"value"`.
    static func appendValue(_ value: FieldValue, field: String, zone: RecordZone.ID, to out: inout ByteOutput) {
        switch value {
        case .string(let s): out.appendString(s)
        case .int64(let i): out.appendInt(i)
        case .double(let d): out.appendDouble(d, field: field)
        case .date(let d): out.appendTimestamp(d, field: field)
        case .bytes(let b): out.appendBase64(b)
        case .reference(let r): appendReference(r, zone: zone, to: &out)
        case .location(let l): appendLocation(l, field: field, to: &out)
        case .asset(let a): appendAsset(a, field: field, to: &out)
        case .stringList(let v): out.appendArray(v) { $1.appendString($0) }
        case .int64List(let v): out.appendArray(v) { $1.appendInt($0) }
        case .doubleList(let v): out.appendArray(v) { $1.appendDouble($0, field: field) }
        case .dateList(let v): out.appendArray(v) { $1.appendTimestamp($0, field: field) }
        case .bytesList(let v): out.appendArray(v) { $1.appendBase64($0) }
        case .referenceList(let v): out.appendArray(v) { appendReference($0, zone: zone, to: &$1) }
        case .locationList(let v): out.appendArray(v) { appendLocation($0, field: field, to: &$1) }
        case .assetList(let v): out.appendArray(v) { appendAsset($0, field: field, to: &$1) }
        }
    }

    static func appendReference(_ reference: Record.Reference, zone: RecordZone.ID, withAction: Bool = true, to out: inout ByteOutput) {
        out.append("{\"recordName\":")
        out.appendString(reference.recordID.recordName)
        if withAction { out.append(reference.action == .deleteSelf ? ",\"action\":\"DELETE_SELF\"" : ",\"action\":\"NONE\"") }
        if reference.recordID.zoneID != zone {
            out.append(",\"zoneID\":")
            appendZoneID(reference.recordID.zoneID, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendLocation(_ l: Location, field: String, to out: inout ByteOutput) {
        let members: [(StaticString, Double)] = [
            ("{\"latitude\":", l.latitude), (",\"longitude\":", l.longitude), (",\"altitude\":", l.altitude),
            (",\"horizontalAccuracy\":", l.horizontalAccuracy), (",\"verticalAccuracy\":", l.verticalAccuracy),
            (",\"course\":", l.course), (",\"speed\":", l.speed),
        ]
        for (name, value) in members {
            out.append(name)
            out.appendDouble(value, field: field)
        }
        out.append(",\"timestamp\":")
        out.appendTimestamp(l.timestamp, field: field)
        out.append(UInt8(ascii: "}"))
    }

    /// An asset: CloudKit's asset dictionary as it came for a CloudKit asset; otherwise its
    /// size and its file (`localName`, a path beside the JSON, else the store file's URL).
    static func appendAsset(_ asset: Asset, field: String, localName: String? = nil, to out: inout ByteOutput) {
        out.append(UInt8(ascii: "{"))
        var first = true
        func member(_ name: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(name)
            out.append("\":")
        }
        if let size = asset.size {
            member("size")
            out.appendInt(size)
        }
        if let remote = asset.downloadURL {
            member("downloadURL")
            out.appendString(remote)
            // Content written into the folder under a name its checksum does not give.
            if let localName, asset.fileChecksum.flatMap(AssetAttacher.checksumFileName) != localName {
                member("stratusContentFile")
                out.appendString(localName)
            }
        } else if asset.otherMembers["downloadURL"] == nil {
            if let localName, asset.hasCloudKitMetadata {
                // CloudKit's asset without a URL (a records/modify answer's) stays CloudKit's
                // beside a folder, which holds its content under its checksum's name. A plain
                // export names the store's content file, which a restore reads.
                if asset.fileChecksum.flatMap(AssetAttacher.checksumFileName) != localName {
                    member("stratusContentFile")
                    out.appendString(localName)
                }
            } else if let localName {
                member("downloadURL")
                out.appendString(localName)
            } else if let url = asset.contentURL {
                member("downloadURL")
                out.appendString(url.absoluteString)
            } else if !asset.hasCloudKitMetadata {
                if out.problem == nil { out.problem = "field '\(field)' holds an asset without a file" }
                member("downloadURL")
                out.append("\"\"")
            }
        }
        for (name, value) in [("fileChecksum", asset.fileChecksum), ("referenceChecksum", asset.referenceChecksum),
                              ("wrappingKey", asset.wrappingKey), ("receipt", asset.receipt)] {
            guard let value else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.appendString(name)
            out.append(UInt8(ascii: ":"))
            out.appendString(value)
        }
        for name in asset.otherMembers.keys.sorted() {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.appendString(name)
            out.append(UInt8(ascii: ":"))
            out.appendRaw(asset.otherMembers[name]!)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// An asset value whose content is written into `folder` beside the JSON.
    static func appendValue(_ value: FieldValue, field: String, zone: RecordZone.ID, assetFolder folder: AssetExportFolder, to out: inout ByteOutput) {
        func one(_ asset: Asset, _ out: inout ByteOutput) {
            do {
                appendAsset(asset, field: field, localName: try folder.export(asset), to: &out)
            } catch {
                folder.recordFailureBeyondTheRecord((error as? StratusError).map { StratusError($0.code, "field '\(field)': \($0.message)") } ?? error)
                if out.problem == nil { out.problem = "field '\(field)': \(error)" }
                appendAsset(asset, field: field, to: &out)
            }
        }
        switch value {
        case .asset(let asset): one(asset, &out)
        case .assetList(let assets): out.appendArray(assets) { one($0, &$1) }
        default: appendValue(value, field: field, zone: zone, to: &out)
        }
    }
}
