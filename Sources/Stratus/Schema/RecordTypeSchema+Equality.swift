extension RecordTypeSchema {
    /// Equal when the record type, fields, compound indexes and grants are the same, whatever
    /// the order of the declarations (which CloudKit does not keep either); grants compare as
    /// they apply (a role granted nothing is as good as one not named; a `Users` type granting
    /// nothing has the `Users` grants).
    public static func == (lhs: RecordTypeSchema, rhs: RecordTypeSchema) -> Bool {
        lhs.recordType == rhs.recordType && lhs.effectiveGrants == rhs.effectiveGrants
            && lhs.fields.count == rhs.fields.count && Set(lhs.fields) == Set(rhs.fields)
            && lhs.compoundIndexes.count == rhs.compoundIndexes.count && Set(lhs.compoundIndexes) == Set(rhs.compoundIndexes)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(recordType)
        hasher.combine(effectiveGrants)
        hasher.combine(Set(fields))
        hasher.combine(Set(compoundIndexes))
    }
}
