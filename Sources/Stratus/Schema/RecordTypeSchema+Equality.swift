extension RecordTypeSchema {
    /// Equal when the record type, fields, compound indexes and grants are the same, whatever
    /// the order of the declarations (which CloudKit does not keep either); a role granted
    /// nothing is as good as one not named (the schema language has no line for it).
    public static func == (lhs: RecordTypeSchema, rhs: RecordTypeSchema) -> Bool {
        lhs.recordType == rhs.recordType && lhs.grantingRoles == rhs.grantingRoles
            && lhs.fields.count == rhs.fields.count && Set(lhs.fields) == Set(rhs.fields)
            && lhs.compoundIndexes.count == rhs.compoundIndexes.count && Set(lhs.compoundIndexes) == Set(rhs.compoundIndexes)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(recordType)
        hasher.combine(grantingRoles)
        hasher.combine(Set(fields))
        hasher.combine(Set(compoundIndexes))
    }

    private var grantingRoles: [SecurityRole: RecordPermissions] { grants.filter { !$0.value.isEmpty } }
}
