import Foundation

extension RecordValueProtocol {
    /// The value as text, as `CKRecordValue`'s `description` (an `NSObject`'s) gives it, so code
    /// that prints a record's values without knowing their types — `record[key]?.description`,
    /// as exporters of a user's data write it — ports unchanged. Numbers print as their
    /// `NSNumber`s (`2`, `2.5`), strings as themselves, dates as `NSDate` does
    /// (`2018-05-02 10:00:00 +0000`).
    ///
    /// ```swift
    /// for key in record.allKeys() { row[key] = record[key]?.description ?? "" }
    /// ```
    public var description: String { String(describing: self) }
}
