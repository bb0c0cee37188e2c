import Foundation

/// A Swift value that can be stored in a record field through ``Record/subscript(_:)``.
///
/// `String`, `Int64`, `Int`, `Bool`, `Double`, `Date`, `Data`, ``Record/Reference``,
/// ``Location``, ``Asset`` and arrays of these conform. Like CloudKit, `Int` and `Bool` are
/// stored as `Int64`, so they read back as `Int64`:
///
/// ```swift
/// record["checked"] = true
/// let checked = (record["checked"] as? Int64) == 1
/// ```
public protocol RecordValueProtocol: Sendable {
    /// The typed field value this Swift value is stored as.
    var fieldValue: FieldValue { get }
}

extension String: RecordValueProtocol { public var fieldValue: FieldValue { .string(self) } }
extension Int64: RecordValueProtocol { public var fieldValue: FieldValue { .int64(self) } }
extension Int: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
extension Int32: RecordValueProtocol { public var fieldValue: FieldValue { .int64(Int64(self)) } }
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
            // Nested arrays ([[String]]) are the only other conforming element type.
            preconditionFailure("Stratus does not store lists of lists (\(Element.self)); use a list of a scalar type")
        }
    }
}
