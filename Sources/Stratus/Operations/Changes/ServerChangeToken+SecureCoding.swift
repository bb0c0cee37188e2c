import Foundation

/// Archiving a token as sync code archives `CKServerChangeToken`: its ``ServerChangeToken/serialized``
/// text under one key.
extension ServerChangeToken: NSSecureCoding, NSCopying {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusServerChangeToken"

    /// Writes the token (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(serialized as NSString, forKey: Self.archiveKey)
    }

    /// Reads a token written by ``encode(with:)``; `nil` when the archive holds none or it is
    /// damaged.
    ///
    /// ```swift
    /// let token = try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let text = coder.archivedText(forKey: Self.archiveKey) else { return nil }
        try? self.init(serialized: text)
    }

    /// The token itself: tokens are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
