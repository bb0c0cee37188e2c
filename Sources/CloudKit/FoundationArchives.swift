import Foundation
import Stratus

/// Foundation's typed unarchiving calls of macOS 11 and iOS 14, which code that caches
/// CloudKit's records and tokens uses and swift-corelibs-foundation lacks: they read as
/// `unarchivedObject(ofClasses:from:)` does, and answer `nil` for an archive of something else.
/// Foundation's and Stratus's classes are all allowed and then checked, since
/// swift-corelibs-foundation stops the program at a class it was not allowed.
extension NSKeyedUnarchiver {
    /// An archived array of `cls` objects (a cache of `[CKRecord]`), or `nil` when the archive
    /// holds something else.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let records = try NSKeyedUnarchiver.unarchivedArrayOfObjects(ofClass: CKRecord.self, from: data) ?? []
    /// ```
    public static func unarchivedArrayOfObjects<DecodedObjectType: NSObject & NSSecureCoding>(
        ofClass cls: DecodedObjectType.Type, from data: Data
    ) throws -> [DecodedObjectType]? {
        try unarchivedObject(ofClasses: NSCoder.stratusArchiveClasses + [cls], from: data) as? [DecodedObjectType]
    }

    /// An archived dictionary whose keys are `keyCls` objects and values `valueCls` objects (a
    /// cache of `[String: CKServerChangeToken]`, keys as `NSString`), or `nil` when the archive
    /// holds something else.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let tokens = try NSKeyedUnarchiver.unarchivedDictionary(keysOfClass: NSString.self, objectsOfClass: CKServerChangeToken.self, from: data)
    /// ```
    public static func unarchivedDictionary<KeyType: NSObject & NSSecureCoding & Hashable, ObjectType: NSObject & NSSecureCoding>(
        keysOfClass keyCls: KeyType.Type, objectsOfClass valueCls: ObjectType.Type, from data: Data
    ) throws -> [KeyType: ObjectType]? {
        guard let dictionary = try unarchivedObject(ofClasses: NSCoder.stratusArchiveClasses + [keyCls, valueCls], from: data) as? NSDictionary else { return nil }
        var typed: [KeyType: ObjectType] = [:]
        for (key, value) in dictionary {
            guard let key = key as? KeyType, let value = value as? ObjectType else { return nil }
            typed[key] = value
        }
        return typed
    }
}
