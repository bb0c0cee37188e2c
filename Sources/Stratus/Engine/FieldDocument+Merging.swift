import Foundation

extension FieldDocument {
    // MARK: - Changes written over a stored document

    /// The changed fields of a save as one document: each changed key in key order with its
    /// new value, or `null` for a removed key. ``merging(_:into:)`` writes it over a stored
    /// document without decoding either.
    ///
    /// ```swift
    /// let changes = FieldDocument.encodedChanges(["price": .double(1.1), "note": nil])   // {"note":null,"price":["F",1.1]}
    /// ```
    public static func encodedChanges(_ changes: [String: FieldValue?]) -> [UInt8] {
        var out = ByteOutput()
        out.append(UInt8(ascii: "{"))
        out.appendInKeyOrder(changes, separator: UInt8(ascii: ",")) { key, value, out in
            out.appendString(key)
            out.append(UInt8(ascii: ":"))
            if let value { appendValue(value, to: &out) } else { out.append("null") }
        }
        out.append(UInt8(ascii: "}"))
        return Array(out.bytes)
    }

    /// How many bytes of field data (``Record/fieldDataSize``) a document can hold per
    /// character of its text, at most: an element of an asset list is five characters (`"",`
    /// and `0,`) for 40 bytes; every other value spends more characters per byte counted. A
    /// stored document of `n` characters thus holds at most `8 × n` bytes of field data, which
    /// bounds a merged record's size without decoding the stored one.
    public static let maximumFieldDataPerCharacter = 8

    /// The stored document `stored` with the members of `changes` (see
    /// ``encodedChanges(_:)``) written over it: a changed key's value replaces the stored one
    /// or is added in key order, a `null` removes the key. Stored values are copied as they
    /// are, without decoding; the result is what encoding the merged fields gives when the
    /// stored document is in the encoder's form. A document with members beyond the fields
    /// (encrypted keys, JSON extras, whose merge is a save's policy) is not merged: answers
    /// false, and `out` holds nothing of use.
    ///
    /// ```swift
    /// let merged = try FieldDocument.merging(changes, into: stored)   // nil: not a document of fields only
    /// ```
    ///
    /// - Throws: ``StratusError`` `.internalError` when either is not a document.
    package static func merging(_ changes: UnsafeBufferPointer<UInt8>, into stored: UnsafeBufferPointer<UInt8>, out: inout ByteOutput) throws(StratusError) -> Bool {
        guard let storedBase = stored.baseAddress, let changesBase = changes.baseAddress else { throw corrupt("the document is empty") }
        var old = JSONCursor(base: storedBase, limit: stored.count, isComplete: true, endName: "end of the document", pos: 0)
        var new = JSONCursor(base: changesBase, limit: changes.count, isComplete: true, endName: "end of the changes", pos: 0)
        let mark = out.count
        do {
            switch try mergeInOrder(&old, &new, into: &out) {
            case .merged: return true
            case .notFieldsOnly: return false
            case .outOfOrder: break
            }
            // Keys out of order, or spelled with escapes: merged by their decoded names.
            out.removeAll(from: mark)
            old.pos = 0
            old.depth = 0
            new.pos = 0
            new.depth = 0
            return try mergeByName(&old, &new, into: &out)
        } catch {
            throw corrupt(error)
        }
    }

    /// ``merging(_:into:out:)`` into a new byte array; `nil` for a document that holds more
    /// than fields.
    ///
    /// - Throws: ``StratusError`` `.internalError` when either is not a document.
    package static func merging(_ changes: [UInt8], into stored: [UInt8]) throws(StratusError) -> [UInt8]? {
        var out = ByteOutput(capacity: stored.count + changes.count)
        let merged = try changes.withUnsafeBufferPointer { (changes) throws(StratusError) in
            try stored.withUnsafeBufferPointer { (stored) throws(StratusError) in try merging(changes, into: stored, out: &out) }
        }
        return merged ? Array(out.bytes) : nil
    }

    /// How a merge in key order ended.
    private enum OrderedMerge {
        case merged
        /// A member of the stored document is not a field (its name starts with `~`).
        case notFieldsOnly
        /// A key is out of order or spelled with an escape: merge by name instead.
        case outOfOrder
    }

    /// Whether a key's text (in quotes) names what is not a field: `~encrypted`, `~json`.
    private static func isSpecial(_ cursor: JSONCursor, _ key: JSONCursor.Token) -> Bool {
        key.end - key.start > 2 && cursor.base[key.start + 1] == UInt8(ascii: "~")
    }


    /// The next member of the object `cursor` reads, or `nil` at its end; `started` says
    /// whether the opening brace was read.
    private static func nextMember(_ cursor: inout JSONCursor, started: inout Bool) throws(JSONCursor.Failure) -> (key: JSONCursor.Token, value: JSONCursor.Token)? {
        if !started {
            started = true
            try cursor.expect(UInt8(ascii: "{"), "an object")
            if cursor.consume(UInt8(ascii: "}")) { return try finished(&cursor) }
        } else if !(try cursor.nextMember(close: UInt8(ascii: "}"), in: "the document")) {
            return try finished(&cursor)
        }
        let key = try cursor.scanKey()
        let value = try cursor.scanValue()
        return (key, value)
    }

    private static func finished(_ cursor: inout JSONCursor) throws(JSONCursor.Failure) -> (key: JSONCursor.Token, value: JSONCursor.Token)? {
        cursor.skipSpace()
        if cursor.pos < cursor.limit {
            throw cursor.syntax(cursor.pos, "unexpected \(JSONCursor.describe(cursor.base[cursor.pos])) after the document")
        }
        if let problem = cursor.problem { throw .syntax(offset: problem.offset, message: problem.message) }
        return nil
    }

    /// Whether `a`'s key text sorts before `b`'s (bytes; plain keys only).
    private static func compareKeys(_ a: JSONCursor, _ ka: JSONCursor.Token, _ b: JSONCursor, _ kb: JSONCursor.Token) -> Int32 {
        let la = ka.end - ka.start - 2, lb = kb.end - kb.start - 2
        let common = memcmp(a.base + ka.start + 1, b.base + kb.start + 1, min(la, lb))
        if common != 0 { return common }
        return la == lb ? 0 : (la < lb ? -1 : 1)
    }

    /// Merges two documents whose keys are plain and in increasing order, in one pass over
    /// each (`out` partly written when it does not answer ``OrderedMerge/merged``).
    private static func mergeInOrder(_ old: inout JSONCursor, _ new: inout JSONCursor, into out: inout ByteOutput) throws(JSONCursor.Failure) -> OrderedMerge {
        var oldStarted = false, newStarted = false
        var oldMember = try nextMember(&old, started: &oldStarted)
        var newMember = try nextMember(&new, started: &newStarted)
        var previousOld: JSONCursor.Token?
        var previousNew: JSONCursor.Token?
        var first = true
        func isPlain(_ key: JSONCursor.Token) -> Bool { key.flags & JSONCursor.Token.hasEscape == 0 }
        func emit(_ cursor: JSONCursor, _ key: JSONCursor.Token, _ value: JSONCursor.Token, _ out: inout ByteOutput) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UnsafeBufferPointer(start: cursor.base + key.start, count: key.end - key.start))
            out.append(UInt8(ascii: ":"))
            out.append(UnsafeBufferPointer(start: cursor.base + value.start, count: value.end - value.start))
        }
        out.append(UInt8(ascii: "{"))
        while oldMember != nil || newMember != nil {
            if let key = oldMember?.key {
                if isSpecial(old, key) { return .notFieldsOnly }
                guard isPlain(key), previousOld.map({ compareKeys(old, $0, old, key) < 0 }) ?? true else { return .outOfOrder }
            }
            if let key = newMember?.key {
                guard isPlain(key), previousNew.map({ compareKeys(new, $0, new, key) < 0 }) ?? true else { return .outOfOrder }
            }
            let order: Int32 = switch (oldMember, newMember) {
            case (let o?, let n?): compareKeys(old, o.key, new, n.key)
            case (nil, _): 1
            case (_, nil): -1
            }
            if order < 0, let member = oldMember {
                emit(old, member.key, member.value, &out)
                previousOld = member.key
                oldMember = try nextMember(&old, started: &oldStarted)
                continue
            }
            let member = newMember!
            if member.value.kind != .null { emit(new, member.key, member.value, &out) }
            previousNew = member.key
            newMember = try nextMember(&new, started: &newStarted)
            if order == 0 {
                previousOld = oldMember!.key
                oldMember = try nextMember(&old, started: &oldStarted)
            }
        }
        out.append(UInt8(ascii: "}"))
        return .merged
    }

    /// Merges two documents by their keys' decoded names, whatever their order (a later
    /// member of one document replaces an earlier one of the same name, as decoding does).
    private static func mergeByName(_ old: inout JSONCursor, _ new: inout JSONCursor, into out: inout ByteOutput) throws(JSONCursor.Failure) -> Bool {
        var members: [String: (fromChanges: Bool, value: JSONCursor.Token)] = [:]
        var started = false
        while let member = try nextMember(&old, started: &started) {
            let name = old.string(member.key)
            if name.hasPrefix("~") { return false }
            members[name] = (false, member.value)
        }
        started = false
        while let member = try nextMember(&new, started: &started) {
            members[new.string(member.key)] = member.value.kind == .null ? nil : (true, member.value)
        }
        out.append(UInt8(ascii: "{"))
        out.appendInKeyOrder(members, separator: UInt8(ascii: ",")) { [old, new] key, member, out in
            let cursor = member.fromChanges ? new : old
            out.appendString(key)
            out.append(UInt8(ascii: ":"))
            out.append(UnsafeBufferPointer(start: cursor.base + member.value.start, count: member.value.end - member.value.start))
        }
        out.append(UInt8(ascii: "}"))
        return true
    }
}
