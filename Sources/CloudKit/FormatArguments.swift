import CoreLocation
import Foundation
import Stratus

// On Apple's platforms these are `CVarArg`s already, and `_CVarArgObject` does not exist.
#if !_runtime(_ObjC)

// CloudKit code passes predicate arguments as `CVarArg`s, and often casts them so:
// `NSPredicate(format: "modificationDate > %@", lastSync as CVarArg)`. On Apple's platforms
// every Foundation object is a `CVarArg`, and a `Date` or a `CKRecord.ID` becomes one by
// bridging; on Linux only strings and numbers are, so those casts would not compile.
// Under `import CloudKit` the values CloudKit predicates take are `CVarArg`s too: the
// predicate reads the value itself, and `String(format:)` prints its description for `%@`, as
// Foundation prints an object's. As Linux's Foundation does for a `String`, each is handed to
// a format as the `NSString` `_cVarArgObject` answers, which the standard library keeps alive
// while the format reads it; `_cVarArgEncoding` is never read for such a value.

/// What `_cVarArgEncoding` answers for a value a format reads through its `_cVarArgObject`.
private func describedArgumentEncoding(_ value: Any) -> Never {
    fatalError("\(type(of: value)) is handed to a format as the NSString of its description (_cVarArgObject)")
}

/// `date as CVarArg`, as a predicate argument.
///
/// ```swift
/// import CloudKit
///
/// let recent = NSPredicate(format: "modificationDate > %@", lastSync as CVarArg)
/// ```
extension Date: @retroactive CVarArg, @retroactive _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `NSDate() as CVarArg`, as a predicate argument (see `Date`'s).
extension NSDate: @retroactive CVarArg, @retroactive _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `NSNumber(value: true) as CVarArg`, as a predicate argument (see `Date`'s).
extension NSNumber: @retroactive CVarArg, @retroactive _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `recordID as CVarArg`, as a predicate argument (see `Date`'s).
///
/// ```swift
/// import CloudKit
///
/// let items = NSPredicate(format: "list == %@", list.recordID as CVarArg)
/// ```
extension CKRecord.ID: CVarArg, _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `record as CVarArg`, which a predicate compares as a reference to the record (see `Date`'s).
extension CKRecord: CVarArg, _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `reference as CVarArg`, as a predicate argument (see `Date`'s).
///
/// ```swift
/// import CloudKit
///
/// let mine = NSPredicate(format: "owner == %@", CKRecord.Reference(recordID: ownerID, action: .none) as CVarArg)
/// ```
extension CKRecord.Reference: CVarArg, _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}

/// `location as CVarArg`, for `distanceToLocation:fromLocation:` (see `Date`'s).
extension CLLocation: CVarArg, _CVarArgObject {
    public var _cVarArgObject: CVarArg { NSString(string: String(describing: self)) }
    public var _cVarArgEncoding: [Int] { describedArgumentEncoding(self) }
}
#endif
