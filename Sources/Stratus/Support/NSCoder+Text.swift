import Foundation

extension NSCoder {
    /// The text archived under `key`, or `nil` when there is none.
    ///
    /// Checked first: corelibs' unarchiver counts decoding a missing key as a failure.
    func archivedText(forKey key: String) -> String? {
        guard containsValue(forKey: key) else { return nil }
        return decodeArchived(NSString.self, forKey: key) as String?
    }

    /// The object of class `type` archived under `key`, or `nil` when the key holds none or
    /// holds another class.
    ///
    /// swift-corelibs-foundation's unarchiver stops the process (a `fatalError`, where Apple's
    /// fails the decode) when a secure decode finds a class it was not allowed, so an archive
    /// altered to hold, say, a zone ID where a record ID belongs would crash the app that reads
    /// it. There, every class a Stratus archive holds and Foundation's value classes are allowed,
    /// and the one asked for is checked by a cast; a class outside them still meets corelibs'
    /// check. Apple's Foundation fails such a decode by itself: there only `type` is allowed.
    func decodeArchived<Object: NSObject>(_ type: Object.Type, forKey key: String) -> Object? {
        #if canImport(Darwin)
        decodeObject(of: [type], forKey: key) as? Object
        #else
        decodeObject(of: Self.stratusArchiveClasses, forKey: key) as? Object
        #endif
    }

    /// Every class Stratus archives, and Foundation's value and collection classes that a
    /// secure archive may hold (allowed so that one found where another belongs reads as `nil`
    /// on Linux, instead of stopping the program).
    package static var stratusArchiveClasses: [AnyClass] {
        [NSString.self, NSData.self, NSDate.self, NSNumber.self, NSArray.self, NSDictionary.self, NSSet.self, NSOrderedSet.self,
         NSUUID.self, NSURL.self, NSNull.self, NSValue.self, NSLocale.self, NSError.self, NSAttributedString.self,
         Record.self, RecordID.self, RecordZoneID.self, RecordZone.self, RecordReference.self, Asset.self, Location.self,
         Query.self, QueryCursor.self, ServerChangeToken.self, OperationGroup.self, Subscription.self, NotificationInfo.self,
         UserIdentity.self, UserIdentityLookupInfo.self, ShareParticipant.self, ShareMetadata.self]
    }
}
