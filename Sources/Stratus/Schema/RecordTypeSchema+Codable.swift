import Foundation

// Stores keep schemas as this JSON. Keys added after the first version are optional on reading
// and left out when they hold their default, so schemas stored before them decode, and a
// schema that uses none of them encodes as it always did. `grants` is left out when it holds
// CloudKit's defaults for the type, which is what a schema without the key always had; a type
// that grants nothing is stored as `"grants": {}`.

extension RecordTypeSchema: Codable {
    private enum CodingKeys: String, CodingKey {
        case recordType, fields, compoundIndexes, grants
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        recordType = try container.decode(String.self, forKey: .recordType)
        fields = try container.decode([Field].self, forKey: .fields)
        compoundIndexes = try container.decodeIfPresent([CompoundIndex].self, forKey: .compoundIndexes) ?? []
        if let grantsByName = try container.decodeIfPresent([String: RecordPermissions].self, forKey: .grants) {
            grants = Dictionary(uniqueKeysWithValues: grantsByName.map { (SecurityRole($0.key), $0.value) })
        } else {
            grants = Self.defaultGrants(forRecordType: recordType)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordType, forKey: .recordType)
        try container.encode(fields, forKey: .fields)
        try container.encode(compoundIndexes, forKey: .compoundIndexes)
        // The grants that apply, so that every engine reads them alike (a `Users` type that
        // grants nothing has the `Users` grants; a role granted nothing is left out).
        let applying = effectiveGrants
        if applying != Self.defaultGrants(forRecordType: recordType) {
            try container.encode(Dictionary(uniqueKeysWithValues: applying.map { ($0.key.name, $0.value) }), forKey: .grants)
        }
    }
}

extension RecordTypeSchema.Field: Codable {
    private enum CodingKeys: String, CodingKey {
        case name, type, indexes, isEncrypted, isNumber
        /// Written only for a bare `NUMBER`, so that every other stored schema keeps its text.
        case numberWithoutPreferredType
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        type = try container.decode(FieldType.self, forKey: .type)
        indexes = try container.decode(RecordTypeSchema.Indexes.self, forKey: .indexes)
        isEncrypted = try container.decodeIfPresent(Bool.self, forKey: .isEncrypted) ?? false
        isNumber = try container.decodeIfPresent(Bool.self, forKey: .isNumber) ?? false
        let withoutPreferredType = try container.decodeIfPresent(Bool.self, forKey: .numberWithoutPreferredType) ?? false
        namesPreferredType = !(isNumber && withoutPreferredType)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(indexes, forKey: .indexes)
        if isEncrypted { try container.encode(true, forKey: .isEncrypted) }
        if isNumber { try container.encode(true, forKey: .isNumber) }
        if !namesPreferredType { try container.encode(true, forKey: .numberWithoutPreferredType) }
    }
}
