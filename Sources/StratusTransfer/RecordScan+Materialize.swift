import Foundation
import Stratus

/// A problem with one value: where it is and what is wrong, naming the field.
struct FieldError: Error {
    var offset: Int
    var message: String
}

/// Texts that repeat from record to record (the record type, the zone, field names in the
/// same order), so that equal bytes give the same `String` without decoding and allocating
/// it again.
final class DecodeCache {
    struct Entry {
        var bytes: [UInt8]
        var text: String
    }

    var recordType: Entry?
    /// The zone's name and owner bytes (nil owner: none given), and the zone ID they made.
    var zone: (name: [UInt8], owner: [UInt8]?, id: RecordZone.ID)?
    var fieldNames: [Entry?] = []
    /// The last record's fields when it had no duplicate or removed field, and where each of
    /// its names (``fieldNames`` in order) lies in them: a record with the same names in the
    /// same order gets a copy with its values put in place, without hashing a name (as
    /// ``FieldDocument/Shape`` does for stored documents).
    var shapeFields: [String: FieldValue]?
    var shapePositions: [Dictionary<String, FieldValue>.Index] = []
    /// CloudKit assets read with an assets folder that holds no file under their checksum:
    /// kept as CloudKit's metadata, without content.
    var cloudKitAssetsWithoutContent = 0
    /// Whether the record being decoded names its zone (itself or through its envelope): its
    /// references must then stay in that zone. A record that names none (a `records/query` or
    /// `records/modify` answer) is put in the reader's zone; a reference of it that names a zone
    /// of another name keeps that zone, and the save refuses it (references stay in their
    /// record's zone); one that names the record's zone keeps its `zoneID` as it came (with the
    /// field's JSON).
    var recordZoneIsKnown = false
    /// The types of fields the schema lacks, by record type, as the input's first record that
    /// held each (typed, or inferred) declares it: saving that record declares the field
    /// (development grows its schema), so the input's later values without a `"type"` are read
    /// as that type, as a second run would read them from the grown schema. A file exported
    /// with one typed record and the rest untyped (`stratus export` keeps a value that came
    /// untyped so) then imports into an empty store as it does into its own.
    var declaredByInput: [String: [String: FieldType]] = [:]
    /// Of those fields, the ones whose first value was encrypted, by record type.
    var encryptedByInput: [String: Set<String>] = [:]
    /// The record type of the records read on ``shapeFields`` once every field of the shape is
    /// declared (nil until then: an empty list declares nothing): a record of that type read on
    /// that shape has the same names, so nothing more to declare.
    var shapeRecordType: String?
    /// Whether the record comes from one of CloudKit's answers (an envelope): the system
    /// fields and zoneID it lacks are then left out when it is written back, as CloudKit left
    /// them out. A record of NDJSON or a JSON array that lacks them gets what the store gives
    /// it (a change tag, dates, its zone) when written. Fields go back as they came in every
    /// format (``JSONCursor/keepsFieldText(_:value:encrypted:)``).
    var mirrorsAbsence = false
}

/// What the decoder needs besides the bytes: defaults, schemas and policies.
struct DecodeContext {
    let cache = DecodeCache()
    let defaultZone: RecordZone.ID
    /// Field types by record type, then by field name, from the read options' schemas.
    let schemaTypes: [String: [String: FieldType]]
    /// The fields declared `NUMBER PREFERRED AS …`, by record type: an untyped number in one
    /// takes the preferred type when it fits, else DOUBLE.
    let numberFields: [String: Set<String>]
    /// The fields the schemas declare encrypted, by record type: a value without a `"type"`
    /// there is an encrypted value, as a CloudKit request leaves out the type of one.
    let encryptedFields: [String: Set<String>]
    let assetDirectory: URL?
    let followsAssetSymlinks: Bool
    let assetPaths: RecordReadOptions.AssetPaths
    let storeContentDirectory: URL?
    /// Whether `"deleted": true` items are deletions rather than rejected.
    let readsDeletions: Bool
    let keepsSystemRecords: Bool

    init(options: RecordReadOptions) {
        defaultZone = options.zoneID
        var types: [String: [String: FieldType]] = [:]
        for (recordType, schema) in options.schemas {
            types[recordType] = Dictionary(schema.fields.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
        }
        schemaTypes = types
        var numbers: [String: Set<String>] = [:]
        for (recordType, schema) in options.schemas {
            let declared = Set(schema.fields.filter(\.isNumber).map(\.name))
            if !declared.isEmpty { numbers[recordType] = declared }
        }
        numberFields = numbers
        var encrypted: [String: Set<String>] = [:]
        for (recordType, schema) in options.schemas {
            let declared = Set(schema.fields.filter(\.isEncrypted).map(\.name))
            if !declared.isEmpty { encrypted[recordType] = declared }
        }
        encryptedFields = encrypted
        assetDirectory = options.assetDirectory
        followsAssetSymlinks = options.followsAssetSymlinks
        assetPaths = options.assetPaths
        storeContentDirectory = options.storeContentDirectory
        readsDeletions = options.readsDeletions
        keepsSystemRecords = options.keepsSystemRecords
    }
}

/// The outcome of decoding one record object.
enum DecodedRecord {
    case record(Record)
    case deletion(Record.ID, recordType: String?)
    case rejected(offset: Int, recordName: String?, message: String)

    var isRejected: Bool {
        if case .rejected = self { return true }
        return false
    }
}

extension JSONCursor {
    /// Builds the record from a finished scan, or says why it cannot be one.
    /// `nameIfAbsent` names a record that has no `recordName` (a `create` operation, which
    /// CloudKit names with a random UUID).
    func materialize(_ scan: RecordScan, zone contextZone: RecordZone.ID, zoneIsKnown: Bool = false, fromAnswer: Bool = false, nameIfAbsent: String? = nil,
                     context: DecodeContext) -> DecodedRecord {
        context.cache.recordZoneIsKnown = zoneIsKnown || scan.hasZone
        context.cache.mirrorsAbsence = fromAnswer
        let name: String? = scan.recordName.isPresent ? string(scan.recordName) : nameIfAbsent
        if let problem {
            return .rejected(offset: problem.offset, recordName: name, message: problem.message)
        }
        do throws(FieldError) {
            if scan.deletion.isPresent {
                guard context.readsDeletions else {
                    throw FieldError(offset: scan.deletion.start, message: "the record is a deletion (\"deleted\": true); this reader saves records and never deletes them (readsDeletions reads deletions)")
                }
                return try deletion(scan, name: name, zone: contextZone, context: context)
            }
            return .record(try buildRecord(scan, name: name, zone: contextZone, context: context))
        } catch {
            return .rejected(offset: error.offset, recordName: name, message: error.message)
        }
    }

    /// The record of a `records/modify` operation that deletes it (`forceDelete`, `delete`), as a
    /// deletion when the reader reads them (``RecordReadOptions/readsDeletions``).
    /// A deletion an operation or a result names. `readsFields` false: the record may carry
    /// fields, which are not read (a client that fetched the record sends it whole in a
    /// `forceDelete`, and CloudKit reads only its name); otherwise fields make it no deletion.
    func materializeDeletion(_ scan: RecordScan, zone contextZone: RecordZone.ID, operation: String, at operationOffset: Int, readsFields: Bool = true,
                             context: DecodeContext) -> DecodedRecord {
        let name: String? = scan.recordName.isPresent ? string(scan.recordName) : nil
        if let problem { return .rejected(offset: problem.offset, recordName: name, message: problem.message) }
        guard context.readsDeletions else {
            return .rejected(offset: operationOffset, recordName: name, message: "the operation '\(operation)' deletes the record; this reader saves records and never deletes them (readsDeletions reads deletions)")
        }
        do throws(FieldError) {
            return try deletion(scan, name: name, zone: contextZone, context: context, readsFields: readsFields)
        } catch {
            return .rejected(offset: error.offset, recordName: name, message: error.message)
        }
    }

    /// A deletion as `stratus changes` writes it: `{"recordName", "recordType"?, "deleted": true,
    /// "zoneID"?}`; it carries no fields, unless `readsFields` is false (an operation's record,
    /// whose fields are not read).
    private func deletion(_ scan: RecordScan, name: String?, zone contextZone: RecordZone.ID, context: DecodeContext, readsFields: Bool = true) throws(FieldError) -> DecodedRecord {
        guard let name else { throw FieldError(offset: scan.start, message: "the deletion has no recordName") }
        try checkRecordName(name, at: scan.recordName.start, context: context)
        var recordType: String?
        if scan.recordType.isPresent {
            let type = string(scan.recordType)
            do {
                if context.keepsSystemRecords { try Naming.checkKeptRecordType(type) } else { try Naming.checkRecordType(type) }
            } catch { throw FieldError(offset: scan.recordType.start, message: error.message) }
            recordType = type
        }
        if readsFields && !scan.fields.isEmpty { throw FieldError(offset: scan.deletion.start, message: "a deletion (\"deleted\": true) carries no fields") }
        let zoneID = scan.hasZone ? try self.zoneID(name: scan.zoneName, owner: scan.zoneOwner, at: scan.zoneStart, what: scan.zoneKey) : contextZone
        return .deletion(Record.ID(recordName: name, zoneID: zoneID), recordType: recordType)
    }

    /// Members of CloudKit Web Services bodies that are not records, and what each body is.
    private static let otherBodies: [(key: StaticString, body: String)] = [
        ("query", "a records/query request"), ("subscriptions", "a subscriptions answer"),
        ("users", "a users/discover answer"), ("userRecordName", "a user identity (users/caller)"),
    ]

    private func buildRecord(_ scan: RecordScan, name: String?, zone contextZone: RecordZone.ID, context: DecodeContext) throws(FieldError) -> Record {
        guard let name else {
            // CloudKit JS answers also hold the records keyed by name; a saved answer of that
            // shape is one object here, not a record without a name.
            if scan.otherMembers.contains(where: { stringEquals($0.key, "recordsByRecordName") }) {
                throw FieldError(offset: scan.start, message: "the object's 'recordsByRecordName' (CloudKit JS) holds records keyed by name; import a file of its 'records' array, or of those records one per line")
            }
            // Other CloudKit Web Services bodies saved beside answers: say what the file is.
            if !scan.recordType.isPresent, let (key, body) = Self.otherBodies.lazy.compactMap({ key, body in
                scan.otherMembers.contains(where: { self.stringEquals($0.key, key) }) ? (key, body) : nil
            }).first {
                throw FieldError(offset: scan.start, message: "the record has no recordName: the object, with its '\(key)', looks like \(body), which holds no records; import the records CloudKit answered with")
            }
            throw FieldError(offset: scan.start, message: "the record has no recordName")
        }
        if !Self.isPlainRecordName(scan.recordName, base) {
            try checkRecordName(name, at: scan.recordName.start, context: context)
        }
        guard scan.recordType.isPresent else {
            // A records/lookup request lists records by name alone: say what the file is.
            let nameAlone = scan.fields.isEmpty && !scan.changeTag.isPresent && !scan.hasCreated && !scan.hasModified
                && scan.otherMembers.allSatisfy { stringEquals($0.key, "desiredKeys") }
            throw FieldError(offset: scan.start, message: "the record has no recordType" + (nameAlone ? ": an object of a recordName alone is what a records/lookup request lists, which holds no records; import the records CloudKit answered with" : ""))
        }
        let cache = context.cache
        let recordType = cachedString(scan.recordType, &cache.recordType)
        if !Self.isPlainIdentifier(scan.recordType, base) {
            do {
                if context.keepsSystemRecords { try Naming.checkKeptRecordType(recordType) } else { try Naming.checkRecordType(recordType) }
            } catch {
                throw FieldError(offset: scan.recordType.start, message: error.message)
            }
        }
        var zoneID = contextZone
        if scan.hasZone {
            if let cached = cache.zone, bytesEqual(scan.zoneName, cached.name),
               scan.zoneOwner.isPresent == (cached.owner != nil), cached.owner.map({ bytesEqual(scan.zoneOwner, $0) }) ?? true {
                zoneID = cached.id
            } else {
                zoneID = try self.zoneID(name: scan.zoneName, owner: scan.zoneOwner, at: scan.zoneStart, what: scan.zoneKey)
                if let name = rawBytes(scan.zoneName) {
                    if !scan.zoneOwner.isPresent {
                        cache.zone = (Array(name), nil, zoneID)
                    } else if let owner = rawBytes(scan.zoneOwner) {
                        cache.zone = (Array(name), Array(owner), zoneID)
                    }
                }
            }
        }

        var system = Record.SystemFields()
        // A control character (NUL above all, where a store's text would end) is no part of a
        // tag or a user's name CloudKit writes: refused rather than cut short, which would make
        // another tag or another user.
        func systemText(_ token: Token, _ what: String) throws(FieldError) -> String {
            let text = string(token)
            if Naming.containsControlCharacter(text) {
                throw FieldError(offset: token.start, message: "\(what) holds a control character")
            }
            return text
        }
        // Clients write `"recordChangeTag": ""` for a record not saved yet (CloudKit reads it
        // as no tag, as the CSV reader reads an empty cell); kept, it would become a stored tag
        // no store ever gave, which an update's check would then compare against.
        if scan.changeTag.isPresent {
            let tag = try systemText(scan.changeTag, "'recordChangeTag'")
            if !tag.isEmpty { system.recordChangeTag = tag }
        }
        if scan.createdTime.isPresent { system.creationDate = try date(scan.createdTime, "'created' timestamp") }
        if scan.modifiedTime.isPresent { system.modificationDate = try date(scan.modifiedTime, "'modified' timestamp") }
        // A user record name names a user: an empty one would make a record nobody created.
        func userText(_ token: Token, _ what: String) throws(FieldError) -> String {
            let text = try systemText(token, what)
            if text.isEmpty { throw FieldError(offset: token.start, message: "\(what) is empty; a user record name names a user (leave the member out when the user is not known)") }
            do {
                try Naming.checkRecordName(text, allowSystemNames: true)
            } catch {
                throw FieldError(offset: token.start, message: "\(what) is no user record name (\(error.message))")
            }
            return text
        }
        if scan.createdUser.isPresent { system.creatorUserRecordID = Record.ID(recordName: try userText(scan.createdUser, "'created' userRecordName")) }
        if scan.modifiedUser.isPresent { system.lastModifiedUserRecordID = Record.ID(recordName: try userText(scan.modifiedUser, "'modified' userRecordName")) }

        var parent: Record.Reference?
        if scan.parent.isPresent {
            parent = try reference(scan.parent, what: "the parent", zone: zoneID, context: context)
            if parent?.action != Record.ReferenceAction.none {
                throw FieldError(offset: scan.parent.start, message: "the parent reference's action must be NONE")
            }
        }

        let schema = context.schemaTypes.isEmpty ? nil : context.schemaTypes[recordType]
        let numbers = context.numberFields.isEmpty ? nil : context.numberFields[recordType]
        let declaredByInput = cache.declaredByInput.isEmpty ? nil : cache.declaredByInput[recordType]
        let encryptedBySchema = context.encryptedFields.isEmpty ? nil : context.encryptedFields[recordType]
        let encryptedByInput = cache.encryptedByInput.isEmpty ? nil : cache.encryptedByInput[recordType]
        // Out of the class for the loop, so each access is not checked for exclusivity.
        var names = cache.fieldNames
        cache.fieldNames = []
        defer { cache.fieldNames = names }
        if names.count < scan.fields.count { names += repeatElement(nil, count: scan.fields.count - names.count) }
        var extras = recordExtras(scan, mirrorsAbsence: context.cache.mirrorsAbsence)
        // On the last record's shape while every name so far is its name at that place.
        let shapePositions = cache.shapePositions
        var onShape = cache.shapeFields != nil && scan.fields.count == shapePositions.count
        var values: [String: FieldValue]
        if onShape, let shape = cache.shapeFields {
            values = shape
        } else {
            values = [:]
            values.reserveCapacity(scan.fields.count)
        }
        var encryptedKeys: Set<String> = []
        var removed: [String] = []
        for (index, field) in scan.fields.enumerated() {
            var known = true
            let key = cachedString(field.name, &names[index], known: &known)
            if !known {
                // The names no longer match the shape's (even if this record fails below).
                cache.shapeFields = nil
                if onShape {
                    values = Self.ownFields(values, names: names, positions: shapePositions, count: index, capacity: scan.fields.count)
                    onShape = false
                }
            }
            if !Self.isPlainIdentifier(field.name, base) || Self.mayBeReserved(field.name, base) {
                do {
                    if context.keepsSystemRecords { try Naming.checkKeptFieldKey(key, recordType: recordType) } else { try Naming.checkFieldKey(key) }
                } catch {
                    let hint = !context.keepsSystemRecords && Naming.isSystemIdentifier(key) ? "; keep CloudKit's own records with --keep-system-records" : ""
                    throw FieldError(offset: field.name.start, message: error.message + hint)
                }
            }
            let (value, encrypted) = try fieldValue(
                field, key: key, schema: schema, declaredByInput: declaredByInput, numbers: numbers,
                encrypted: (bySchema: encryptedBySchema, byInput: encryptedByInput), zone: zoneID, context: context)
            if let value {
                if value.isAsset {
                    if let template = assetFieldTemplate(field, encrypted: encrypted) { extras.fields[key] = template }
                } else if keepsFieldText(field, value: value, encrypted: encrypted) {
                    extras.fields[key] = compactText(field.object)
                }
            }
            if onShape {
                if let value {
                    values.values[shapePositions[index]] = value
                    if encrypted { encryptedKeys.insert(key) }
                    continue
                }
                values = Self.ownFields(values, names: names, positions: shapePositions, count: index, capacity: scan.fields.count)
                onShape = false
            }
            let duplicate: Bool
            if let value {
                duplicate = values.updateValue(value, forKey: key) != nil || (!removed.isEmpty && removed.contains(key))
                if encrypted { encryptedKeys.insert(key) }
            } else {
                duplicate = values[key] != nil || removed.contains(key)
                removed.append(key)
            }
            if duplicate { throw FieldError(offset: field.name.start, message: "field '\(key)' appears twice") }
        }
        var declaredAll = onShape && cache.shapeRecordType == recordType
        if !declaredAll {
            declaredAll = Self.declare(values, encryptedKeys: encryptedKeys, recordType: recordType, schema: schema, in: cache)
            if onShape { cache.shapeRecordType = declaredAll ? recordType : nil }
        }
        if !onShape {
            // A record without duplicate or removed fields is the shape of the next.
            if removed.isEmpty && values.count == scan.fields.count && !values.isEmpty && !names.prefix(scan.fields.count).contains(where: { $0 == nil }) {
                cache.shapePositions = (0..<scan.fields.count).map { values.index(forKey: names[$0]!.text)! }
                cache.shapeFields = values
                cache.shapeRecordType = declaredAll ? recordType : nil
            } else {
                cache.shapeFields = nil
                cache.shapePositions = []
            }
        }
        // Built whole, every field counts as changed, so a save writes them all; the null
        // ones are removals, marked by setting them to nil.
        // The names were checked above, on the bytes or by Naming (see RecordReader.checksNames).
        let record = Record(
            recordType: recordType, recordID: Record.ID(recordName: name, zoneID: zoneID), values: values,
            systemFields: system, parent: parent, encryptedKeys: encryptedKeys, jsonExtras: extras)
        for key in removed { record.setFieldValue(nil, forKey: key) }
        return record
    }



    /// Notes the types of `values` whose fields neither the schema nor an earlier record
    /// declared (``DecodeCache/declaredByInput``). An empty list declares nothing, as its
    /// elements' type is unknown.
    /// Answers whether every field of `values` is declared now.
    private static func declare(_ values: [String: FieldValue], encryptedKeys: Set<String>, recordType: String, schema: [String: FieldType]?, in cache: DecodeCache) -> Bool {
        var declared = cache.declaredByInput[recordType] ?? [:]
        let count = declared.count
        var all = true
        for (key, value) in values where schema?[key] == nil && declared[key] == nil {
            if value.isEmptyList {
                all = false
                continue
            }
            declared[key] = value.type
            if encryptedKeys.contains(key) { cache.encryptedByInput[recordType, default: []].insert(key) }
        }
        if declared.count != count { cache.declaredByInput[recordType] = declared }
        return all
    }

    /// The first `count` fields of a record read on a shape (``DecodeCache/shapeFields``), as
    /// a dictionary of their own.
    private static func ownFields(_ shaped: [String: FieldValue], names: [DecodeCache.Entry?], positions: [Dictionary<String, FieldValue>.Index],
                                  count: Int, capacity: Int) -> [String: FieldValue] {
        var own = [String: FieldValue](minimumCapacity: capacity)
        for place in 0..<count { own[names[place]!.text] = shaped.values[positions[place]] }
        return own
    }

    /// A zone ID from its tokens; the owner defaults to the current user.
    func zoneID(name: Token, owner: Token, at offset: Int, what: String) throws(FieldError) -> RecordZone.ID {
        guard name.isPresent else { throw FieldError(offset: offset, message: "'\(what)' has no zoneName") }
        let zoneName = string(name)
        if zoneName != RecordZone.ID.defaultZoneName && !Self.isPlainIdentifier(name, base) {
            do { try Naming.checkZoneName(zoneName) } catch { throw FieldError(offset: name.start, message: error.message) }
        }
        guard owner.isPresent else { return RecordZone.ID(zoneName: zoneName) }
        let ownerName = string(owner)
        do { try Naming.checkOwnerName(ownerName) } catch { throw FieldError(offset: owner.start, message: error.message) }
        return RecordZone.ID(zoneName: zoneName, ownerName: ownerName)
    }

    /// Checks a record name as CloudKit does (`CKRecord.ID`: ASCII, at most 255 characters, not
    /// starting with an underscore), names of CloudKit's own records allowed when kept.
    private func checkRecordName(_ name: String, at offset: Int, context: DecodeContext) throws(FieldError) {
        do {
            try Naming.checkRecordName(name, allowSystemNames: context.keepsSystemRecords)
        } catch {
            let hint = name.hasPrefix("_") ? "; keep CloudKit's own records with --keep-system-records (RecordReadOptions.keepsSystemRecords)" : ""
            throw FieldError(offset: offset, message: error.message + hint)
        }
    }

    /// What the record object held beyond the model: members Stratus has no place for, the
    /// zone ID's other members, `created`/`modified` members, and which members were absent.
    private func recordExtras(_ scan: RecordScan, mirrorsAbsence: Bool) -> Record.JSONExtras {
        var extras = Record.JSONExtras()
        // Only a CloudKit answer's records give back what they lacked; others lack most system
        // members, and recording each absence (a set per record) cost an import 8% of its time.
        func absent(_ key: String) {
            if mirrorsAbsence || key.hasSuffix(".ownerRecordName") { extras.absentKeys.insert(key) }
        }
        for (key, value) in scan.otherMembers { extras.members[string(key)] = compactText(value) }
        // The parent goes back as it came (its zoneID, an action); the typed parent serves saves.
        if scan.parent.isPresent { extras.members["parent"] = compactText(scan.parent) }
        if scan.hasZone && !scan.zoneFromZoneMember {
            for (key, value) in scan.zoneOther { extras.zoneIDMembers[string(key)] = compactText(value) }
            if !scan.zoneOwner.isPresent { absent("zoneID.ownerRecordName") }
        } else {
            // A CKTool JS "zone" is a kept member: the record goes back with it, not a zoneID.
            absent("zoneID")
        }
        if scan.hasCreated {
            for (key, value) in scan.createdOther { extras.createdMembers[string(key)] = compactText(value) }
            if !scan.createdTime.isPresent { absent("created.timestamp") }
            if !scan.createdUser.isPresent { absent("created.userRecordName") }
        } else {
            absent("created")
        }
        if scan.hasModified {
            for (key, value) in scan.modifiedOther { extras.modifiedMembers[string(key)] = compactText(value) }
            if !scan.modifiedTime.isPresent { absent("modified.timestamp") }
            if !scan.modifiedUser.isPresent { absent("modified.userRecordName") }
        } else {
            absent("modified")
        }
        if !scan.changeTag.isPresent || string(scan.changeTag).isEmpty { absent("recordChangeTag") }
        if scan.seen & (1 << 2) == 0 { absent("fields") }
        return extras
    }

    private func date(_ token: Token, _ what: String) throws(FieldError) -> Date {
        guard let date = timestamp(token) else {
            if token.kind == .string {
                let digits = Double(quoted(token))?.isFinite == true
                throw FieldError(offset: token.start, message: digits
                    ? "\(what) '\(quoted(token))' is a number written as a string; give the milliseconds since 1970 as a JSON number (\(quoted(token))), or an ISO 8601 date-time with a zone"
                    : "\(what) '\(quoted(token))' is not an ISO 8601 date-time with a zone (2024-03-01T12:00:00Z), nor a number of milliseconds since 1970")
            }
            throw FieldError(offset: token.start, message: "\(what) \(numberText(token)) \(timestampRefusal(token))")
        }
        return date
    }

    // MARK: - Repeated texts

    /// A string token's text, reusing the cached `String` when the bytes are the same.
    func cachedString(_ token: Token, _ entry: inout DecodeCache.Entry?) -> String {
        var known = true
        return cachedString(token, &entry, known: &known)
    }

    /// ``cachedString(_:_:)``, clearing `known` when the text is not the entry's.
    func cachedString(_ token: Token, _ entry: inout DecodeCache.Entry?, known: inout Bool) -> String {
        guard let bytes = rawBytes(token) else {
            // Spelled with escapes: the entry no longer holds this place's name.
            known = false
            entry = nil
            return string(token)
        }
        if let cached = entry, cached.bytes.count == bytes.count,
           bytes.isEmpty || cached.bytes.withUnsafeBufferPointer({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
            return cached.text
        }
        known = false
        let text = String(decoding: bytes, as: UTF8.self)
        entry = DecodeCache.Entry(bytes: Array(bytes), text: text)
        return text
    }

    /// A string token's bytes between its quotes, when they have no escape (nil otherwise).
    func rawBytes(_ token: Token) -> UnsafeBufferPointer<UInt8>? {
        guard token.kind == .string, token.flags & Token.hasEscape == 0 else { return nil }
        return UnsafeBufferPointer(start: base + token.start + 1, count: token.end - token.start - 2)
    }

    /// Whether a token's raw text equals `bytes` (an absent token equals an empty array).
    func bytesEqual(_ token: Token, _ bytes: [UInt8]) -> Bool {
        guard let raw = rawBytes(token), raw.count == bytes.count else { return false }
        if raw.isEmpty { return true }
        return bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }
    }

    // MARK: - Name checks on bytes

    /// Whether a string token is a record name CloudKit accepts: ASCII without control
    /// characters, 1–255 bytes, no leading `_`. Anything else goes to ``Naming`` for its message.
    static func isPlainRecordName(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        guard token.flags & Token.hasEscape == 0 else { return false }
        let count = token.end - token.start - 2
        guard count >= 1 && count <= Naming.maximumRecordNameLength else { return false }
        var i = token.start + 1
        if base[i] == UInt8(ascii: "_") { return false }
        let end = i + count
        while i < end {
            if base[i] < 0x20 || base[i] >= 0x7F { return false }
            i += 1
        }
        return true
    }

    /// Whether a plain key is one of ``Naming/reservedFieldKeys``, compared as bytes so that
    /// ordinary keys cost neither a hash nor a `String`.
    static func mayBeReserved(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        let count = token.end - token.start - 2
        let start = base + token.start + 1
        for reserved in reservedKeyBytes where reserved.count == count {
            if reserved.withUnsafeBufferPointer({ memcmp($0.baseAddress!, start, count) == 0 }) { return true }
        }
        return false
    }

    private static let reservedKeyBytes: [[UInt8]] = Naming.reservedFieldKeys.map { Array($0.utf8) }

    /// Whether a string token is an identifier: a letter, then letters, digits and `_`.
    static func isPlainIdentifier(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        guard token.flags & Token.hasEscape == 0 else { return false }
        let count = token.end - token.start - 2
        guard count >= 1 && count <= Naming.maximumIdentifierLength else { return false }
        var i = token.start + 1
        let first = base[i] | 0x20
        guard first >= UInt8(ascii: "a") && first <= UInt8(ascii: "z") else { return false }
        let end = i + count
        i += 1
        while i < end {
            if !isWordByte(base[i]) { return false }
            i += 1
        }
        return true
    }
}
