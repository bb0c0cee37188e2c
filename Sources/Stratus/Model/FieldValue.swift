import Foundation

/// A typed value stored in a record field.
///
/// Every case round-trips exactly through a store: an ``int64(_:)`` never comes back as a
/// ``double(_:)``, a date never comes back as a number. Lists are homogeneous by construction.
/// Values are equal only when they are the same bytes: strings compare by Unicode scalars
/// (not by canonical equivalence, so NFC and NFD text differ), numbers and dates by their bit
/// patterns (`0.0` and `-0.0` differ); see ``QueryRules`` for how queries compare them.
///
/// ```swift
/// record.setFieldValue(.int64(2), forKey: "quantity")
/// if case .int64(let quantity)? = record.fieldValue(forKey: "quantity") { print(quantity) }
/// ```
public enum FieldValue: Hashable, Sendable, Codable {
    case string(String)
    case int64(Int64)
    case double(Double)
    case date(Date)
    case bytes(Data)
    // Objects, as CloudKit's are: one word each, so that every value (in every record's
    // dictionary) stays as small as the other cases.
    case reference(Record.Reference)
    case location(Location)
    case asset(Asset)
    case stringList([String])
    case int64List([Int64])
    case doubleList([Double])
    case dateList([Date])
    case bytesList([Data])
    case referenceList([Record.Reference])
    case locationList([Location])
    case assetList([Asset])

    /// The type of this value, as CloudKit names it.
    public var type: FieldType {
        switch self {
        case .string: .string
        case .int64: .int64
        case .double: .double
        case .date: .timestamp
        case .bytes: .bytes
        case .reference: .reference
        case .location: .location
        case .asset: .asset
        case .stringList: .stringList
        case .int64List: .int64List
        case .doubleList: .doubleList
        case .dateList: .timestampList
        case .bytesList: .bytesList
        case .referenceList: .referenceList
        case .locationList: .locationList
        case .assetList: .assetList
        }
    }

    /// Whether the value is a list without elements (of any element type).
    package var isEmptyList: Bool {
        switch self {
        case .stringList(let v): v.isEmpty
        case .int64List(let v): v.isEmpty
        case .doubleList(let v): v.isEmpty
        case .dateList(let v): v.isEmpty
        case .bytesList(let v): v.isEmpty
        case .referenceList(let v): v.isEmpty
        case .locationList(let v): v.isEmpty
        case .assetList(let v): v.isEmpty
        default: false
        }
    }

    /// The value as a CloudKit-style boxed value (`String`, `Int64`, `[Date]`, …), for the
    /// untyped subscript of ``Record``.
    public var boxed: any RecordValueProtocol {
        switch self {
        case .string(let v): v
        case .int64(let v): v
        case .double(let v): v
        case .date(let v): v
        case .bytes(let v): v
        case .reference(let v): v
        case .location(let v): v
        case .asset(let v): v
        case .stringList(let v): v
        case .int64List(let v): v
        case .doubleList(let v): v
        case .dateList(let v): v
        case .bytesList(let v): v
        case .referenceList(let v): v
        case .locationList(let v): v
        case .assetList(let v): v
        }
    }
}

/// The type of a field value, named as CloudKit Web Services names it (`STRING`, `INT64`, …).
///
/// ```swift
/// if record.fieldValue(forKey: "due")?.type == .timestamp { print("due is a date") }
/// ```
public enum FieldType: String, Hashable, Sendable, Codable, CaseIterable {
    case string = "STRING"
    case int64 = "INT64"
    case double = "DOUBLE"
    case timestamp = "TIMESTAMP"
    case bytes = "BYTES"
    case reference = "REFERENCE"
    case location = "LOCATION"
    case asset = "ASSETID"
    case stringList = "STRING_LIST"
    case int64List = "INT64_LIST"
    case doubleList = "DOUBLE_LIST"
    case timestampList = "TIMESTAMP_LIST"
    case bytesList = "BYTES_LIST"
    case referenceList = "REFERENCE_LIST"
    case locationList = "LOCATION_LIST"
    case assetList = "ASSETID_LIST"

    /// Whether values of this type are lists.
    public var isList: Bool { rawValue.hasSuffix("_LIST") }
}
