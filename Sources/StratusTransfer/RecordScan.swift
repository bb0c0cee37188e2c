import Foundation
import Stratus

/// One field of a record object as scanned: tokens only, converted once the whole record is
/// known (its type, schema and zone may come after the fields).
struct PendingField {
    var name: Token
    var type: Token
    var value: Token
    var isEncrypted: Bool
    /// The whole `{"value": …, "type": …}` object, kept as it came when writing the typed
    /// value back would give other JSON.
    var object = Token.none
    /// Keys besides `value`, `type` and `isEncrypted`: the field is kept as it came.
    var keepsText = false
    /// `"isEncrypted": false`, which a writer leaves out.
    var saysNotEncrypted = false
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
    /// The zone came from CKTool JS's `"zone"` member, not from `"zoneID"`: the record is
    /// placed by it, and it goes back as it came (a kept member), without a `zoneID`.
    var zoneFromZoneMember = false
    var zoneName = Token.none
    var zoneOwner = Token.none
    var zoneStart = 0
    /// Members of the zone ID besides its name and owner (`zoneType`).
    var zoneOther: [(key: Token, value: Token)] = []
    var hasCreated = false
    var hasModified = false
    /// Members of `created` and `modified` besides the timestamp and user (`deviceID`).
    var createdOther: [(key: Token, value: Token)] = []
    var modifiedOther: [(key: Token, value: Token)] = []
    /// Members of the record Stratus has no place for, kept as they came.
    var otherMembers: [(key: Token, value: Token)] = []
    /// The keys of ``otherMembers`` once they are many, for finding a repeated one: by their
    /// bytes, as ``sameKey(_:_:)`` compares (keys that differ in normalization differ).
    var otherMemberNames: Set<[UInt8]> = []
    var parent = Token.none
    /// `"deleted": true`: the item is a deletion (a change feed's tombstone).
    var deletion = Token.none
    /// `serverErrorCode` and `reason`: the item is a CloudKit error result, not a record. Named
    /// once the whole item is read, at the first of them, whichever order they came in.
    var errorCode = Token.none
    var errorReason = Token.none
    var errorResultStart: Int?
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
        zoneFromZoneMember = false
        zoneName = .none
        zoneOwner = .none
        if !zoneOther.isEmpty { zoneOther.removeAll(keepingCapacity: true) }
        hasCreated = false
        hasModified = false
        if !createdOther.isEmpty { createdOther.removeAll(keepingCapacity: true) }
        if !modifiedOther.isEmpty { modifiedOther.removeAll(keepingCapacity: true) }
        if !otherMembers.isEmpty { otherMembers.removeAll(keepingCapacity: true) }
        if !otherMemberNames.isEmpty { otherMemberNames.removeAll() }
        parent = .none
        deletion = .none
        errorCode = .none
        errorReason = .none
        errorResultStart = nil
        fields.removeAll(keepingCapacity: true)
        seen = 0
    }

    /// The member that named the zone, for messages.
    var zoneKey: String { zoneFromZoneMember ? "zone" : "zoneID" }

    /// Marks the record's `zoneID` as its zone: it wins over a CKTool JS `"zone"` read before it.
    mutating func takeZoneID() {
        hasZone = true
        if zoneFromZoneMember {
            zoneFromZoneMember = false
            zoneName = .none
            zoneOwner = .none
        }
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
        if let start = scan.errorResultStart { noteErrorResult(scan, at: start) }
    }

    /// Names an error result by its code, which says what happened, then its reason: CloudKit
    /// writes `reason` first, a tool that sorted or rebuilt the answer may not.
    private mutating func noteErrorResult(_ scan: RecordScan, at start: Int) {
        // The first problem in the item is the one named, as when noted while scanning.
        if let earlier = problem, earlier.offset < start { return }
        func part(_ name: String, _ value: Token) -> String? {
            guard value.kind != .none else { return nil }
            return value.kind == .string ? "'\(name)' \(quoted(value))" : "'\(name)'"
        }
        let parts = [part("serverErrorCode", scan.errorCode), part("reason", scan.errorReason)].compactMap { $0 }
        problem = Problem(offset: start, message: "the item is a CloudKit error result (\(parts.joined(separator: ", "))), not a record")
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
                scan.takeZoneID()
                scan.zoneStart = pos
                try scanZoneID(name: &scan.zoneName, owner: &scan.zoneOwner, other: &scan.zoneOther, in: "zoneID")
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
            scan.takeZoneID()
            scan.zoneStart = pos
            try scanZoneID(name: &scan.zoneName, owner: &scan.zoneOwner, other: &scan.zoneOther, in: "zoneID")
        } else if stringEquals(key, "recordChangeTag") {
            try scanOnce(&scan.changeTag, key, bit: 1 << 4, &scan.seen, kind: .string)
        } else if stringEquals(key, "created") {
            if scan.seen & (1 << 5) != 0 { note(key.start, "the key 'created' appears twice") }
            scan.seen |= 1 << 5
            scan.hasCreated = true
            try scanAuthorship(time: &scan.createdTime, user: &scan.createdUser, other: &scan.createdOther, in: "created")
        } else if stringEquals(key, "modified") {
            if scan.seen & (1 << 6) != 0 { note(key.start, "the key 'modified' appears twice") }
            scan.seen |= 1 << 6
            scan.hasModified = true
            try scanAuthorship(time: &scan.modifiedTime, user: &scan.modifiedUser, other: &scan.modifiedOther, in: "modified")
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
            // Given twice, JSON readers keep one or the other: a deletion or not, ambiguous.
            if scan.seen & (1 << 8) != 0 { note(key.start, "the key 'deleted' appears twice") }
            scan.seen |= 1 << 8
            switch value.kind {
            case .falseLiteral: keepMember(key, value, &scan)
            case .trueLiteral: scan.deletion = value
            default: note(value.start, "'deleted' must be true or false, not \(value.kindName)")
            }
        } else if stringEquals(key, "zone") {
            // CKTool JS (CloudKit's management API) names a record's zone `"zone": {"zoneName",
            // "canonicalName", "zoneType", "ownerRecordName"}`. It places the record as a
            // `zoneID` would (which wins when both are given), and goes back as it came.
            let value = try scanValue()
            keepMember(key, value, &scan)
            if value.kind == .object && scan.seen & (1 << 3) == 0 {
                var zone = JSONCursor(base: base, limit: value.end, isComplete: true, pos: value.start)
                var name = Token.none, owner = Token.none
                var other: [(key: Token, value: Token)] = []
                do throws(ScanFailure) {
                    try zone.scanZoneID(name: &name, owner: &owner, other: &other, in: "zone")
                } catch {
                    note(value.start, "'zone' is not a zone ID")
                }
                if let problem = zone.problem { note(problem.offset, problem.message) }
                scan.hasZone = true
                scan.zoneFromZoneMember = true
                scan.zoneStart = value.start
                scan.zoneName = name
                scan.zoneOwner = owner
            } else if value.kind != .object && value.kind != .null {
                note(value.start, "'zone' must be an object with a zoneName, not \(value.kindName)")
            }
        } else if stringEquals(key, "serverErrorCode") || stringEquals(key, "reason") {
            let value = try scanValue()
            if scan.errorResultStart == nil { scan.errorResultStart = key.start }
            if stringEquals(key, "serverErrorCode") {
                if scan.errorCode.kind == .none { scan.errorCode = value }
            } else if scan.errorReason.kind == .none {
                scan.errorReason = value
            }
        } else {
            // pluginFields, expirationTime, share, a share's participants, keys CloudKit adds
            // later: kept as they came, written back as they came.
            keepMember(key, try scanValue(), &scan)
        }
    }

    /// Keeps a member of the record that Stratus has no place for, once.
    private mutating func keepMember(_ key: Token, _ value: Token, _ scan: inout RecordScan) {
        // A few are compared in place; many (a crafted record) through a set, so that a record
        // costs time in proportion to its size.
        if scan.otherMembers.count < 32 {
            for (other, _) in scan.otherMembers where sameKey(other, key) {
                note(key.start, "the key '\(quoted(key))' appears twice")
                return
            }
        } else {
            if scan.otherMemberNames.isEmpty { scan.otherMemberNames = Set(scan.otherMembers.map { Array(string($0.key).utf8) }) }
            guard scan.otherMemberNames.insert(Array(string(key).utf8)).inserted else {
                note(key.start, "the key '\(quoted(key))' appears twice")
                return
            }
        }
        scan.otherMembers.append((key, value))
    }

    /// Whether two key tokens spell the same key.
    func sameKey(_ a: Token, _ b: Token) -> Bool {
        if a.flags & Token.hasEscape == 0 && b.flags & Token.hasEscape == 0 {
            let count = a.end - a.start
            return count == b.end - b.start && memcmp(base + a.start, base + b.start, count) == 0
        }
        return string(a) == string(b)
    }

    /// Scans a value that must be of `kind` and appear once.
    private mutating func scanOnce(_ slot: inout Token, _ key: Token, bit: UInt32, _ seen: inout UInt32, kind: Token.Kind, or other: Token.Kind? = nil) throws(ScanFailure) {
        let value = try scanValue()
        if seen & bit != 0 { note(key.start, "the key '\(quoted(key))' appears twice") }
        seen |= bit
        if value.kind == kind || value.kind == other {
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
                let start = pos
                try scanField(&field)
                field.object = Token(kind: .object, start: start, end: pos, flags: 0)
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
                if field.isEncrypted || field.saysNotEncrypted { note(key.start, "field '\(quoted(field.name))' has the key 'isEncrypted' twice") }
                switch value.kind {
                case .trueLiteral: field.isEncrypted = true
                case .falseLiteral: field.saysNotEncrypted = true
                default: note(value.start, "field '\(quoted(field.name))': 'isEncrypted' must be true or false, not \(value.kindName)")
                }
            } else {
                // Kept with the field as it came.
                field.keepsText = true
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "a field")
        depth -= 1
    }

    /// Scans `{"timestamp": ms, "userRecordName": name, "deviceID": …}`; the device and any
    /// other member are kept as they came (`other`).
    private mutating func scanAuthorship(time: inout Token, user: inout Token, other: inout [(key: Token, value: Token)], in what: StaticString) throws(ScanFailure) {
        guard try openMemberObject(what) else { return }
        var seen: UInt32 = 0
        repeat {
            let key = try scanKey()
            if stringEquals(key, "timestamp") {
                // Milliseconds in CloudKit Web Services' records, an ISO 8601 date-time in the management API's.
                try scanOnce(&time, key, bit: 1, &seen, kind: .number, or: .string)
            } else if stringEquals(key, "userRecordName") {
                try scanOnce(&user, key, bit: 2, &seen, kind: .string)
            } else {
                let value = try scanValue()
                if other.contains(where: { sameKey($0.key, key) }) { note(key.start, "'\(what)' has the key '\(quoted(key))' twice") }
                other.append((key, value))
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "an object")
        depth -= 1
    }

    /// Scans `{"zoneName", "ownerRecordName", "zoneType"}`; members besides the name and owner
    /// (`zoneType`) are kept as they came.
    mutating func scanZoneID(name: inout Token, owner: inout Token, in what: StaticString) throws(ScanFailure) {
        var other: [(key: Token, value: Token)] = []
        try scanZoneID(name: &name, owner: &owner, other: &other, in: what)
    }

    mutating func scanZoneID(name: inout Token, owner: inout Token, other: inout [(key: Token, value: Token)], in what: StaticString) throws(ScanFailure) {
        guard try openMemberObject(what) else { return }
        var seen: UInt32 = 0
        repeat {
            let key = try scanKey()
            if stringEquals(key, "zoneName") {
                try scanOnce(&name, key, bit: 1, &seen, kind: .string)
            } else if stringEquals(key, "ownerRecordName") {
                try scanOnce(&owner, key, bit: 2, &seen, kind: .string)
            } else {
                let value = try scanValue()
                if other.contains(where: { sameKey($0.key, key) }) { note(key.start, "'\(what)' has the key '\(quoted(key))' twice") }
                other.append((key, value))
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: "a zone ID")
        depth -= 1
    }

    // MARK: - Operations

    /// Scans a `records/modify` operation `{"operationType": …, "record": {…}}`: answers the
    /// operation type token and the record's offset (or -1 when there is none).
    mutating func scanOperation() throws(ScanFailure) -> (type: Token, record: Int) {
        let (strings, record) = try scanRecordWrapper("the operation", keys: ["operationType"])
        return (strings[0], record)
    }

    /// Scans an object that wraps one record (a `records/modify` operation, a CKTool JS record
    /// result): answers the tokens of its string members named by `keys` (`Token.none` for one
    /// it lacks) and the offset of its `record` object (or -1 when there is none). `what` names
    /// the object in messages (`the operation`).
    mutating func scanRecordWrapper(_ what: StaticString, keys: [StaticString]) throws(ScanFailure) -> (strings: [Token], record: Int) {
        var strings = [Token](repeating: .none, count: keys.count)
        var record = -1
        guard try openObject() else { return (strings, record) }
        var seen: [Token] = []
        repeat {
            let key = try scanKey()
            // A key given twice leaves which record or operation is meant to the parser.
            if seen.contains(where: { sameKey($0, key) }) { note(key.start, "\(what) has the key '\(quoted(key))' twice") }
            seen.append(key)
            if stringEquals(key, "record") {
                if try peek() == UInt8(ascii: "{") { record = pos }
                let value = try scanValue()
                if value.kind != .object { note(value.start, "'record' must be an object, not \(value.kindName)") }
            } else if let index = keys.firstIndex(where: { stringEquals(key, $0) }) {
                let value = try scanValue()
                if value.kind == .string { strings[index] = value } else { note(value.start, "'\(keys[index])' must be a string, not \(value.kindName)") }
            } else {
                // Request options such as desiredKeys shape the server's answer, not the record.
                _ = try scanValue()
            }
        } while try nextMember(close: UInt8(ascii: "}"), in: what)
        depth -= 1
        return (strings, record)
    }
}
