import Foundation

/// Stratus's comparison, equality and ordering rules, written once: every engine implements
/// them in its own language, and the test oracle follows them.
///
/// **Stored values.** Distinct bytes are distinct values: `"café"` (NFC) and `"cafe\u{301}"`
/// (NFD), `"Ω"` (U+2126 OHM SIGN) and `"Ω"` (U+03A9), `0.0` and `-0.0` are different values,
/// so a save that changes one into the other is a change (``FieldValue``'s `==`).
///
/// **Conditions.** A condition on a field holds only where the record has a value of a fitting
/// family: strings with strings, numbers (`INT64` and `DOUBLE` together, by numeric value, so
/// `-0.0 == 0` holds) with numbers, timestamps with timestamps, references with references (by
/// record name). String equality (`==`, `!=`, `IN`) compares the full Unicode case folding of
/// both sides (``equalityKey(_:)``: `"Straße" == "STRASSE"`), without normalizing; ordering
/// comparisons, `BETWEEN`, `BEGINSWITH` and list elements compare exactly.
///
/// **Order.** Strings order by Unicode scalar values (which is the order of their UTF-8
/// bytes), numbers by value, timestamps by time, references by record name. A sort key's
/// value is *missing* when the record lacks the field or holds a value that has no order
/// (bytes, locations, assets, lists); missing values sort first ascending and last
/// descending. Values of different families order by family: numbers, then timestamps, then
/// strings, then references (a field whose type the schema declares holds one family only).
/// Ties are broken by record name, in the direction of the last sort key.
///
/// ```swift
/// QueryRules.equalityKey("Straße") == QueryRules.equalityKey("STRASSE")   // true
/// QueryRules.sortOrder(.int64(2), .string("a")) == .orderedAscending        // numbers first
/// ```
public enum QueryRules {
    // MARK: - Equality

    /// The form string equality compares: the full Unicode case folding of `text`
    /// (`"ß"` and `"ẞ"` fold to `"ss"`, `"ﬁ"` to `"fi"`, final `"ς"` to `"σ"`).
    public static func equalityKey(_ text: String) -> String {
        if isASCII(text) { return asciiLowercased(text) }
        return withFoldingsFoundationLacks(text).folding(options: [.caseInsensitive], locale: nil)
    }

    /// Unicode's CaseFolding.txt folds the old-style Cyrillic letters U+1C80–U+1C88 to ordinary
    /// lowercase ones; Foundation on Linux leaves them as they are.
    private static let foldingsFoundationLacks: [UInt32: Unicode.Scalar] = [
        0x1C80: "\u{0432}", 0x1C81: "\u{0434}", 0x1C82: "\u{043E}", 0x1C83: "\u{0441}", 0x1C84: "\u{0442}",
        0x1C85: "\u{0442}", 0x1C86: "\u{044A}", 0x1C87: "\u{0463}", 0x1C88: "\u{A64B}",
    ]

    private static func withFoldingsFoundationLacks(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { (0x1C80...0x1C88).contains($0.value) }) else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { scalars.append(foldingsFoundationLacks[scalar.value] ?? scalar) }
        return String(scalars)
    }

    /// `text` with the ASCII letters A–Z lowercased and nothing else: the folding every engine
    /// can compute in its own language (SQL's `lower()` in SQLite, `translate()` in
    /// PostgreSQL). A stored string carries its ``equalityKey(_:)`` beside it only where the two
    /// differ (see ``FieldDocument``), so ASCII text carries no second copy.
    public static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map(asciiLowercased), as: UTF8.self)
    }

    /// What ``asciiLowercased(_:)`` does to one UTF-8 byte.
    @inline(__always) public static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    /// Whether ``equalityKey(_:)`` of `text` differs from ``asciiLowercased(_:)`` of it, and if
    /// so the key: what a stored document carries beside the string.
    public static func foldedFormToStore(_ text: String) -> String? {
        guard !isASCII(text) else { return nil }
        let key = equalityKey(text)
        return key.utf8.elementsEqual(text.utf8.lazy.map(asciiLowercased)) ? nil : key
    }

    static func isASCII(_ text: String) -> Bool {
        if let ascii = text.utf8.withContiguousStorageIfAvailable({ bytes in !bytes.contains { $0 >= 0x80 } }) { return ascii }
        return !text.utf8.contains { $0 >= 0x80 }
    }

    // MARK: - Order

    /// The families of values that have an order, in the order they sort in.
    public enum OrderedFamily: Int, Comparable, Sendable {
        case number = 1, timestamp, string, reference

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The family a value sorts in, or `nil` when it has no order (it sorts as missing).
    public static func orderedFamily(of value: FieldValue) -> OrderedFamily? {
        switch value {
        case .int64, .double: .number
        case .date: .timestamp
        case .string: .string
        case .reference: .reference
        default: nil
        }
    }

    /// The value a record sorts by for `key`: `nil` when it is missing (no such field, or a
    /// value without an order). System fields sort as their values: dates as timestamps,
    /// the record name and users as strings.
    public static func sortValue(of record: Record, for key: QueryKey) -> FieldValue? {
        switch key {
        case .recordName: return .string(record.recordID.recordName)
        case .creationDate: return record.creationDate.map(FieldValue.date)
        case .modificationDate: return record.modificationDate.map(FieldValue.date)
        case .creatorUserRecordID: return record.systemFields.creatorUserRecordID.map { .string($0.recordName) }
        case .lastModifiedUserRecordID: return record.systemFields.lastModifiedUserRecordID.map { .string($0.recordName) }
        case .parent: return record.parent.map { .string($0.recordID.recordName) }
        case .field(let name):
            guard let value = record.fieldValue(forKey: name), orderedFamily(of: value) != nil else { return nil }
            return value
        }
    }

    /// ``sortValue(of:for:)`` where `schema` may declare the field's type: a field declared of
    /// a type with an order holds values of that type, and a value of another type that remains
    /// from before the declaration (a record saved before the schema retyped the field) sorts as
    /// missing, as no condition on the field matches it either. Engines index the declared
    /// field's values so (``QueryRules``), and positions in their order must agree.
    ///
    /// ```swift
    /// let value = QueryRules.sortValue(of: record, for: .field("price"), declaredIn: schema)
    /// ```
    public static func sortValue(of record: Record, for key: QueryKey, declaredIn schema: RecordTypeSchema?) -> FieldValue? {
        guard let value = sortValue(of: record, for: key) else { return nil }
        guard case .field(let name) = key, let declared = schema?.field(name).flatMap({ declaredFamily(of: $0.type) }) else { return value }
        return orderedFamily(of: value) == declared ? value : nil
    }

    /// The family the values of a field declared of `type` sort in, or `nil` when the type has
    /// no order (a sort on such a field orders whatever values it holds by their families).
    public static func declaredFamily(of type: FieldType) -> OrderedFamily? {
        switch type {
        case .int64, .double: .number
        case .timestamp: .timestamp
        case .string: .string
        case .reference: .reference
        default: nil
        }
    }

    /// How two sort values compare in ascending order (missing first).
    public static func sortOrder(_ lhs: FieldValue?, _ rhs: FieldValue?) -> ComparisonResult {
        let left = lhs.flatMap { value in orderedFamily(of: value).map { (value, $0) } }
        let right = rhs.flatMap { value in orderedFamily(of: value).map { (value, $0) } }
        switch (left, right) {
        case (nil, nil): return .orderedSame
        case (nil, _): return .orderedAscending
        case (_, nil): return .orderedDescending
        case let ((a, familyA)?, (b, familyB)?):
            if familyA != familyB { return familyA < familyB ? .orderedAscending : .orderedDescending }
            return compareWithinFamily(a, b)
        }
    }

    /// Two values of one ordered family, in ascending order.
    static func compareWithinFamily(_ a: FieldValue, _ b: FieldValue) -> ComparisonResult {
        switch (a, b) {
        case (.int64(let x), .int64(let y)): return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        case (.double(let x), .double(let y)): return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        case (.int64(let x), .double(let y)): return compare(x, y)
        case (.double(let x), .int64(let y)): return compare(y, x).reversed
        case (.date(let x), .date(let y)):
            let (s, t) = (x.timeIntervalSinceReferenceDate, y.timeIntervalSinceReferenceDate)
            return s == t ? .orderedSame : (s < t ? .orderedAscending : .orderedDescending)
        case (.string(let x), .string(let y)): return compareScalars(x, y)
        case (.reference(let x), .reference(let y)): return compareScalars(x.recordID.recordName, y.recordID.recordName)
        default: return .orderedSame
        }
    }

    /// Strings by Unicode scalar values, which is their UTF-8 byte order.
    public static func compareScalars(_ a: String, _ b: String) -> ComparisonResult {
        var left = a.utf8.makeIterator(), right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return .orderedSame
            case (nil, _): return .orderedAscending
            case (_, nil): return .orderedDescending
            case let (x?, y?) where x != y: return x < y ? .orderedAscending : .orderedDescending
            default: continue
            }
        }
    }

    /// An integer and a double compared exactly (not by converting the integer to a double,
    /// which rounds above 2^53).
    static func compare(_ integer: Int64, _ double: Double) -> ComparisonResult {
        if double.isNaN { return .orderedAscending }
        if double >= 0x1p63 { return .orderedAscending }
        if double < -0x1p63 { return .orderedDescending }
        let whole = Int64(double.rounded(.down))
        if integer != whole { return integer < whole ? .orderedAscending : .orderedDescending }
        return double > double.rounded(.down) ? .orderedAscending : .orderedSame
    }

    /// How two values compare in a condition (`<`, `BETWEEN`, `IN`, …): within one family as
    /// ``sortOrder(_:_:)`` orders them; `nil` when their families differ or have no order
    /// (such a condition does not hold).
    public static func conditionOrder(_ a: FieldValue, _ b: FieldValue) -> ComparisonResult? {
        guard let family = orderedFamily(of: a), orderedFamily(of: b) == family else { return nil }
        return compareWithinFamily(a, b)
    }

    /// Whether two values of fitting families are equal as conditions compare them: numbers by
    /// value, strings exactly (equality on fields folds case first, see ``equalityKey(_:)``).
    public static func conditionEqual(_ a: FieldValue, _ b: FieldValue) -> Bool {
        guard let familyA = orderedFamily(of: a), orderedFamily(of: b) == familyA else { return false }
        return compareWithinFamily(a, b) == .orderedSame
    }
}

private extension ComparisonResult {
    var reversed: ComparisonResult {
        switch self {
        case .orderedAscending: .orderedDescending
        case .orderedDescending: .orderedAscending
        case .orderedSame: .orderedSame
        }
    }
}
