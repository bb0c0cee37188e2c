import Foundation
import Stratus

/// Builds a new, unsaved record with the given name, type and fields.
///
/// ```swift
/// let todo = makeRecord("Todo", "todo-1", ["title": .string("Milk"), "checked": .int64(0)])
/// ```
public func makeRecord(
    _ recordType: String, _ recordName: String, zoneID: RecordZone.ID = .default, _ fields: [String: FieldValue] = [:]
) -> Record {
    let record = Record(recordType: recordType, recordID: Record.ID(recordName: recordName, zoneID: zoneID))
    for key in fields.keys.sorted() { record.setFieldValue(fields[key], forKey: key) }
    return record
}

/// Builds `count` records named `prefix-00000`, `prefix-00001`, … whose fields `fields(i)` gives.
public func makeRecords(
    _ recordType: String, count: Int, prefix: String = "r", zoneID: RecordZone.ID = .default,
    _ fields: (Int) -> [String: FieldValue]
) -> [Record] {
    (0..<count).map { i in
        makeRecord(recordType, recordName(prefix, i), zoneID: zoneID, fields(i))
    }
}

/// The name ``makeRecords(_:count:prefix:zoneID:_:)`` gives record `i`.
public func recordName(_ prefix: String, _ i: Int) -> String {
    let digits = String(i)
    return prefix + "-" + String(repeating: "0", count: max(0, 5 - digits.count)) + digits
}

/// A reference to `recordName` in the default zone.
public func reference(_ recordName: String, _ action: Record.ReferenceAction = .none, zoneID: RecordZone.ID = .default) -> Record.Reference {
    Record.Reference(recordID: Record.ID(recordName: recordName, zoneID: zoneID), action: action)
}

/// A location with every property set to a distinctive value.
public func fullLocation(_ seed: Double = 0) -> Location {
    Location(
        latitude: 52.520_008 + seed, longitude: 13.404_954 - seed, altitude: 34.25 + seed,
        horizontalAccuracy: 5.5, verticalAccuracy: 3.125, course: 271.75, speed: 1.4 + seed,
        timestamp: Date(timeIntervalSinceReferenceDate: 712_345_678.123_456 + seed))
}

/// Dates with sub-second precision, before and after 2001 and 1970.
public let preciseDates: [Date] = [
    Date(timeIntervalSinceReferenceDate: 712_345_678.123_456_7),
    Date(timeIntervalSinceReferenceDate: -31_536_000.000_001),
    Date(timeIntervalSince1970: -1_234_567.891_011),
    Date(timeIntervalSinceReferenceDate: 0.000_000_1),
    Date(timeIntervalSinceReferenceDate: 1_000_000_000.5),
]

/// Strings that exercise escaping and Unicode in stored documents.
public let trickyStrings: [String] = [
    "",
    "plain ascii",
    "quote \" backslash \\ slash / brace } bracket ] colon : comma ,",
    "newline \n return \r tab \t backspace \u{8} formfeed \u{C}",
    "nul \u{0} unit separator \u{1F} delete \u{7F}",
    "Grüße aus Köln, ÆØÅ, ß",
    "日本語のテキスト 中文 한국어",
    "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽",
    "combining e\u{301} versus precomposed \u{E9}",
    "right-to-left \u{5E9}\u{5DC}\u{5D5}\u{5DD} \u{200F}mark",
    "\u{FEFF}byte order mark and \u{2028} line separator \u{2029}",
    "json-looking [\"S\",\"x\"] {\"a\":1} \\u0041 not an escape",
    "astral \u{1D11E} \u{10FFFF}",
]

/// The field values of every kind, each in a field named after its kind, without assets
/// (assets need files; see ``EngineConformance``).
public func everyNonAssetFieldValue() -> [String: FieldValue] {
    [
        "string": .string(trickyStrings[2]),
        "int64": .int64(2),
        "int64Max": .int64(.max),
        "int64Min": .int64(.min),
        "double": .double(2.0),
        "doubleFraction": .double(0.1),
        "doubleTiny": .double(.leastNonzeroMagnitude),
        "doubleHuge": .double(.greatestFiniteMagnitude),
        "doubleNegative": .double(-12_345.678_9),
        "date": .date(preciseDates[0]),
        "bytes": .bytes(Data([0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF])),
        "bytesEmpty": .bytes(Data()),
        "referenceNone": .reference(reference("target-a", .none)),
        "referenceDeleteSelf": .reference(reference("target-b", .deleteSelf)),
        "location": .location(fullLocation()),
        "stringList": .stringList(["a", "", "ü", "quote \"", "line\nbreak"]),
        "int64List": .int64List([2, -1, .max, .min, 0]),
        "doubleList": .doubleList([2.0, 0.5, -1e-300, 1e300]),
        "dateList": .dateList(preciseDates),
        "bytesList": .bytesList([Data([1, 2, 3]), Data(), Data([0xFF])]),
        "referenceList": .referenceList([reference("target-a", .none), reference("target-b", .deleteSelf), reference("target-c", .none)]),
        "locationList": .locationList([fullLocation(), fullLocation(1.5), Location(latitude: -33.868_82, longitude: 151.209_29)]),
        "emptyStringList": .stringList([]),
        "emptyInt64List": .int64List([]),
        "emptyDoubleList": .doubleList([]),
        "emptyDateList": .dateList([]),
        "emptyBytesList": .bytesList([]),
        "emptyReferenceList": .referenceList([]),
        "emptyLocationList": .locationList([]),
        "emptyAssetList": .assetList([]),
    ]
}
