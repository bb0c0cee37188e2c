import Foundation

/// A value that can be stored in a record field through ``Record/subscript(_:)``, like
/// `CKRecordValueProtocol`.
///
/// `String`, `Int64`, `Int` (and the other integer types, unsigned ones up to `Int64.max`),
/// `Bool`, `Double`, `Float`, `Date`,
/// `Data`, ``Record/Reference``, ``Location``, ``Asset``, arrays of these, and Foundation's
/// `NSNumber` and `NSDate` conform. Like CloudKit, integers and
/// `Bool` are stored as INT64 and read back as numbers that convert as `NSNumber`s do:
///
/// ```swift
/// record["checked"] = true
/// let checked = record["checked"] as? Bool == true     // INT64 1 reads as true
/// ```
public protocol RecordValueProtocol: Sendable {
    /// The typed field value this value is stored as.
    var fieldValue: FieldValue { get }
}

/// `CKRecordValue`'s name for a storable value.
public typealias RecordValue = RecordValueProtocol

extension String: RecordValueProtocol { public var fieldValue: FieldValue { .string(self) } }
extension Int64: RecordValueProtocol { public var fieldValue: FieldValue { .int64(self) } }
extension Int: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension Int32: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension Int16: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension Int8: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension UInt32: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }

extension UInt64: RecordValueProtocol {
    /// Stored as INT64, as CloudKit stores an unsigned `NSNumber`; read back with `as? UInt64`.
    ///
    /// ```swift
    /// record["bytes"] = UInt64(1) << 40
    /// let bytes = record["bytes"] as? UInt64
    /// ```
    ///
    /// - Precondition: the value fits in INT64 (at most `Int64.max`): a larger one traps with a
    ///   message naming it, since INT64 is the widest integer a record holds (store it as
    ///   `Int64(bitPattern:)`, as `Data`, or as a string).
    public var fieldValue: FieldValue {
        guard let exact = Int64(exactly: self) else {
            preconditionFailure("the unsigned number \(self) does not fit in an INT64 field (at most \(Int64.max)); store Int64(bitPattern:), Data or a String")
        }
        return .int64(exact)
    }
}

extension UInt: RecordValueProtocol {
    /// Stored as INT64, as CloudKit stores an unsigned `NSNumber`; see ``Swift/UInt64/fieldValue``.
    ///
    /// ```swift
    /// record["count"] = UInt(12)
    /// ```
    ///
    /// - Precondition: the value fits in INT64 (at most `Int64.max`).
    public var fieldValue: FieldValue { UInt64(self).fieldValue }
}
extension UInt16: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension UInt8: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension Bool: RecordValueProtocol { public var fieldValue: FieldValue { .int64(self ? 1 : 0) } }
extension Double: RecordValueProtocol { public var fieldValue: FieldValue { .double(self) } }
extension Float: RecordValueProtocol { public var fieldValue: FieldValue { .double(Double(self)) } }
extension Date: RecordValueProtocol { public var fieldValue: FieldValue { .date(self) } }
extension Data: RecordValueProtocol { public var fieldValue: FieldValue { .bytes(self) } }
extension Record.Reference: RecordValueProtocol { public var fieldValue: FieldValue { .reference(self) } }
extension Location: RecordValueProtocol { public var fieldValue: FieldValue { .location(self) } }
extension Asset: RecordValueProtocol { public var fieldValue: FieldValue { .asset(self) } }

extension Array: RecordValueProtocol where Element: RecordValueProtocol {
    public var fieldValue: FieldValue {
        switch self {
        case let v as [String]: return .stringList(v)
        case let v as [Int64]: return .int64List(v)
        case let v as [Int]: return .int64List(v.map(Int64.init))
        case let v as [Int32]: return .int64List(v.map(Int64.init))
        case let v as [Bool]: return .int64List(v.map { $0 ? 1 : 0 })
        case let v as [Double]: return .doubleList(v)
        case let v as [Float]: return .doubleList(v.map(Double.init))
        case let v as [Date]: return .dateList(v)
        case let v as [Data]: return .bytesList(v)
        case let v as [Record.Reference]: return .referenceList(v)
        case let v as [Location]: return .locationList(v)
        case let v as [Asset]: return .assetList(v)
        default:
            // Foundation objects ([NSNumber], [NSString]), the smaller integer types, or nested
            // arrays, which FieldValue.list(_:) refuses.
            return FieldValue.list(map(\.fieldValue), of: "[\(Element.self)]")
        }
    }
}

// MARK: - Foundation's objects, as CloudKit stores them

extension NSNumber: RecordValueProtocol {
    /// A floating-point number is stored as DOUBLE; an integer or a Boolean as INT64, as in
    /// CloudKit.
    ///
    /// - Precondition: an unsigned number fits in INT64 (a programmer error otherwise).
    public var fieldValue: FieldValue {
        switch String(cString: objCType) {
        case "d", "f": return .double(doubleValue)
        case "Q", "L", "I", "S", "C":
            guard let exact = Int64(exactly: uint64Value) else {
                preconditionFailure("the unsigned number \(uint64Value) does not fit in an INT64 field")
            }
            return .int64(exact)
        default: return .int64(int64Value)
        }
    }
}

// NSString, NSData and NSArray are not Sendable in swift-corelibs-foundation (their mutable
// subclasses share the type), so they cannot be values of this Sendable protocol; use String,
// Data and arrays, or `Record.setValue(_:forKey:)`, which takes them.
extension NSDate: RecordValueProtocol { public var fieldValue: FieldValue { .date(self as Date) } }

extension FieldValue {
    /// A list of scalar values of one type, or a trap naming `what` for mixed or nested values.
    static func list(_ values: [FieldValue], of what: String) -> FieldValue {
        guard let first = values.first else { return .stringList([]) }
        // An NSArray of NSNumbers is one list to CloudKit, whether each number came as an
        // integer or a double (JSON's `[4, 4.5]`): a list of numbers that holds a double is
        // a DOUBLE list.
        if values.contains(where: { if case .double = $0 { true } else { false } }),
           values.allSatisfy({ if case .int64 = $0 { true } else if case .double = $0 { true } else { false } }) {
            return .doubleList(values.map { if case .int64(let v) = $0 { Double(v) } else if case .double(let v) = $0 { v } else { 0 } })
        }
        func all<T>(_ extract: (FieldValue) -> T?) -> [T] {
            values.map { value in
                guard let element = extract(value) else {
                    preconditionFailure("a \(what) mixes \(first.type.rawValue) and \(value.type.rawValue) values; a list field holds values of one type")
                }
                return element
            }
        }
        switch first {
        case .string: return .stringList(all { if case .string(let v) = $0 { v } else { nil } })
        case .int64: return .int64List(all { if case .int64(let v) = $0 { v } else { nil } })
        case .double: return .doubleList(all { if case .double(let v) = $0 { v } else { nil } })
        case .date: return .dateList(all { if case .date(let v) = $0 { v } else { nil } })
        case .bytes: return .bytesList(all { if case .bytes(let v) = $0 { v } else { nil } })
        case .reference: return .referenceList(all { if case .reference(let v) = $0 { v } else { nil } })
        case .location: return .locationList(all { if case .location(let v) = $0 { v } else { nil } })
        case .asset: return .assetList(all { if case .asset(let v) = $0 { v } else { nil } })
        default: preconditionFailure("Stratus does not store lists of lists (\(what)); use a list of a scalar type")
        }
    }

    /// The value as CloudKit's untyped accessors give it: numbers (and lists of numbers) as
    /// `NSNumber`s, so that `as? Int`, `as? Double` and `as? Bool` convert as they do in
    /// CloudKit; every other value as its Swift value.
    var objectValue: any RecordValueProtocol {
        switch self {
        case .int64(let v): NSNumber(value: v)
        case .double(let v): NSNumber(value: v)
        case .int64List(let v): v.map { NSNumber(value: $0) }
        case .doubleList(let v): v.map { NSNumber(value: $0) }
        default: boxed
        }
    }
}
