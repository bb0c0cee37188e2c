import Foundation
import Stratus

/// A problem with one value: where it is and what is wrong, naming the field.
struct FieldError: Error {
    var offset: Int
    var message: String
}

/// What the decoder needs besides the bytes: defaults, schemas and policies.
struct DecodeContext {
    let defaultZone: RecordZone.ID
    /// Field types by record type, then by field name, from the read options' schemas.
    let schemaTypes: [String: [String: FieldType]]
    let assetDirectory: URL?

    init(options: RecordReadOptions) {
        defaultZone = options.zoneID
        var types: [String: [String: FieldType]] = [:]
        for (recordType, schema) in options.schemas {
            types[recordType] = Dictionary(schema.fields.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
        }
        schemaTypes = types
        assetDirectory = options.assetDirectory
    }
}

/// The outcome of decoding one record object.
enum DecodedRecord {
    case record(Record)
    case rejected(offset: Int, recordName: String?, message: String)
}

extension JSONCursor {
    /// Builds the record from a finished scan, or says why it cannot be one.
    func materialize(_ scan: RecordScan, zone contextZone: RecordZone.ID, context: DecodeContext) -> DecodedRecord {
        let name: String? = scan.recordName.isPresent ? string(scan.recordName) : nil
        if let problem {
            return .rejected(offset: problem.offset, recordName: name, message: problem.message)
        }
        do throws(FieldError) {
            return .record(try buildRecord(scan, name: name, zone: contextZone, context: context))
        } catch {
            return .rejected(offset: error.offset, recordName: name, message: error.message)
        }
    }

    private func buildRecord(_ scan: RecordScan, name: String?, zone contextZone: RecordZone.ID, context: DecodeContext) throws(FieldError) -> Record {
        guard let name else { throw FieldError(offset: scan.start, message: "the record has no recordName") }
        if !Self.isPlainRecordName(scan.recordName, base) {
            do { try Naming.checkRecordName(name) } catch { throw FieldError(offset: scan.recordName.start, message: error.message) }
        }
        guard scan.recordType.isPresent else { throw FieldError(offset: scan.start, message: "the record has no recordType") }
        let recordType = string(scan.recordType)
        if !Self.isPlainIdentifier(scan.recordType, base) {
            do { try Naming.checkIdentifier(recordType, kind: "record type") } catch {
                throw FieldError(offset: scan.recordType.start, message: error.message)
            }
        }
        var zoneID = contextZone
        if scan.hasZone {
            zoneID = try self.zoneID(name: scan.zoneName, owner: scan.zoneOwner, at: scan.zoneStart, what: "zoneID")
        }

        var system = Record.SystemFields()
        if scan.changeTag.isPresent { system.recordChangeTag = string(scan.changeTag) }
        if scan.createdTime.isPresent { system.creationDate = try date(scan.createdTime, "'created' timestamp") }
        if scan.modifiedTime.isPresent { system.modificationDate = try date(scan.modifiedTime, "'modified' timestamp") }
        if scan.createdUser.isPresent { system.creatorUserRecordID = Record.ID(recordName: string(scan.createdUser)) }
        if scan.modifiedUser.isPresent { system.lastModifiedUserRecordID = Record.ID(recordName: string(scan.modifiedUser)) }

        var parent: Record.Reference?
        if scan.parent.isPresent {
            parent = try reference(scan.parent, what: "the parent", zone: zoneID)
            if parent?.action != Record.ReferenceAction.none {
                throw FieldError(offset: scan.parent.start, message: "the parent reference's action must be NONE")
            }
        }

        let schema = context.schemaTypes.isEmpty ? nil : context.schemaTypes[recordType]
        var values: [String: FieldValue] = [:]
        values.reserveCapacity(scan.fields.count)
        var order: [(String, FieldValue?, Bool)] = []
        order.reserveCapacity(scan.fields.count)
        var nullKeys: [String] = []
        var encryptedKeys: Set<String> = []
        for field in scan.fields {
            let key = string(field.name)
            if !Self.isPlainIdentifier(field.name, base) || Self.mayBeReserved(field.name, base) {
                do { try Naming.checkFieldKey(key) } catch { throw FieldError(offset: field.name.start, message: error.message) }
            }
            let (value, encrypted) = try fieldValue(field, key: key, schema: schema, zone: zoneID, context: context)
            if encrypted && value != nil { encryptedKeys.insert(key) }
            let duplicate: Bool
            if let value {
                duplicate = values.updateValue(value, forKey: key) != nil || (!nullKeys.isEmpty && nullKeys.contains(key))
            } else {
                duplicate = values[key] != nil || nullKeys.contains(key)
                nullKeys.append(key)
            }
            if duplicate { throw FieldError(offset: field.name.start, message: "field '\(key)' appears twice") }
            order.append((key, value, encrypted))
        }
        let record = Record(
            recordType: recordType, recordID: Record.ID(recordName: name, zoneID: zoneID), systemFields: system,
            fields: consume values, encryptedKeys: encryptedKeys)
        // Marks every key as changed, so a save writes them all (and removes the null ones).
        for (key, value, encrypted) in order { record.setValue(value, forKey: key, encrypted: encrypted) }
        if let parent { record.parent = parent }
        return record
    }

    /// A zone ID from its tokens; the owner defaults to the current user.
    func zoneID(name: Token, owner: Token, at offset: Int, what: String) throws(FieldError) -> RecordZone.ID {
        guard name.isPresent else { throw FieldError(offset: offset, message: "'\(what)' has no zoneName") }
        let zoneName = string(name)
        if zoneName != RecordZone.ID.defaultZoneName && !Self.isPlainIdentifier(name, base) {
            do { try Naming.checkZoneName(zoneName) } catch { throw FieldError(offset: name.start, message: error.message) }
        }
        return RecordZone.ID(zoneName: zoneName, ownerName: owner.isPresent ? string(owner) : RecordZone.ID.currentUserDefaultOwner)
    }

    private func date(_ token: Token, _ what: String) throws(FieldError) -> Date {
        guard let date = timestamp(token) else {
            throw FieldError(offset: token.start, message: "\(what) \(numberText(token)) is out of range")
        }
        return date
    }

    // MARK: - Name checks on bytes

    /// Whether a string token is a record name CloudKit accepts: ASCII without control
    /// characters, 1–255 bytes, no leading `_`. Anything else goes to ``Naming`` for its message.
    static func isPlainRecordName(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        guard token.flags & Token.hasEscape == 0 else { return false }
        let count = token.end - token.start - 2
        guard count >= 1 && count <= Naming.maximumRecordNameLength else { return false }
        let start = token.start + 1
        if base[start] == UInt8(ascii: "_") { return false }
        for i in start..<start + count where base[i] < 0x20 || base[i] >= 0x7F { return false }
        return true
    }

    /// Whether a plain key could be one of ``Naming/reservedFieldKeys`` (all start with one of
    /// these letters); only then is the set asked, which saves hashing every key.
    static func mayBeReserved(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        switch base[token.start + 1] {
        case UInt8(ascii: "r"), UInt8(ascii: "c"), UInt8(ascii: "m"), UInt8(ascii: "l"), UInt8(ascii: "p"), UInt8(ascii: "s"), UInt8(ascii: "e"):
            let count = token.end - token.start - 2
            return count >= 5 && count <= 24
        default:
            return false
        }
    }

    /// Whether a string token is an identifier: a letter, then letters, digits and `_`.
    static func isPlainIdentifier(_ token: Token, _ base: UnsafePointer<UInt8>) -> Bool {
        guard token.flags & Token.hasEscape == 0 else { return false }
        let count = token.end - token.start - 2
        guard count >= 1 && count <= Naming.maximumIdentifierLength else { return false }
        let start = token.start + 1
        let first = base[start] | 0x20
        guard first >= UInt8(ascii: "a") && first <= UInt8(ascii: "z") else { return false }
        for i in start + 1..<start + count where !isWordByte(base[i]) { return false }
        return true
    }
}
