import Foundation

/// Archiving notification info as apps archive `CKSubscription.NotificationInfo`: every
/// property, as the store keeps them.
extension NotificationInfo: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusNotificationInfo"

    /// Writes the notification info (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: info, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Optional strings, lists of strings and Booleans only: encoding cannot fail.
        coder.encode(try! encoder.encode(fields) as NSData, forKey: Self.archiveKey)
    }

    /// Reads notification info written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let info = try NSKeyedUnarchiver.unarchivedObject(ofClass: NotificationInfo.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard coder.containsValue(forKey: Self.archiveKey),
              let data = coder.decodeArchived(NSData.self, forKey: Self.archiveKey),
              let fields = try? JSONDecoder().decode(Fields.self, from: data as Data)
        else { return nil }
        self.init(fields: fields)
    }
}
