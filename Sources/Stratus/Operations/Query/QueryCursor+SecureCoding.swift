import Foundation

/// Archiving a cursor as sync code archives `CKQueryOperation.Cursor`: its
/// ``QueryCursor/serialized`` text under one key.
extension QueryCursor: NSSecureCoding, NSCopying {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusQueryCursor"

    /// Writes the cursor (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(serialized as NSString, forKey: Self.archiveKey)
    }

    /// Reads a cursor written by ``encode(with:)``; `nil` when the archive holds none or it is
    /// damaged or from an older Stratus.
    ///
    /// ```swift
    /// let cursor = try NSKeyedUnarchiver.unarchivedObject(ofClass: QueryOperation.Cursor.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let text = coder.archivedText(forKey: Self.archiveKey) else { return nil }
        try? self.init(serialized: text)
    }

    /// The cursor itself: cursors are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
