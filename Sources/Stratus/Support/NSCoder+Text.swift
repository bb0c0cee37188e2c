import Foundation

extension NSCoder {
    /// The text archived under `key`, or `nil` when there is none.
    ///
    /// Checked first: corelibs' unarchiver counts decoding a missing key as a failure.
    func archivedText(forKey key: String) -> String? {
        guard containsValue(forKey: key) else { return nil }
        return decodeObject(of: NSString.self, forKey: key) as String?
    }
}
