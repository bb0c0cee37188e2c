import Foundation

/// Archiving subscriptions as apps archive `CKSubscription`s (the subscription they saved, a
/// test double's canned answers): the name and the definition the store itself keeps, so an
/// archive holds exactly what a fetch of the subscription would give back.
extension Subscription: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let subscriptionID = "StratusSubscriptionID"
        static let definition = "StratusSubscriptionDefinition"
    }

    /// Writes the subscription (`NSCoding`); the subclass's `init?(coder:)` reads it back.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: subscription, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(subscriptionID as NSString, forKey: Key.subscriptionID)
        coder.encode(Data(definition.encoded()) as NSData, forKey: Key.definition)
    }

    /// The name and definition archived in `coder`, when they are there, readable, and of the
    /// `expected` kind (the class the unarchiver is making).
    static func archivedDefinition(in coder: NSCoder, of expected: SubscriptionType) -> (ID, SubscriptionDefinition)? {
        guard let id = coder.archivedText(forKey: Key.subscriptionID), coder.containsValue(forKey: Key.definition),
              let bytes = coder.decodeArchived(NSData.self, forKey: Key.definition),
              let definition = try? SubscriptionDefinition.decode(Array(bytes as Data), id: id),
              definition.type == expected
        else { return nil }
        return (id, definition)
    }
}
