/// CloudKit's rules for names, checked before anything reaches a store.
///
/// ```swift
/// if name.utf8.count > Naming.maximumRecordNameLength { throw StratusError(.invalidArguments, "name too long") }
/// let allowed = !Naming.reservedFieldKeys.contains("title")
/// ```
public enum Naming {
    /// Longest record name CloudKit accepts, in bytes.
    public static let maximumRecordNameLength = 255
    /// Longest record type, field or zone name accepted.
    public static let maximumIdentifierLength = 255

    /// Field keys a record cannot set, because they name system fields in predicates, sort
    /// descriptors and CSV columns. `parent` and `share` are not among them: CloudKit's keys for
    /// those system fields are `___parent` and `___share` (``Record/SystemFieldKey``), and
    /// CloudKit schemas declare fields named `parent` (`parent STRING QUERYABLE`).
    public static let reservedFieldKeys: Set<String> = [
        "recordName", "recordID", "recordType", "creationDate", "creatorUserRecordID",
        "modificationDate", "lastModifiedUserRecordID", "recordChangeTag", "encryptedValues",
    ]

    /// Bit n set: a reserved key is n bytes long (they are all shorter than 64).
    private static let reservedKeyLengths: UInt64 = reservedFieldKeys.reduce(0) { $0 | 1 << UInt64($1.utf8.count) }

    /// Throws `invalidArguments` unless `name` is ASCII, 1–255 characters, without a leading `_`.
    public static func checkRecordName(_ name: String, allowSystemNames: Bool = false) throws(StratusError) {
        // Runs for every saved record, so it walks the UTF-8 view without copying it.
        let bytes = name.utf8
        try checkPrintableASCII(bytes, what: "record name", limit: maximumRecordNameLength, tooLong: "record name")
        if !allowSystemNames && bytes.first == UInt8(ascii: "_") {
            throw StratusError(.invalidArguments, "record name '\(shown(recordName: name))' starts with '_', which CloudKit reserves for the system")
        }
    }

    /// A record name as messages show it: whole when it could be a record name, else its first
    /// 40 characters (an input may hold a name of megabytes, which each message would repeat).
    package static func shown(recordName name: String) -> String {
        name.utf8.count <= maximumRecordNameLength ? name : "\(name.prefix(40))…"
    }

    /// Whether `text` holds a control character (U+0000–U+001F, U+007F), which no name or
    /// change tag CloudKit writes holds, and at whose NUL a store's text would end.
    package static func containsControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// Throws `invalidArguments` for empty `bytes`, more than `limit` of them, or a non-ASCII
    /// or control character; `what` and `tooLong` name the value in the messages. Walks the
    /// UTF-8 view without copying it (this runs for every saved record).
    private static func checkPrintableASCII(_ bytes: String.UTF8View, what: String, limit: Int,
                                            tooLong: @autoclosure () -> String) throws(StratusError) {
        if bytes.isEmpty { throw StratusError(.invalidArguments, "\(what) is empty") }
        if bytes.count > limit {
            throw StratusError(.invalidArguments, "\(tooLong()) is \(bytes.count) bytes long; the limit is \(limit)")
        }
        var offset = 0
        for byte in bytes {
            offset += 1
            if byte >= 0x80 || byte < 0x20 || byte == 0x7F {
                throw StratusError(.invalidArguments, "\(what) has a non-ASCII or control character at byte \(offset)")
            }
        }
    }

    /// Throws `invalidArguments` unless `name` starts with an ASCII letter followed by letters, digits or `_`.
    public static func checkIdentifier(_ name: String, kind: String) throws(StratusError) {
        let bytes = name.utf8
        guard let first = bytes.first else { throw StratusError(.invalidArguments, "\(kind) is empty") }
        if bytes.count > maximumIdentifierLength {
            throw StratusError(.invalidArguments, "\(kind) '\(name.prefix(40))…' is longer than \(maximumIdentifierLength) characters")
        }
        guard isLetter(first) else {
            throw StratusError(.invalidArguments, "\(kind) '\(name)' must start with a letter (A–Z or a–z)")
        }
        var position = 0
        for byte in bytes {
            position += 1
            if !(isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "_")) {
                throw StratusError(.invalidArguments, "\(kind) '\(name)' has a character other than a letter, digit or '_' at position \(position)")
            }
        }
    }

    /// Checks a key of `desiredKeys`: an identifier, or CloudKit's key for a record's parent or
    /// share (``Record/SystemFieldKey``, `___parent`, `___share`), which apps name to ask for
    /// them (a record comes with both whatever keys are desired).
    ///
    /// ```swift
    /// try Naming.checkDesiredKey(Record.SystemFieldKey.share)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the key.
    public static func checkDesiredKey(_ key: String) throws(StratusError) {
        if key == Record.SystemFieldKey.parent || key == Record.SystemFieldKey.share { return }
        try checkIdentifier(key, kind: "desired key")
    }

    /// Checks a field key: an identifier that is not a reserved system field name; with
    /// `allowSystemNames` also the dotted keys of CloudKit's own records (`cloudkit.title`).
    public static func checkFieldKey(_ key: String, allowSystemNames: Bool = false) throws(StratusError) {
        if allowSystemNames && isSystemIdentifier(key) { return }
        try checkIdentifier(key, kind: "field name")
        // Runs for every field of every saved record: most keys differ in length from every
        // reserved one, which spares hashing them.
        let length = key.utf8.count
        if length < 64 && reservedKeyLengths & (1 << UInt64(length)) != 0 && reservedFieldKeys.contains(key) {
            throw StratusError(.invalidArguments, "field name '\(key)' is reserved for a system field")
        }
    }

    /// Checks a zone name as CloudKit does: `CKRecordZone.ID(zoneName:ownerName:)` says zone names
    /// "consist of up to 255 ASCII characters, and don't start with an underscore", the default
    /// zone's `_defaultZone` aside. So `SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932` and
    /// `com.apple.notes` are zone names; control characters are refused too.
    ///
    /// ```swift
    /// try Naming.checkZoneName("SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public static func checkZoneName(_ name: String) throws(StratusError) {
        if name == RecordZone.ID.defaultZoneName { return }
        // No zone CloudKit makes is named so, and a store's URL kept as a zone's name would be
        // printed by every listing, password and all.
        if name.contains("://") {
            throw StratusError(.invalidArguments, "a zone name cannot be a URL (it is not repeated here: it may hold a password)")
        }
        let bytes = name.utf8
        try checkPrintableASCII(bytes, what: "zone name", limit: maximumIdentifierLength, tooLong: "zone name '\(name.prefix(40))…'")
        if bytes.first == UInt8(ascii: "_") {
            throw StratusError(.invalidArguments, "zone name '\(name)' starts with '_', which CloudKit reserves (only its default zone, _defaultZone, has such a name)")
        }
    }

    /// Checks an owner record name of a zone ID: CloudKit's user record names (`_` and 32
    /// hexadecimal digits), `__defaultOwner__`, or any other record name; ASCII, 1–255 bytes.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public static func checkOwnerName(_ name: String) throws(StratusError) {
        do {
            try checkRecordName(name, allowSystemNames: true)
        } catch {
            throw StratusError(.invalidArguments, "owner record name: \(error.message)")
        }
    }

    /// Whether `name` is a record type or field key of CloudKit's own records: identifiers
    /// joined by `.` (`cloudkit.share`, the record type of shares, and its `cloudkit.title`).
    public static func isSystemIdentifier(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count > 1, name.utf8.count <= maximumIdentifierLength else { return false }
        return parts.allSatisfy { part in
            guard let first = part.utf8.first, isLetter(first) else { return false }
            return part.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
        }
    }

    /// Checks a record type: an identifier, or with `allowSystemNames` also the dotted names of
    /// CloudKit's own record types (``isSystemIdentifier(_:)``).
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public static func checkRecordType(_ name: String, allowSystemNames: Bool = false) throws(StratusError) {
        if allowSystemNames && isSystemIdentifier(name) { return }
        do {
            try checkIdentifier(name, kind: "record type")
        } catch where !allowSystemNames && isSystemIdentifier(name) {
            throw StratusError(.invalidArguments, "record type '\(name)' is one of CloudKit's own (names with '.' are); keep CloudKit's system records with --keep-system-records (RecordReadOptions.keepsSystemRecords)")
        }
    }

    /// Checks the record type of a record kept as CloudKit made it (an import with
    /// `--keep-system-records`, a copy): an identifier, or one of CloudKit's own dotted types,
    /// which are under `cloudkit.` (`cloudkit.share`). Another dotted type would grow a schema
    /// that no schema file can declare.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public static func checkKeptRecordType(_ name: String) throws(StratusError) {
        try checkRecordType(name, allowSystemNames: true)
        if name.utf8.contains(UInt8(ascii: ".")) && !RecordTypeSchema.isCloudKitRecordType(name) {
            throw StratusError(.invalidArguments, "record type '\(name)' has a '.', which only CloudKit's own types have (they start with 'cloudkit.', as cloudkit.share)")
        }
    }

    /// Checks a field key of a record kept as CloudKit made it: dotted keys (`cloudkit.title`)
    /// belong to CloudKit's own types only.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public static func checkKeptFieldKey(_ key: String, recordType: String) throws(StratusError) {
        let ofCloudKitType = RecordTypeSchema.isCloudKitRecordType(recordType)
        do {
            try checkFieldKey(key, allowSystemNames: ofCloudKitType)
        } catch where !ofCloudKitType && isSystemIdentifier(key) {
            throw StratusError(.invalidArguments, "field name '\(key)' has a '.', which only the fields of CloudKit's own types have (cloudkit.share's cloudkit.title), not those of \(recordType)")
        }
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b >= 65 && b <= 90) || (b >= 97 && b <= 122) }
    private static func isDigit(_ b: UInt8) -> Bool { b >= 48 && b <= 57 }
}
