import Foundation

// MARK: - Casting to and from NSError

/// A ``StratusError`` casts to `NSError`, and an `NSError` of `CKErrorDomain` casts back, with
/// `as?` and `as!` as a `CKError` does on Apple's platforms.
///
/// Without this, swift-corelibs-foundation bridges a Swift error only with `as`: `error as?
/// NSError` is `nil` and `userInfo[PartialErrorsByItemIDKey] as? NSDictionary` read with
/// `dictionary[id] as! NSError` stops the program, where CloudKit code takes both to succeed.
/// The `NSError` is the one `error as NSError` gives (domain, code and ``userInfo``); casting it
/// back gives the error ``init(bridging:)`` makes of it (its code and CloudKit's `userInfo` keys). An `NSError` of another domain does not
/// cast to a `StratusError`, as it does not to a `CKError`.
///
/// ```swift
/// if let nsError = error as? NSError, nsError.domain == ErrorDomain { print(nsError.code) }
/// let itemError = (error.userInfo[PartialErrorsByItemIDKey] as? NSDictionary)?[recordID] as? NSError
/// if let ckError = itemError as? StratusError, ckError.code == .unknownItem { forget(recordID) }
/// ```
extension StratusError: _ObjectiveCBridgeable {
    /// The `NSError` a cast gives: `CKErrorDomain`, CloudKit's code number and ``userInfo``.
    public func _bridgeToObjectiveC() -> NSError {
        NSError(domain: Self.errorDomain, code: errorCode, userInfo: errorUserInfo)
    }

    /// An `as!` cast from `NSError`: the error ``init(bridging:)`` makes of it (`internalError`
    /// for another domain).
    public static func _forceBridgeFromObjectiveC(_ source: NSError, result: inout StratusError?) {
        result = StratusError(domainError: source)
    }

    /// An `as?` cast from `NSError`: succeeds for `CKErrorDomain` only, as a cast to `CKError` does.
    public static func _conditionallyBridgeFromObjectiveC(_ source: NSError, result: inout StratusError?) -> Bool {
        guard source.domain == ErrorDomain else {
            result = nil
            return false
        }
        result = StratusError(domainError: source)
        return true
    }

    /// A bridged `NSError` taken as a `StratusError` without a check.
    public static func _unconditionallyBridgeFromObjectiveC(_ source: NSError?) -> StratusError {
        guard let source else { return StratusError(.internalError, "no error") }
        return StratusError(domainError: source)
    }

    /// The error an `NSError` carries, read from its code and `userInfo` without casting it
    /// (a cast to `StratusError` comes here: ``init(bridging:)`` would cast again).
    init(domainError source: NSError) {
        if source.domain == ErrorDomain {
            self.init(Code(rawValue: source.code) ?? .internalError, userInfo: source.userInfo)
        } else {
            self.init(.internalError, String(describing: source))
            underlyingError = source
        }
    }
}
