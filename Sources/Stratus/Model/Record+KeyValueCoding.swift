import Foundation

/// CloudKit's object and key-value coding accessors of `CKRecord`, taking and giving plain
/// values. Numbers come back as `NSNumber`s, as from ``Record/subscript(_:)``.
extension Record {
    /// The value of a field, as `CKRecord.object(forKey:)`; the same as `record[key]`.
    ///
    /// ```swift
    /// let title = record.object(forKey: "title") as? String
    /// ```
    public func object(forKey key: FieldKey) -> (any RecordValueProtocol)? { self[key] }

    /// Sets or, with `nil`, removes a field, as `CKRecord.setObject(_:forKey:)`.
    ///
    /// ```swift
    /// record.setObject("Water the plants" as RecordValue, forKey: "title")
    /// ```
    public func setObject(_ object: (any RecordValueProtocol)?, forKey key: FieldKey) { self[key] = object }

    /// The value for a key as key-value coding gives it: the field's value (numbers as
    /// `NSNumber`s), or for a system field's name (`recordID`, `recordType`, `creationDate`,
    /// `modificationDate`, `creatorUserRecordID`, `lastModifiedUserRecordID`,
    /// `recordChangeTag`, `parent`, `share`, and ``SystemFieldKey``'s `___parent` and `___share`)
    /// that property, as key-value coding finds `CKRecord`'s properties before its fields.
    ///
    /// ```swift
    /// let title = record.value(forKey: "title") as! String
    /// ```
    public func value(forKey key: String) -> Any? {
        switch key {
        case "recordID": recordID
        case "recordType": recordType
        case "creationDate": creationDate
        case "modificationDate": modificationDate
        case "creatorUserRecordID": creatorUserRecordID
        case "lastModifiedUserRecordID": lastModifiedUserRecordID
        case "recordChangeTag": recordChangeTag
        case "parent", SystemFieldKey.parent: parent
        case "share", SystemFieldKey.share: share
        default: self[key]
        }
    }

    /// The value at a dotted path, as `NSObject.value(forKeyPath:)` reads a `CKRecord`: the first
    /// key as ``value(forKey:)`` reads it, then the properties of record and zone IDs
    /// (`recordName`, `zoneID`, `zoneName`, `ownerName`) and of references (`recordID`,
    /// `action`); `nil` for a path that leads nowhere.
    ///
    /// ```swift
    /// let name = record.value(forKeyPath: "recordID.recordName") as? String
    /// let list = record.value(forKeyPath: "list.recordID.recordName") as? String   // a reference field
    /// ```
    public func value(forKeyPath keyPath: String) -> Any? {
        var parts = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !parts.isEmpty else { return nil }
        var value = self.value(forKey: parts.removeFirst())
        for part in parts {
            switch (value, part) {
            case (let id as Record.ID, "recordName"): value = id.recordName
            case (let id as Record.ID, "zoneID"): value = id.zoneID
            case (let zone as RecordZone.ID, "zoneName"): value = zone.zoneName
            case (let zone as RecordZone.ID, "ownerName"): value = zone.ownerName
            case (let reference as Record.Reference, "recordID"): value = reference.recordID
            case (let reference as Record.Reference, "action"): value = reference.action
            case (let record as Record, _): value = record.value(forKey: part)
            default: return nil
            }
        }
        return value
    }

    /// Sets or (with `nil` or `NSNull`) removes a field from a plain value, as key-value coding
    /// does: any ``RecordValueProtocol`` value, an `NSString`, `NSData`, or an array of these.
    /// `parent` (and `___parent`) given a reference or nothing (`nil`, `NSNull`) sets
    /// ``parent``, as key-value coding finds `CKRecord`'s `parent` property before a field of
    /// that name; another value for `parent` sets the field (a `parent STRING` a schema declares).
    ///
    /// ```swift
    /// record.setValue(3, forKey: "count")
    /// ```
    ///
    /// - Precondition: the value can be stored in a field (a programmer error otherwise, as
    ///   CloudKit raises an exception for it).
    public func setValue(_ value: Any?, forKey key: String) {
        if key == "parent" || key == SystemFieldKey.parent {
            switch value {
            case nil, is NSNull:
                parent = nil
                return
            case let reference as Reference:
                parent = reference
                return
            default:
                break
            }
        }
        setFieldValue(Record.fieldValue(ofPlainValue: value, forKey: key), forKey: key)
    }

    /// Sets several fields from plain values, as key-value coding's `setValuesForKeys`.
    ///
    /// ```swift
    /// record.setValuesForKeys(["title": "Milk", "quantity": 2])
    /// ```
    public func setValuesForKeys(_ keyedValues: [String: Any]) {
        for (key, value) in keyedValues { setValue(value, forKey: key) }
    }

    /// The values for several keys as key-value coding's `dictionaryWithValues(forKeys:)` gives
    /// them: ``value(forKey:)`` for each key, `NSNull` where it has none. CloudKit code uses it
    /// to dump a record, or to copy its fields into another record with ``setValuesForKeys(_:)``
    /// (which takes `NSNull` as "remove").
    ///
    /// ```swift
    /// let copy = Record(recordType: record.recordType)
    /// copy.setValuesForKeys(record.dictionaryWithValues(forKeys: record.allKeys()))
    /// ```
    public func dictionaryWithValues(forKeys keys: [String]) -> [String: Any] {
        var values: [String: Any] = [:]
        for key in keys { values[key] = value(forKey: key) ?? NSNull() }
        return values
    }

    /// Sets the record's ``parent`` to a record, as `CKRecord.setParent(_:)`; `nil` removes it.
    ///
    /// ```swift
    /// page.setParent(book)
    /// ```
    public func setParent(_ parentRecord: Record?) {
        parent = parentRecord.map { Reference(recordID: $0.recordID, action: .none) }
    }

    /// Sets the record's ``parent`` to a record ID, as `CKRecord.setParent(_:)`; `nil` removes it.
    ///
    /// ```swift
    /// page.setParent(book.recordID)
    /// ```
    public func setParent(_ parentRecordID: Record.ID?) {
        parent = parentRecordID.map { Reference(recordID: $0, action: .none) }
    }

    /// The field value a plain value is stored as, or `nil` for `nil` and `NSNull`.
    static func fieldValue(ofPlainValue value: Any?, forKey key: String) -> FieldValue? {
        // A dictionary of `Any` built from optionals (`["note": draft.note]`) holds the
        // optional itself; key-value coding in CloudKit code treats an empty one as removal.
        guard let value = value.flatMap(unwrappingOptional), !(value is NSNull) else { return nil }
        if let value = value as? any RecordValueProtocol { return value.fieldValue }
        if let text = value as? NSString { return .string(text as String) }
        if let bytes = value as? NSData { return .bytes(bytes as Data) }
        if let array = value as? [Any] {
            let elements = array.map { element -> FieldValue in
                guard let fieldValue = fieldValue(ofPlainValue: element, forKey: key) else {
                    preconditionFailure("the list for field '\(key)' holds a nil; list elements cannot be nil")
                }
                return fieldValue
            }
            return FieldValue.list(elements, of: "list for field '\(key)'")
        }
        preconditionFailure("a \(type(of: value)) cannot be stored in field '\(key)'; store a String, number, Date, Data, Record.Reference, Location, Asset or an array of one of these")
    }

    /// The value an `Any` holds with any levels of `Optional` around it taken off; `nil` when
    /// one of them is empty.
    private static func unwrappingOptional(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.flatMap { unwrappingOptional($0.value) }
    }
}

extension Record {
    /// The names of a record's system fields, as `CKRecord.SystemFieldKey`; ``value(forKey:)``
    /// answers them, and predicates and sort descriptors accept `recordID`, `creationDate`,
    /// `modificationDate`, `creatorUserRecordID`, `lastModifiedUserRecordID` and `parent`
    /// (`QueryPredicate(format: "%K == %@", Record.SystemFieldKey.parent, listID)`). As in
    /// CloudKit, `parent` and `share` are `___parent` and `___share`, so that a record's fields
    /// may be named `parent` and `share`.
    ///
    /// ```swift
    /// query.sortDescriptors = [RecordSortDescriptor(key: Record.SystemFieldKey.creationDate, ascending: false)]
    /// ```
    public enum SystemFieldKey {
        /// The record's ID (``Record/recordID``): compared by record name in predicates.
        public static let recordID: FieldKey = "recordID"
        /// When the record was first saved (``Record/creationDate``).
        public static let creationDate: FieldKey = "creationDate"
        /// Who first saved the record (``Record/creatorUserRecordID``).
        public static let creatorUserRecordID: FieldKey = "creatorUserRecordID"
        /// When the record was last saved (``Record/modificationDate``).
        public static let modificationDate: FieldKey = "modificationDate"
        /// Who last saved the record (``Record/lastModifiedUserRecordID``).
        public static let lastModifiedUserRecordID: FieldKey = "lastModifiedUserRecordID"
        /// The record's parent (``Record/parent``), compared by the parent's record name.
        public static let parent: FieldKey = "___parent"
        /// The share of a record shared as a hierarchy's root (``Record/share``); not a query key.
        public static let share: FieldKey = "___share"
    }
}

extension Record.Reference {
    /// `CKRecord.Reference.Action`'s name for ``Record/ReferenceAction``.
    public typealias Action = Record.ReferenceAction
}
