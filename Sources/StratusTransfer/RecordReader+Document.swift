import Foundation
import Stratus

/// An open container in a JSON array or envelope being streamed.
struct Frame {
    enum Kind {
        /// An array of records: the top level of `.json`, or `records` in an envelope or zone.
        case records
        /// `zones` of a `changes/zone` answer: objects with a zoneID and records.
        case zones
        /// `operations` of a `records/modify` request.
        case operations
        /// `recordResults` of a CKTool JS answer (records lookup, record changes).
        case recordResults
        /// The envelope object.
        case envelope
        /// One entry of `zones`.
        case zone
    }

    enum State {
        /// Just opened: the first item or the closing bracket comes next.
        case open
        /// An item comes next.
        case item
        /// A comma or the closing bracket comes next.
        case afterItem
    }

    var kind: Kind
    var state = State.open
    /// The zone of records inside that name none.
    var zoneID: RecordZone.ID?
    /// A zone entry read whole ahead of its records that has no `zoneID`: its records' zone is
    /// unknown, and they are rejected.
    var namesNoZone = false
    /// The keys of an envelope or zone entry read so far: a key given twice makes the document
    /// ambiguous (JSON parsers keep one or the other), so it is refused.
    /// A box: the reader's loop holds a copy of the top frame while a member is read, and
    /// adding to a set a copy shares would copy it whole, for each member.
    let keys = FrameKeys()
    /// The zone records of this envelope or zone entry were read into before its `zoneID`
    /// came (beyond what the reader looks ahead): a later `zoneID` naming another zone is refused.
    var zoneUsedBeforeZoneID: RecordZone.ID?
    /// The object is larger than the reader looks ahead and no `zoneID` was found in what it
    /// read: whether it names one is known only further on.
    var zoneBeyondLookAhead = false
    /// A zone entry's `reason`, read before its `serverErrorCode` (CloudKit's order), for the
    /// message that rejects the entry.
    var reason: String?

    var close: UInt8 { kind == .envelope || kind == .zone ? UInt8(ascii: "}") : UInt8(ascii: "]") }

    var name: String {
        switch kind {
        case .records: "the array of records"
        case .zones: "'zones'"
        case .operations: "'operations'"
        case .recordResults: "'recordResults'"
        case .envelope: "the envelope"
        case .zone: "a zone entry"
        }
    }
}

/// What one envelope member turned out to be.
private enum Member {
    case open(Frame.Kind)
    case continuationMarker(String?)
    case syncToken(String?)
    /// `"moreComing": true`: the answer is one page of more.
    case moreComing
    case zone(RecordZone.ID, offset: Int)
    /// A `changes/zone` entry that is an error result: its zone's changes are not in the answer.
    case zoneError(code: String, offset: Int)
    /// A zone entry's `reason`, which says why its zone is an error result.
    case reason(String)
    /// The `record` of a CKTool JS record answer (`CKDBRecordResponse`: `{"record": {…}}`, what
    /// `getRecord`, `createRecord` and `updateRecord` answer): the one record, read next.
    case singleRecord
    case skipped
}

extension RecordReader {
    var currentZone: RecordZone.ID {
        for frame in frames.reversed() { if let zone = frame.zoneID { return zone } }
        return options.zoneID
    }

    func nextInDocument() throws -> RecordReadResult? {
        while true {
            guard let top = frames.last else {
                guard let b = try peekSignificant() else { return nil }
                // Envelope named by the caller: a record or an array of them is another format,
                // refused before any of it is read rather than after it was imported.
                let envelopeAsked = options.format == .envelope
                if b == UInt8(ascii: "[") {
                    if envelopeAsked { throw fatal(at: input.start, Self.notAnEnvelope("a JSON array of records")) }
                    input.start += 1
                    frames.append(Frame(kind: .records))
                    continue
                }
                guard b == UInt8(ascii: "{") else {
                    throw fatal(at: input.start, "expected a record, an array of records or an envelope, found \(JSONCursor.describe(b))")
                }
                if try startsEnvelope() {
                    var absent = false, beyond = false
                    let zone = try lookAheadForZoneID(sawWholeObjectWithout: &absent, beyondLookAhead: &beyond)
                    input.start += 1
                    var envelope = Frame(kind: .envelope, zoneID: zone)
                    envelope.zoneBeyondLookAhead = beyond
                    frames.append(envelope)
                    continue
                }
                if envelopeAsked { throw fatal(at: input.start, Self.notAnEnvelope("a record object")) }
                return try recordUnit()
            }
            let last = frames.count - 1
            switch top.state {
            case .open, .afterItem:
                guard let b = try peekSignificant() else {
                    throw fatal(at: input.end, "the input ends inside \(top.name)")
                }
                if b == top.close {
                    input.start += 1
                    frames.removeLast()
                    continue
                }
                if top.state == .afterItem {
                    guard b == UInt8(ascii: ",") else {
                        throw fatal(at: input.start, "expected ',' or '\(Character(Unicode.Scalar(top.close)))' in \(top.name), found \(JSONCursor.describe(b))")
                    }
                    input.start += 1
                }
                frames[last].state = .item
            case .item:
                frames[last].state = .afterItem
                switch top.kind {
                case .records:
                    return try recordUnit()
                case .operations:
                    return try operationUnit()
                case .recordResults:
                    return try recordResultUnit()
                case .zones:
                    guard let b = try peekSignificant() else { throw fatal(at: input.end, "the input ends inside 'zones'") }
                    guard b == UInt8(ascii: "{") else {
                        throw fatal(at: input.start, "an entry of 'zones' must be an object, found \(JSONCursor.describe(b))")
                    }
                    var entryHasNoZone = false, beyond = false
                    let zone = try lookAheadForZoneID(sawWholeObjectWithout: &entryHasNoZone, beyondLookAhead: &beyond)
                    input.start += 1
                    var entry = Frame(kind: .zone, zoneID: zone)
                    entry.namesNoZone = entryHasNoZone
                    entry.zoneBeyondLookAhead = beyond
                    frames.append(entry)
                case .envelope, .zone:
                    if let rejected = try readMember(of: top.kind, frame: last) { return rejected }
                }
            }
        }
    }

    /// Why input read as an envelope is not one.
    static func notAnEnvelope(_ found: String) -> String {
        "the input was given as an envelope (--format envelope: a CloudKit answer or request, {\"records\": […]}), and it starts with \(found); give its own format (ndjson, json), or leave the format to be detected"
    }

    /// Whether the object at `input.start` is an envelope rather than a record.
    private func startsEnvelope() throws -> Bool {
        // A read may move the bytes, so the place to return to is kept as an input offset.
        let start = input.baseOffset + input.start
        let isEnvelope = try withCursor(depth: 0) { (c) throws(ScanFailure) -> Bool in try Self.isEnvelope(&c) }
        input.start = start - input.baseOffset
        return isEnvelope
    }

    /// The `zoneID` of the envelope or zone entry whose `{` is at `input.start`, wherever it
    /// stands among the object's members: a `records/modify` request may put it after its
    /// operations, and JSON gives its members no order. The object is buffered for this up to
    /// the record size limit; past it, the zone applies from where it appears, and one that
    /// comes after records read into another zone is refused then.
    ///
    /// Tells in `absent` whether the whole object was read and has no `zoneID` member (not: one
    /// further than the look-ahead, or one that does not read), and in `beyond` whether the
    /// object is larger than the look-ahead and its part read has none.
    private func lookAheadForZoneID(sawWholeObjectWithout absent: inout Bool, beyondLookAhead beyond: inout Bool) throws -> RecordZone.ID? {
        while true {
            var c = JSONCursor(base: input.storage, limit: input.end, isComplete: input.isEOF, pos: input.start, depth: frames.count)
            do throws(ScanFailure) {
                guard try c.openObject() else { return nil }
                repeat {
                    let key = try c.scanKey()
                    if c.stringEquals(key, "zoneID") {
                        let start = c.pos
                        var name = Token.none, owner = Token.none
                        try c.scanZoneID(name: &name, owner: &owner, in: "zoneID")
                        guard c.problem == nil else { return nil }
                        return try? c.zoneID(name: name, owner: owner, at: start, what: "zoneID")
                    }
                    _ = try c.scanValue()
                } while try c.nextMember(close: UInt8(ascii: "}"), in: "the envelope")
                absent = true
                return nil
            } catch {
                // Broken JSON is named by the reading that follows, where it stands.
                guard case .needMore = error else { return nil }
                guard input.available <= options.maximumRecordSize else {
                    beyond = true
                    return nil
                }
                guard try input.fill(minimum: max(input.refillMinimum, input.available)) else { return nil }
            }
        }
    }

    /// Reads one member of an envelope or zone entry; answers the rejection a zone entry that
    /// is an error result makes.
    private func readMember(of kind: Frame.Kind, frame index: Int) throws -> RecordReadResult? {
        let where_ = kind == .envelope ? "the envelope" : "a zone entry"
        var keyText = ""
        let keys = frames[index].keys
        func seen(_ key: String) -> Bool { keys.names.contains(Array(key.utf8)) }
        let member = try withCursor(depth: frames.count) { (c) throws(ScanFailure) -> Member in
            let key = try c.scanKey()
            keyText = c.string(key)
            if seen(keyText) {
                throw c.syntax(key.start, "the key '\(c.quoted(key))' appears twice in \(where_)")
            }
            // CloudKit answers a zone with its records or with an error, never both: an entry
            // that holds both is ambiguous (its records may be what the error says is missing),
            // and refused whichever comes first.
            if kind == .zone && ((c.stringEquals(key, "records") && seen("serverErrorCode"))
                                 || (c.stringEquals(key, "serverErrorCode") && seen("records"))) {
                throw c.syntax(key.start, "a zone entry holds both 'records' and 'serverErrorCode' (a CloudKit error result); CloudKit answers a zone with one or the other")
            }
            // An envelope is one kind of answer or request: a `changes/zone` answer's records are
            // whole versions, which other lists beside them would blur (and the other way round).
            if kind == .envelope {
                let lists: [StaticString] = ["records", "zones", "operations", "recordResults"]
                if let given = lists.first(where: { c.stringEquals(key, $0) }).map({ "\($0)" }),
                   let other = lists.map({ "\($0)" }).first(where: { $0 != given && seen($0) }) {
                    throw c.syntax(key.start, "the envelope holds both '\(other)' and '\(given)'; a CloudKit answer or request holds one list of records: import each as a file of its own")
                }
            }
            if c.stringEquals(key, "records")
                || (kind == .envelope && (c.stringEquals(key, "zones") || c.stringEquals(key, "operations") || c.stringEquals(key, "recordResults"))) {
                let b = try c.peek()
                guard b == UInt8(ascii: "[") else {
                    throw c.syntax(c.pos, "'\(c.quoted(key))' in \(where_) must be an array, found \(JSONCursor.describe(b))")
                }
                c.pos += 1
                if c.stringEquals(key, "records") { return .open(.records) }
                if c.stringEquals(key, "recordResults") { return .open(.recordResults) }
                return .open(c.stringEquals(key, "zones") ? .zones : .operations)
            }
            // CKTool JS's record answer holds its record alone (``isEnvelope(_:)`` opens one only
            // so): `record` after an envelope's other members is no answer, and nothing is guessed.
            if kind == .envelope && c.stringEquals(key, "record") {
                guard keys.names.isEmpty else {
                    throw c.syntax(key.start, "'record' beside other members: a CKTool JS record answer ({\"record\": {…}}) holds its record alone, and a records/modify operation goes in an 'operations' array")
                }
                return .singleRecord
            }
            // CKTool JS's answers name the marker continuationToken.
            if c.stringEquals(key, "continuationMarker") || c.stringEquals(key, "continuationToken") || c.stringEquals(key, "syncToken") {
                let value = try c.scanValue()
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                let text: String?
                switch value.kind {
                case .string: text = c.string(value)
                case .null: text = nil
                default: throw c.syntax(value.start, "'\(c.quoted(key))' must be a string, not \(value.kindName)")
                }
                return c.stringEquals(key, "syncToken") ? .syncToken(text) : .continuationMarker(text)
            }
            if c.stringEquals(key, "moreComing") {
                let value = try c.scanValue()
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                // Anything but a boolean would say nothing of the zone's other changes, silently.
                guard value.kind == .trueLiteral || value.kind == .falseLiteral else {
                    throw c.syntax(value.start, "'moreComing' must be true or false, not \(value.kindName)")
                }
                return value.kind == .trueLiteral ? .moreComing : .skipped
            }
            if c.stringEquals(key, "zoneID") {
                let start = c.pos
                var name = Token.none, owner = Token.none
                try c.scanZoneID(name: &name, owner: &owner, in: "zoneID")
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                do throws(FieldError) {
                    return .zone(try c.zoneID(name: name, owner: owner, at: start, what: "zoneID"), offset: key.start)
                } catch {
                    throw c.syntax(error.offset, "the zoneID of \(where_) is not valid: \(error.message)")
                }
            }
            if kind == .zone && c.stringEquals(key, "serverErrorCode") {
                // CloudKit answers a zone it could not read (ZONE_NOT_FOUND, USER_DELETED_ZONE,
                // CHANGE_TOKEN_EXPIRED…) with an error entry instead of its records.
                let value = try c.scanValue()
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                guard value.kind == .string else { throw c.syntax(value.start, "'serverErrorCode' must be a string, not \(value.kindName)") }
                return .zoneError(code: c.string(value), offset: key.start)
            }
            if kind == .zone && c.stringEquals(key, "reason") {
                let value = try c.scanValue()
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                return value.kind == .string ? .reason(c.quoted(value)) : .skipped
            }
            // Request and paging details (syncToken aside) shape CloudKit's answer, not the records.
            _ = try c.scanValue()
            if let problem = c.problem { throw c.syntax(problem.offset, "'\(c.quoted(key))' in \(where_) holds invalid JSON: \(problem.message)") }
            return .skipped
        }
        keys.names.insert(Array(keyText.utf8))
        if kind == .envelope && (keyText == "syncToken" || keyText == "moreComing") { envelopeSaidChanges = true }
        switch member {
        case .open(let child):
            if child == .records || child == .operations || child == .recordResults { sawRecordList = true }
            if child == .records && kind == .envelope { envelopeHeldRecords = true }
            frames.append(Frame(kind: child))
        case .continuationMarker(let text):
            continuationMarker = text
        case .syncToken(let text):
            syncToken = text
        case .moreComing:
            moreComing = true
        case .zone(let zone, let offset):
            if let used = frames[index].zoneUsedBeforeZoneID, used != zone {
                throw fatal(at: offset, "the zoneID of \(where_) (zone '\(zone.zoneName)') comes after records that name no zone, more than \(options.maximumRecordSize) bytes into it, and they were read into zone '\(used.zoneName)'; write the zoneID before the records")
            }
            frames[index].zoneID = zone
        case .zoneError(let code, let offset):
            // An answer for zones, even if every one failed: not "a file without records".
            sawRecordList = true
            let zone = frames[index].zoneID.map { "the changes of zone '\($0.zoneName)'" } ?? "a zone's changes"
            let reason = frames[index].reason.map { ", 'reason' \($0)" } ?? ""
            return result(.rejected(offset: offset, recordName: nil, message: "\(zone) are a CloudKit error result ('serverErrorCode' \(code)\(reason)), not records: this answer does not hold them"), recordStart: offset)
        case .reason(let text):
            frames[index].reason = text
        case .singleRecord:
            sawRecordList = true
            return try recordUnit()
        case .skipped:
            break
        }
        return nil
    }

    /// Reads one element of a records array.
    private func recordUnit() throws -> RecordReadResult {
        let zone = currentZone
        let zoneIsKnown = frames.contains { $0.zoneID != nil }
        let fromAnswer = frames.contains { $0.kind == .envelope }
        let entry = frames.last { $0.kind == .zone }
        if entry != nil && !readChangesAnswerRecord { readChangesAnswerRecord = true }
        let entryNamesNoZone = entry?.namesNoZone == true
        // A record's nesting counts from the record, as on an NDJSON line: an export's envelope
        // or array around records an NDJSON import took must not make them too deep.
        let (decoded, recordStart) = try withCursor(depth: 0) { (c) throws(ScanFailure) -> (DecodedRecord, Int) in
            let b = try c.peek()
            let start = c.pos
            guard b == UInt8(ascii: "{") else {
                let value = try c.scanValue()
                return (.rejected(offset: start, recordName: nil, message: "expected a record object, found \(value.kindName)"), start)
            }
            try c.scanRecord(&scan)
            if entryNamesNoZone && !scan.hasZone {
                let name: String? = scan.recordName.isPresent ? c.string(scan.recordName) : nil
                return (.rejected(offset: start, recordName: name, message: "the entry of 'zones' that holds the record names no zoneID, so the record's zone is unknown (a changes/zone answer names each entry's zone)"), start)
            }
            return (c.materialize(scan, zone: zone, zoneIsKnown: zoneIsKnown, fromAnswer: fromAnswer, context: context), start)
        }
        if !zoneIsKnown, !scan.hasZone, !decoded.isRejected {
            try checkZoneKnownBeyondLookAhead(recordStart: recordStart)
            noteZoneUsed(zone)
        }
        return result(decoded, recordStart: recordStart)
    }

    /// Refuses, before its first record is read, a record list whose envelope or zone entry is
    /// larger than the look-ahead without a `zoneID` in its first part, when the caller did not
    /// choose the zone: its records' zone is unknown until the `zoneID` (if any) comes, and
    /// guessing the default zone would write them over the records stored there.
    private func checkZoneKnownBeyondLookAhead(recordStart: Int) throws {
        guard !options.zoneIsChosen, !frames.contains(where: { $0.zoneID != nil }),
              let frame = frames.last(where: { $0.zoneBeyondLookAhead }), frame.zoneUsedBeforeZoneID == nil else { return }
        let what = frame.kind == .envelope ? "the envelope" : "an entry of 'zones'"
        throw fatal(at: recordStart, "\(what) is larger than \(options.maximumRecordSize) bytes and names no zoneID before its records within them, so the zone of its records that name none is unknown before they are read: write its zoneID before its records, or choose the zone (stratus import --zone ZONE: the zone its zoneID names, or _defaultZone when it names none); none of them was read")
    }

    /// Notes that a record naming no zone went into `zone` while no envelope or zone entry
    /// around it had given its zoneID yet.
    private func noteZoneUsed(_ zone: RecordZone.ID) {
        for index in frames.indices where frames[index].kind == .envelope || frames[index].kind == .zone {
            if frames[index].zoneUsedBeforeZoneID == nil { frames[index].zoneUsedBeforeZoneID = zone }
        }
    }

    /// Reads one element of a list whose objects each wrap a record (`operations`,
    /// `recordResults`): anything but an object is rejected as not `what`; `read` gets the
    /// cursor on the object's `{`, its offset, the zone its record goes into without one of its
    /// own and whether that zone is known, and answers what it decoded and where the record starts.
    private func wrappedRecordUnit(
        _ what: String, _ read: (inout JSONCursor, _ start: Int, _ zone: RecordZone.ID, _ zoneIsKnown: Bool) throws(ScanFailure) -> (DecodedRecord, Int)
    ) throws -> RecordReadResult {
        let zone = currentZone
        let zoneIsKnown = frames.contains { $0.zoneID != nil }
        // Nesting counts from the unit (see recordUnit()).
        let (decoded, recordStart) = try withCursor(depth: 0) { (c) throws(ScanFailure) -> (DecodedRecord, Int) in
            // The unit starts at its first byte, after the whitespace before it: a deleted
            // record's result is read again from here.
            let first = try c.peek()
            let start = c.pos
            guard first == UInt8(ascii: "{") else {
                let value = try c.scanValue()
                return (.rejected(offset: start, recordName: nil, message: "expected \(what), found \(value.kindName)"), start)
            }
            return try read(&c, start, zone, zoneIsKnown)
        }
        if !zoneIsKnown, !scan.hasZone, !decoded.isRejected {
            try checkZoneKnownBeyondLookAhead(recordStart: recordStart)
            noteZoneUsed(zone)
        }
        return result(decoded, recordStart: recordStart)
    }

    /// Reads one operation of a `records/modify` request.
    private func operationUnit() throws -> RecordReadResult {
        let depth = 0
        return try wrappedRecordUnit("an operation object") { (c, start, zone, zoneIsKnown) throws(ScanFailure) -> (DecodedRecord, Int) in
            let (type, recordOffset) = try c.scanOperation()
            if let problem = c.problem { return (.rejected(offset: problem.offset, recordName: nil, message: problem.message), start) }
            guard recordOffset >= 0 else { return (.rejected(offset: start, recordName: nil, message: "the operation has no record"), start) }
            var sub = JSONCursor(base: c.base, limit: c.pos, isComplete: true, pos: recordOffset, depth: depth + 1)
            try sub.scanRecord(&scan)
            let name: String? = scan.recordName.isPresent ? sub.string(scan.recordName) : nil
            guard type.isPresent else {
                return (.rejected(offset: start, recordName: name, message: "the operation has no operationType"), recordOffset)
            }
            let operation = c.string(type)
            switch operation {
            case "create", "update", "forceUpdate", "replace", "forceReplace":
                if let mode = savingMode, mode.rawValue != operation {
                    return (.rejected(offset: type.start, recordName: name, message: "the operation '\(operation)' would be saved as \(mode.rawValue) (the import's mode), which CloudKit does differently; import the request's \(operation) operations with --mode \(operation) (RecordImporter.Options.writeMode)"), recordOffset)
                }
                // CloudKit Web Services names a created record without a recordName with a random
                // UUID: here one drawn from the reader's seed (random unless set), the operation's
                // bytes and its place, so that a chunk boundary elsewhere names the same record.
                let generated = operation == "create" && !scan.recordName.isPresent
                    ? Self.generatedRecordName(seed: generatedNameSeed, UnsafeRawBufferPointer(start: c.base + start, count: c.pos - start), at: input.baseOffset + start) : nil
                // A request's records are the client's, not an answer's: what they leave out (a
                // change tag, dates, a zoneID) the store gives them, and reads show it.
                return (sub.materialize(scan, zone: zone, zoneIsKnown: zoneIsKnown, fromAnswer: false, nameIfAbsent: generated, context: context), recordOffset)
            case "forceDelete":
                // As a change feed's deletion: applied by name when deletions are read (stratus import).
                return (sub.materializeDeletion(scan, zone: zone, operation: operation, at: type.start, readsFields: false, context: context), recordOffset)
            case "delete":
                // CloudKit deletes only while the record's change tag still matches; a deletion
                // applied by name would delete a version the request never saw.
                return (.rejected(offset: type.start, recordName: name, message: "the operation 'delete' deletes the record only while its change tag matches, which importing does not compare; write it as forceDelete to delete the record whatever its version"), recordOffset)
            default:
                return (.rejected(offset: type.start, recordName: name, message: "unknown operationType '\(c.quoted(type))'"), recordOffset)
            }
        }
    }

    /// Reads one element of a CKTool JS answer's `recordResults` (`CKDBLookupRecordsResponse`,
    /// `CKDBRecordChangesResponse`), told apart by the members CKTool JS documents for each: a
    /// found record's result (`{"type", "recordName", "record"}`) gives its record; an error
    /// result (`{"type", "recordName", "errorCode", "message"}`) is rejected naming its code, as
    /// CloudKit Web Services' `serverErrorCode` items are; a deleted record's result (`{"type",
    /// "recordName"}`) is a deletion, as a changes answer's tombstone is.
    private func recordResultUnit() throws -> RecordReadResult {
        let depth = 0
        let readsDeletions = context.readsDeletions
        return try wrappedRecordUnit("a record result object") { (c, start, zone, zoneIsKnown) throws(ScanFailure) -> (DecodedRecord, Int) in
            let (strings, recordOffset) = try c.scanRecordWrapper("the record result", keys: ["recordName", "errorCode", "message"])
            let name: String? = strings[0].isPresent ? c.string(strings[0]) : nil
            if let problem = c.problem { return (.rejected(offset: problem.offset, recordName: name, message: problem.message), start) }
            if strings[1].isPresent {
                let message = strings[2].isPresent ? ", 'message' \(c.quoted(strings[2]))" : ""
                return (.rejected(offset: strings[1].start, recordName: name, message: "the item is a CloudKit error result ('errorCode' \(c.quoted(strings[1]))\(message)), not a record"), start)
            }
            if recordOffset >= 0 {
                var sub = JSONCursor(base: c.base, limit: c.pos, isComplete: true, pos: recordOffset, depth: depth + 1)
                try sub.scanRecord(&scan)
                return (sub.materialize(scan, zone: zone, zoneIsKnown: zoneIsKnown, fromAnswer: true, context: context), recordOffset)
            }
            guard readsDeletions else {
                return (.rejected(offset: start, recordName: name, message: "the item is a deleted record's result, which deletes the record; this reader saves records and never deletes them (readsDeletions reads deletions)"), start)
            }
            var sub = JSONCursor(base: c.base, limit: c.pos, isComplete: true, pos: start, depth: depth)
            try sub.scanRecord(&scan)
            // Only the deleted result's own shape (and a zone, as CKTool JS names one) deletes:
            // a misspelt 'record' must not.
            if let other = scan.otherMembers.first(where: { !sub.stringEquals($0.key, "type") && !sub.stringEquals($0.key, "zone") }) {
                return (.rejected(offset: other.key.start, recordName: name, message: "the record result has no 'record' and no 'errorCode', and holds '\(sub.quoted(other.key))', which a deleted record's result ({\"type\", \"recordName\"}) does not; it is not read as a deletion"), start)
            }
            return (sub.materializeDeletion(scan, zone: zone, operation: "deleted record result", at: start, context: context), start)
        }
    }

    /// A UUID (version 4's form) made from the SHA-256 of a seed, an operation's bytes and its
    /// offset in the input.
    static func generatedRecordName(seed: [UInt8], _ bytes: UnsafeRawBufferPointer, at offset: Int) -> String {
        var hasher = SHA256Hasher()
        withUnsafeBytes(of: Int64(seed.count).littleEndian) { hasher.update($0) }
        seed.withUnsafeBytes { hasher.update($0) }
        hasher.update(bytes)
        withUnsafeBytes(of: Int64(offset).littleEndian) { hasher.update($0) }
        var digest = Array(hasher.finalize().bytes.prefix(16))
        digest[6] = digest[6] & 0x0F | 0x40
        digest[8] = digest[8] & 0x3F | 0x80
        let uuid = digest.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
        return UUID(uuid: uuid).uuidString
    }

    /// Turns offsets (valid until the next read) into lines and columns.
    private func result(_ decoded: DecodedRecord, recordStart: Int) -> RecordReadResult {
        input.count(upTo: input.baseOffset + recordStart)
        let line = input.position(of: input.baseOffset + recordStart).line
        return readResult(decoded, line: line) { self.input.position(of: self.input.baseOffset + $0) }
    }
}

/// The keys of an envelope or zone entry read so far (``Frame/keys``), by their bytes: keys
/// that differ only in Unicode normalization are different keys.
final class FrameKeys {
    var names: Set<[UInt8]> = []
}
