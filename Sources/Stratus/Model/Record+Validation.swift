import Foundation

extension Record {
    /// The most bytes of field data one record may hold, assets excluded (CloudKit's limit).
    public static let maximumFieldDataSize = 1_000_000

    /// Checks what CloudKit checks before a save: names, keys, values, size.
    ///
    /// ```swift
    /// try record.validateForSave()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` (bad name, key or value) or `limitExceeded`
    ///   (more than ``maximumFieldDataSize`` bytes), naming the record and field.
    public func validateForSave() throws(StratusError) {
        let state = snapshot
        _ = try Self.validate(recordID: recordID, recordType: recordType, fields: state.fields, encrypted: state.encrypted, parent: state.parent, namesChecked: false)
    }

    /// Checks a record's name, type and field keys, admitting those of CloudKit's own records
    /// (`cloudkit.share` and its `cloudkit.title`, `_`-names), as a reader that keeps system
    /// records does; ``validate(recordID:recordType:fields:encrypted:parent:namesChecked:)``
    /// then checks the rest with `namesChecked`.
    static func checkNamesAllowingSystemNames(_ record: Record) throws(StratusError) {
        do {
            try Naming.checkRecordName(record.recordID.recordName, allowSystemNames: true)
            try Naming.checkKeptRecordType(record.recordType)
            for key in record.snapshot.fields.keys { try Naming.checkKeptFieldKey(key, recordType: record.recordType) }
        } catch {
            throw StratusError(.invalidArguments, "record '\(Naming.shown(recordName: record.recordID.recordName))': \(error.message)", recordID: record.recordID)
        }
    }

    /// Checks a record's names, values and size; answers the field data size it counted.
    /// `namesChecked` skips the record name, type and field key checks that a producer (a
    /// reader that checks them on its input's bytes) has done already.
    static func validate(recordID: ID, recordType: String, fields: [String: FieldValue], encrypted: Set<String>, parent: Reference?, namesChecked: Bool) throws(StratusError) -> ValidatedFields {
        func fail(_ message: String, code: StratusError.Code = .invalidArguments) -> StratusError {
            StratusError(code, "record '\(Naming.shown(recordName: recordID.recordName))': \(message)", recordID: recordID)
        }
        do {
            if !namesChecked {
                // CloudKit's user records are named by their user's record name (`_…`); their
                // user may save them (the security roles decide who may).
                try Naming.checkRecordName(recordID.recordName, allowSystemNames: recordType == ContainerSchema.usersRecordType)
                // A share is one of CloudKit's own records that apps save (`CKShare`).
                if recordType != Record.SystemType.share { try Naming.checkIdentifier(recordType, kind: "record type") }
            }
            try Naming.checkZoneName(recordID.zoneID.zoneName)
        } catch {
            throw fail(error.message)
        }
        var referencesElsewhere = false
        if let parent {
            try checkReference(parent, key: nil, of: recordID)
            if parent.recordID.recordName == recordID.recordName { throw fail("a record cannot be its own parent") }
            if parent.recordID.zoneID != recordID.zoneID { referencesElsewhere = true }
        }
        // One pass: the checks, the size and whether an asset is held.
        var size = 0
        var holdsAsset = false
        for (key, value) in fields {
            if !namesChecked {
                do { try Naming.checkFieldKey(key, allowSystemNames: recordType == Record.SystemType.share) } catch { throw fail(error.message) }
            }
            size += fieldDataSize(key, value)
            if value.holdsNonFiniteNumber {
                switch value.type {
                case .timestamp, .timestampList:
                    throw fail("field '\(key)' holds a date at a non-finite time (Date(timeIntervalSinceReferenceDate: .infinity) or .nan), which a store cannot keep")
                case .location, .locationList:
                    throw fail("field '\(key)' holds a location with a non-finite coordinate")
                default:
                    throw fail("field '\(key)' holds a non-finite number, which a store cannot keep")
                }
            }
            switch value {
            case .reference(let r):
                try checkReference(r, key: key, of: recordID)
                if r.recordID.zoneID != recordID.zoneID { referencesElsewhere = true }
            case .referenceList(let v):
                for r in v {
                    try checkReference(r, key: key, of: recordID)
                    if r.recordID.zoneID != recordID.zoneID { referencesElsewhere = true }
                }
            case .asset(let a) where !a.isSavable:
                throw fail("field '\(key)' holds an asset without a file, stored content or CloudKit downloadURL")
            case .assetList(let v) where v.contains(where: { !$0.isSavable }):
                throw fail("field '\(key)' holds an asset without a file, stored content or CloudKit downloadURL")
            case .asset, .assetList: holdsAsset = true
            default: break
            }
            // CloudKit encrypts every type but references (the server keeps the zone's graph by
            // them) and assets (their files travel apart).
            if !encrypted.isEmpty, encrypted.contains(key), [.reference, .referenceList, .asset, .assetList].contains(value.type) {
                throw fail("field '\(key)' holds \(value.type.rawValue.hasPrefix("A") ? "an" : "a") \(value.type.rawValue) in encryptedValues, which CloudKit does not encrypt (every type but CKAsset and CKRecord.Reference); save it as a plain field")
            }
        }
        if size > Record.maximumFieldDataSize {
            throw fail("holds \(size) bytes of field data; the limit is \(Record.maximumFieldDataSize) bytes (assets excluded)", code: .limitExceeded)
        }
        return ValidatedFields(fieldDataSize: size, holdsAsset: holdsAsset, spellsZoneOtherwise: referencesElsewhere)
    }

    /// What validating a record's fields found out along the way.
    struct ValidatedFields {
        /// See ``Record/fieldDataSize``.
        let fieldDataSize: Int
        /// Whether a field holds an asset or a list of assets.
        let holdsAsset: Bool
        /// Whether a reference (or the parent) names the record's zone with another zone ID
        /// (the same zone name, another owner name): see ``Record/referencesInZone(_:of:)``.
        let spellsZoneOtherwise: Bool
    }

    /// `fields` with every reference in `zoneID`, the zone of the record that holds them.
    ///
    /// A reference never leaves its record's zone (``validate(recordID:recordType:fields:parent:namesChecked:)``
    /// checks the zone's name), so a reference that names the zone with another owner name
    /// (a CloudKit export's `ownerRecordName`, where the record is imported as the current
    /// user's) means that zone. Stored references keep only the target's name, and read back
    /// in their record's zone: a save must compare and store them that way too, or the same
    /// record saved again would never be unchanged.
    static func referencesInZone(_ fields: [String: FieldValue], of zoneID: RecordZone.ID) -> [String: FieldValue] {
        var moved = fields
        for (key, value) in fields {
            switch value {
            case .reference(let r) where r.recordID.zoneID != zoneID:
                moved[key] = .reference(r.inZone(zoneID))
            case .referenceList(let list) where list.contains(where: { $0.recordID.zoneID != zoneID }):
                moved[key] = .referenceList(list.map { $0.inZone(zoneID) })
            default: continue
            }
        }
        return moved
    }

    /// Bytes of field data, as counted against ``maximumFieldDataSize``: keys, string and byte
    /// contents (at least 1 byte an element of a list, which an empty one is kept and written
    /// out as), 8 bytes a number, 64 a location, 40 an asset (its contents are not counted), a
    /// reference's record name, and 4 bytes more for each element of a list of references.
    public var fieldDataSize: Int {
        Self.fieldDataSize(of: fieldValues)
    }

    /// The size ``fieldDataSize`` counts, for fields not (yet) in a record.
    package static func fieldDataSize(of fields: [String: FieldValue]) -> Int {
        var size = 0
        for (key, value) in fields { size += fieldDataSize(key, value) }
        return size
    }

    /// What an element of a list of references counts besides its record name: without it, and
    /// without the 1 byte an empty string or bytes element counts, a record of millions of short
    /// elements counted as almost nothing, and wrote out (export, change feeds) lines longer
    /// than an import reads.
    private static let referenceListElementCost = 4

    private static func fieldDataSize(_ key: String, _ value: FieldValue) -> Int {
        var size = key.utf8.count
        switch value {
            case .string(let s): size += s.utf8.count
            case .stringList(let v): size += v.reduce(0) { $0 + Swift.max($1.utf8.count, 1) }
            case .bytes(let b): size += b.count
            case .bytesList(let v): size += v.reduce(0) { $0 + Swift.max($1.count, 1) }
            case .int64, .double, .date: size += 8
            case .int64List(let v): size += 8 * v.count
            case .doubleList(let v): size += 8 * v.count
            case .dateList(let v): size += 8 * v.count
            case .location: size += 64
            case .locationList(let v): size += 64 * v.count
            case .reference(let r): size += r.recordID.recordName.utf8.count
            case .referenceList(let v): size += v.reduce(0) { $0 + $1.recordID.recordName.utf8.count + referenceListElementCost }
            case .asset: size += 40
            case .assetList(let v): size += 40 * v.count
        }
        return size
    }

    /// Checks a reference of field `key`, or (`nil`) the record's parent.
    private static func checkReference(_ reference: Reference, key: String?, of recordID: ID) throws(StratusError) {
        func fail(_ message: String) -> StratusError {
            StratusError(.invalidArguments, "record '\(recordID.recordName)': \(key.map { "field '\($0)'" } ?? "the parent") \(message)", recordID: recordID)
        }
        // A reference may point at one of CloudKit's own records: a user record (`_…`) most often.
        do { try Naming.checkRecordName(reference.recordID.recordName, allowSystemNames: true) } catch {
            throw fail("references a bad record name: \(error.message)")
        }
        if reference.recordID.zoneID.zoneName != recordID.zoneID.zoneName {
            throw fail("references a record in zone '\(reference.recordID.zoneID.zoneName)', but the record is in zone '\(recordID.zoneID.zoneName)': references (and parents) must stay in their record's zone, as in CloudKit")
        }
    }
}

extension Record.Reference {
    /// The same reference in `zoneID` (a zone of the same name, see ``Record/referencesInZone(_:of:)``).
    func inZone(_ zoneID: RecordZone.ID) -> Record.Reference {
        recordID.zoneID == zoneID ? self : Record.Reference(recordID: Record.ID(recordName: recordID.recordName, zoneID: zoneID), action: action)
    }
}

extension Asset {
    /// Whether a save can keep the asset: it has content to read or stored, or it describes
    /// CloudKit's content (kept as a reference until its content is attached).
    var isSavable: Bool { contentURL != nil || storedIdentifier != nil || hasCloudKitMetadata }
}

extension Location {
    var isFinite: Bool {
        [latitude, longitude, altitude, horizontalAccuracy, verticalAccuracy, course, speed, timestamp.timeIntervalSinceReferenceDate].allSatisfy(\.isFinite)
    }
}

extension FieldValue {
    /// Whether the value holds a number no store keeps: an infinity or NaN, as a number, a
    /// date's time or a location's coordinate.
    var holdsNonFiniteNumber: Bool {
        switch self {
        case .double(let number): !number.isFinite
        case .doubleList(let numbers): numbers.contains { !$0.isFinite }
        case .date(let date): !date.timeIntervalSinceReferenceDate.isFinite
        case .dateList(let dates): dates.contains { !$0.timeIntervalSinceReferenceDate.isFinite }
        case .location(let location): !location.isFinite
        case .locationList(let locations): locations.contains { !$0.isFinite }
        default: false
        }
    }
}
