import Foundation

/// Errors compare as `CKError`s do, by what their `NSError`s hold: two errors are equal when
/// they have the same code and the same `userInfo` (``errorUserInfo``: the message, the
/// retry-after seconds, the partial errors item by item, the conflicting records, the
/// underlying error's domain and code, and the keys an error was built with).
///
/// ```swift
/// #expect(error as? StratusError == StratusError(.zoneNotFound))   // a test double's error
/// var seen: Set<StratusError> = []
/// ```
extension StratusError: Hashable {
    public static func == (lhs: StratusError, rhs: StratusError) -> Bool {
        lhs.code == rhs.code && sameUserInfo(lhs.errorUserInfo, rhs.errorUserInfo)
    }

    /// Combines the code and the message, which equal errors share.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    private static func sameUserInfo(_ left: [String: Any], _ right: [String: Any]) -> Bool {
        guard Set(left.keys) == Set(right.keys) else { return false }
        return left.allSatisfy { key, value in right[key].map { sameValue(value, $0) } ?? false }
    }

    /// Compares two `userInfo` values as `NSDictionary` equality would: errors by content,
    /// partial-error dictionaries item by item, objects with `isEqual` (records by identity).
    private static func sameValue(_ left: Any, _ right: Any) -> Bool {
        switch (left, right) {
        case let (left as StratusError, right as StratusError):
            return left == right
        case let (left as [AnyHashable: any Error], right as [AnyHashable: any Error]):
            guard Set(left.keys) == Set(right.keys) else { return false }
            return left.allSatisfy { key, value in right[key].map { sameValue(value, $0) } ?? false }
        case let (left as NSError, right as NSError):
            return left.domain == right.domain && left.code == right.code
        case let (left as AnyHashable, right as AnyHashable):
            return left == right
        default:
            return false
        }
    }
}
