import Foundation

/// What a record's fields and its encrypted fields both offer, as `CKRecordKeyValueSetting`:
/// code that reads or writes either through one value works with both.
///
/// ``Record`` and ``Record/EncryptedValues`` conform. The protocol is class-bound, as
/// CloudKit's: setting a value through it changes the record, also through a `let`, and a
/// setter that an app's extension of the protocol declares works on both (sqlite-data's
/// `record.encryptedValues[at: key] = date`).
///
/// ```swift
/// let values: any RecordKeyValueSetting = record.encryptedValues
/// values["phoneNumber"] = "+1 555 0100"
/// let name: String? = values["name"]
///
/// extension RecordKeyValueSetting {
///     var lastEdit: Date? { get { self["lastEdit"] } set { self["lastEdit"] = newValue } }
/// }
/// record.encryptedValues.lastEdit = Date()
/// ```
public protocol RecordKeyValueSetting: AnyObject {
    /// The value of a field, or `nil`; setting `nil` removes the field.
    subscript(key: Record.FieldKey) -> (any RecordValueProtocol)? { get set }
    /// The value of a field, as `object(forKey:)`.
    func object(forKey key: Record.FieldKey) -> (any RecordValueProtocol)?
    /// Sets or, with `nil`, removes a field, as `setObject(_:forKey:)`.
    func setObject(_ object: (any RecordValueProtocol)?, forKey key: Record.FieldKey)
    /// Every key that has a value.
    func allKeys() -> [Record.FieldKey]
    /// The keys set or removed since the record was created or fetched.
    func changedKeys() -> [Record.FieldKey]
}

extension RecordKeyValueSetting {
    /// The value of a field as a given type, or `nil` when there is none or it does not
    /// convert, as `CKRecordKeyValueSetting`'s typed subscript.
    ///
    /// ```swift
    /// let values: any RecordKeyValueSetting = record
    /// let count: Int = values["count"] ?? 0
    /// ```
    public subscript<T: RecordValueProtocol>(key: Record.FieldKey) -> T? {
        get { self[key] as? T }
        set { self[key] = newValue }
    }
}

extension Record: RecordKeyValueSetting {}

extension Record.EncryptedValues: RecordKeyValueSetting {
    /// The encrypted value of a field, as `encryptedValues.object(forKey:)`.
    ///
    /// ```swift
    /// let secret = note.encryptedValues.object(forKey: "secret") as? Data
    /// ```
    public func object(forKey key: Record.FieldKey) -> (any RecordValueProtocol)? { self[key] }

    /// Sets or, with `nil`, removes an encrypted field, as `encryptedValues.setObject(_:forKey:)`.
    ///
    /// ```swift
    /// note.encryptedValues.setObject(ciphertext, forKey: "secret")
    /// ```
    public func setObject(_ object: (any RecordValueProtocol)?, forKey key: Record.FieldKey) { self[key] = object }
}
