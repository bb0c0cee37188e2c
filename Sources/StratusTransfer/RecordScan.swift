import Foundation
import Stratus

/// One field of a record object as scanned: tokens only, converted once the whole record is
/// known (its type, schema and zone may come after the fields).
struct PendingField {
    var name: Token
    var type: Token
    var value: Token
    var isEncrypted: Bool
}

/// The tokens of one CloudKit record object, gathered in one pass without allocating.
struct RecordScan {
    var start = 0
    var recordName = Token.none
    var recordType = Token.none
    var changeTag = Token.none
    var createdTime = Token.none
    var createdUser = Token.none
    var modifiedTime = Token.none
    var modifiedUser = Token.none
    var hasZone = false
    var zoneName = Token.none
    var zoneOwner = Token.none
    var zoneStart = 0
    var parent = Token.none
    /// `"deleted": true`: the item is a deletion (a change feed's tombstone).
    var deletion = Token.none
    var fields: [PendingField] = []
    var seen: UInt32 = 0

    mutating func reset(start: Int) {
        self.start = start
        recordName = .none
        recordType = .none
        changeTag = .none
        createdTime = .none
        createdUser = .none
        modifiedTime = .none
        modifiedUser = .none
        hasZone = false
        zoneName = .none
        zoneOwner = .none
        parent = .none
        deletion = .none
        fields.removeAll(keepingCapacity: true)
        seen = 0
    }
}

extension JSONCursor {
    // MARK: - Records

    /// Scans a record object at `pos` (which holds `{`) into `scan`. Unknown keys and wrong
    /// kinds of value are noted (the record is rejected), never dropped.
    mutating func scanRecord(_ scan: inout RecordScan) throws(ScanFailure) {
        scan.reset(start: pos)
        guard try openObject() else { return }
        repeat {
            let key = try scanKey()
            try scanRecordMember(key, &scan)
        } while try nextMember(close: UInt8(ascii: "}"), in: "a record")
        depth -= 1
    }

    private mutating func scanRecordMember(_ key: Token, _ scan: inout RecordScan) throws(ScanFailure) {
        // The common keys by length first, so most keys cost one comparison.
        if key.flags & Token.hasEscape == 0 {
            let at = key.start + 1
            switch key.end - key.start - 2 {
            case 6 where matches(at, "fields"):
                if scan.seen & (1 << 2) != 0 { note(key.start, "the key 'fields' appears twice") }
                scan.seen |= 1 << 2
                try scanFields(&scan.fields)
                return
            case 10 where matches(at, "recordName"):
                try scanOnce(&scan.recordName, key, bit: 1 << 0, &scan.seen, kind: .string)
                return
            case 10 where matches(at, "recordType"):
                try scanOnce(&scan.recordType, key, bit: 1 << 1, &scan.seen, kind: .string)
                return
            case 6 where matches(at, "zoneID"):
                if scan.seen & (1 << 3) != 0 { note(key.start, "the key 'zoneID' appears twice") }
                scan.seen |= 1 << 3
                scan.hasZone = true
                scan.zoneStart = pos
                try scanZoneID(name: &scan.zoneName, owner: &scan.zoneOwner, in: "zoneID")
                return
            default:
                break
            }
        }
        if stringEquals(key, "recordName") {
            try scanOnce(&scan.recordName, key, bit: 1 << 0, &scan.seen, kind: .string)
        } else if stringEquals(key, "recordType") {
            try scanOnce(&scan.recordType, key, bit: 1 << 1, &scan.seen, kind: .string)
        } else if stringEquals(key, "fields") {
            if scan.seen & (1 << 2) != 0 { note(key.start, "the key 'fields' appears twice") }
            scan.seen |= 1 << 2
            try scanFields(&scan.fields)
        } else if stringEquals(key, "zoneID") {
            if scan.seen & (1 << 3) != 0 { note(key.start, "the key 'zoneID' appears twice") }
            scan.seen |= 1 << 3
            scan.hasZone = true
            scan.zoneStart = pos
            try scanZoneID(name: &scan.zoneName, owner: &scan.zoneOwner, in: "zoneID")
        } else if stringEquals(key, "recordChangeTag") {
            try scanOnce(&scan.changeTag, key, bit: 1 << 4, &scan.seen, kind: .string)
        } else if stringEquals(key, "created") {
            if scan.seen & (1 << 5) != 0 { note(key.start, "the key 'created' appears twice") }
            scan.seen |= 1 << 5
            try scanAuthorship(time: &scan.createdTime, user: &scan.createdUser, in: "created")
        } else if stringEquals(key, "modified") {
            if scan.seen & (1 << 6) != 0 { note(key.start, "the key 'modified' appears twice") }
            scan.seen |= 1 << 6
            try scanAuthorship(time: &scan.modifiedTime, user: &scan.modifiedUser, in: "modified")
        } else if stringEquals(key, "parent") {
            let value = try scanValue()
            if scan.seen & (1 << 7) != 0 { note(key.start, "the key 'parent' appears twice") }
            scan.seen |= 1 << 7
            switch value.kind {
            case .object: scan.parent = value
            case .null: break
            default: note(value.start, "'parent' must be an object with a recordName, not \(value.kindName)")
            }
        } else if stringEquals(key, "deleted") {
            let value = try scanValue()
            switch value.kind {
            case .falseLiteral: break
            case .trueLiteral: scan.deletion = value
            default: note(value.start, "'deleted' must be true or false, not \(value.kindName)")
            }
        } else if stringEquals(key, "pluginFields") {
            let value = try scanValue()
            if value.kind != .object || !isEmptyContainer(value) {
                note(key.start, "'pluginFields' holds data, which this version cannot keep; the record is rejected rather than losing it")
            }
        } else if stringEquals(key, "expirationTime") {
            let value = try scanValue()
            if value.kind != .number { note(value.start, "'expirationTime' must be a number, not \(value.kindName)") }
        } else if stringEquals(key, "serverErrorCode") || stringEquals(key, "reason") {
            let value = try scanValue()
            let code = value.kind == .string ? " \(quoted(value))" : ""
            note(key.start, "the item is a CloudKit error result ('\(quoted(key))'\(code)), not a record")
        } else {
            _ = try scanValue()
            note(key.start, "unknown key '\(quoted(key))'; this version cannot keep it, so the record is rejected rather than losing it")
        }
    }

    /// Scans a value that must be of `kind` and appear once.
    private mutating func scanOnce(_ slot: inout Token, _ key: Token, bit: UInt32, _ seen: inout UInt32, kind: Token.Kind) throws(ScanFailure) {
        let value = try scanValue()
        if seen & bit != 0 { note(key.start, "the key '\(quoted(key))' appears twice") }
        seen |= bit
        if value.kind == kind {
            slot = value
        } else {
            note(value.start, "'\(quoted(key))' must be \(Token(kind: kind, start: 0, end: 0, flags: 0).kindName), not \(value.kindName)")
        }
    }

    /// Opens the object a member named `what` holds and answers whether it has members; a
    /// value of another kind is noted and skipped (false).
    private mutating func openMemberObject(_ what: StaticString) throws(ScanFailure) -> Bool {
        guard try peek() == UInt8(ascii: "{") else {
            let value = try scanValue()
            note(value.start, "'\(what)' must be an object, not \(value.kindName)")
            return false
        }
        return try openObject()
    }

    /// Scans `"fields": {"name": {"value": …, "type": …}, …}`.
    private mutating func scanFields(_ fields: inout [PendingField]) throws(ScanFailure) {
        guard try openMemberObject("fields") else { return }
        repeat {
            let name = try scanKey()
            if try peek() == UInt8(ascii: "{") {
                var field = PendingField(name: name, type: .none, value: .none, isEncrypted: false)
                try scanField(&field)
                fields.append(field)
            } else {
                let value = try scanValue()
                note(value.start, "field '\(quoted(name))' must be an object like {\"value\": …, \"type\": …}, not \(value.kindName)")
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "'fields'")
        depth -= 1
    }

    private mutating func scanField(_ field: inout PendingField) throws(ScanFailure) {
        guard try openObject() else { return }
        repeat {
            let key = try scanKey()
            let value = try scanValue()
            // stringEquals compares a key without escapes as bytes: no String is made.
            if stringEquals(key, "value") {
                if field.value.isPresent { note(key.start, "field '\(quoted(field.name))' has the key 'value' twice") }
                field.value = value
            } else if stringEquals(key, "type") {
                if field.type.isPresent { note(key.start, "field '\(quoted(field.name))' has the key 'type' twice") }
                if value.kind == .string {
                    field.type = value
                } else {
                    note(value.start, "field '\(quoted(field.name))': 'type' must be a string, not \(value.kindName)")
                }
            } else if stringEquals(key, "isEncrypted") {
                switch value.kind {
                case .trueLiteral: field.isEncrypted = true
                case .falseLiteral: break
                default: note(value.start, "field '\(quoted(field.name))': 'isEncrypted' must be true or false, not \(value.kindName)")
                }
            } else {
                note(key.start, "field '\(quoted(field.name))' has an unknown key '\(quoted(key))'; this version keeps only 'value', 'type' and 'isEncrypted'")
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "a field")
        depth -= 1
    }

    /// Scans `{"timestamp": ms, "userRecordName": name, "deviceID": …}`; the device is CloudKit
    /// bookkeeping that Stratus has no place for and that carries no record data.
    private mutating func scanAuthorship(time: inout Token, user: inout Token, in what: StaticString) throws(ScanFailure) {
        guard try openMemberObject(what) else { return }
        var seen: UInt32 = 0
        repeat {
            let key = try scanKey()
            if stringEquals(key, "timestamp") {
                try scanOnce(&time, key, bit: 1, &seen, kind: .number)
            } else if stringEquals(key, "userRecordName") {
                try scanOnce(&user, key, bit: 2, &seen, kind: .string)
            } else if stringEquals(key, "deviceID") {
                _ = try scanValue()
            } else {
                _ = try scanValue()
                note(key.start, "'\(what)' has an unknown key '\(quoted(key))'; this version cannot keep it")
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "an object")
        depth -= 1
    }

    /// Scans `{"zoneName", "ownerRecordName", "zoneType"}`. The zone type is implied by the
    /// zone (default or custom) and carries no data, so it is understood and not kept.
    mutating func scanZoneID(name: inout Token, owner: inout Token, in what: StaticString) throws(ScanFailure) {
        guard try openMemberObject(what) else { return }
        var seen: UInt32 = 0
        var zoneType = Token.none
        repeat {
            let key = try scanKey()
            if stringEquals(key, "zoneName") {
                try scanOnce(&name, key, bit: 1, &seen, kind: .string)
            } else if stringEquals(key, "ownerRecordName") {
                try scanOnce(&owner, key, bit: 2, &seen, kind: .string)
            } else if stringEquals(key, "zoneType") {
                try scanOnce(&zoneType, key, bit: 4, &seen, kind: .string)
            } else {
                _ = try scanValue()
                note(key.start, "'\(what)' has an unknown key '\(quoted(key))'")
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "a zone ID")
        depth -= 1
    }

    // MARK: - Operations

    /// Scans a `records/modify` operation `{"operationType": …, "record": {…}}`: answers the
    /// operation type token and the record's offset (or -1 when there is none).
    mutating func scanOperation() throws(ScanFailure) -> (type: Token, record: Int) {
        var type = Token.none
        var record = -1
        guard try openObject() else { return (type, record) }
        repeat {
            let key = try scanKey()
            if stringEquals(key, "record") {
                if try peek() == UInt8(ascii: "{") { record = pos }
                let value = try scanValue()
                if value.kind != .object { note(value.start, "'record' must be an object, not \(value.kindName)") }
            } else if stringEquals(key, "operationType") {
                let value = try scanValue()
                if value.kind == .string { type = value } else { note(value.start, "'operationType' must be a string, not \(value.kindName)") }
            } else {
                // Request options such as desiredKeys shape the server's answer, not the record.
                _ = try scanValue()
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "an operation")
        depth -= 1
        return (type, record)
    }
}
