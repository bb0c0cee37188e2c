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
    /// it. Every class a Stratus archive holds is allowed here, and the one asked for is then
    /// checked by a cast. A class outside them (one an archive could name only by being forged
    /// against the app's own classes) still meets corelibs' check.
    func decodeArchived<Object: NSObject>(_ type: Object.Type, forKey key: String) -> Object? {
        decodeObject(of: Self.stratusArchiveClasses, forKey: key) as? Object
    }

    /// Foundation's property-list classes and every class Stratus archives.
    package static var stratusArchiveClasses: [AnyClass] {
        [NSString.self, NSData.self, NSDate.self, NSNumber.self, NSArray.self, NSDictionary.self, NSUUID.self, NSURL.self,
         Record.self, RecordID.self, RecordZoneID.self, RecordZone.self, RecordReference.self, Asset.self, Location.self,
         Query.self, QueryCursor.self, ServerChangeToken.self, OperationGroup.self, Subscription.self, NotificationInfo.self,
         UserIdentity.self, UserIdentityLookupInfo.self, ShareParticipant.self, ShareMetadata.self]
    }
}
