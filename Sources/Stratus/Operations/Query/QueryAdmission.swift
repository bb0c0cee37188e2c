/// The checks a query passes before it runs, decided once above every engine.
///
/// - **Encrypted fields**: a condition or sort key on a field the schema declares encrypted
///   fails with `invalidArguments` naming the field, in every database and environment, as
///   in CloudKit (encrypted fields have no index).
/// - **Production**: a record type the schema does not have fails with `unknownItem` ("Did not
///   find record type"), and a filter or sort on a field without its index fails with
///   `invalidArguments` ("Field 'rank' is not marked sortable"), as CloudKit answers
///   (``Query/missingIndexes(in:)``). Development runs them, by scanning, and so does an
///   administrator's read (a whole-store copy) in production.
/// - **Public database**: the caller needs READ on the type (``RecordAccess``). When only
///   `_creator` may read, the query is restricted to the caller's own records; otherwise it
///   fails with `permissionFailure` (`notAuthenticated` for a caller who is not signed in).
///
/// ```swift
/// let admitted = try QueryAdmission.admit(compiled, engine: engine, context: context)
/// let page = try engine.queryRecords(admitted, in: context, after: nil, limit: 100)
/// ```
enum QueryAdmission {
    /// `query` as it may run for the caller, or CloudKit's error.
    ///
    /// A query continued from a cursor passes the same checks; its restriction to the caller's
    /// own records, when one applies, must be this caller's.
    static func admit(_ query: CompiledQuery, engine: any StorageEngine, context: DatabaseContext, continuing: Bool = false) throws -> CompiledQuery {
        let query = try namingCurrentUser(query, context: context)
        // An administrator (a whole-store copy) reads what the store holds, as CloudKit's own
        // servers do: the production index rules are for the apps' queries, and roles do not
        // limit it (``RecordAccess``).
        let checksProduction = context.environment == .production && !context.isAdministrator
        let checksSchema = checksProduction || context.scope == .public
        // A query that names no field of its records needs the schema only for the checks below.
        guard checksSchema || namesFields(query) else { return query }
        let typeSchema = try engine.fetchRecordTypeSchema(query.recordType, storageContainer: context.storageContainer)
        if let refusal = encryptedFieldRefusal(query, schema: typeSchema) { throw refusal }
        guard checksSchema else { return query }
        let restriction = context.userRecordID.map(ownRecordsCondition)
        let asked = continuing ? removing(restriction, from: query.predicate) : query.predicate
        if checksProduction {
            guard typeSchema != nil else {
                throw StratusError(.unknownItem, "Did not find record type: \(query.recordType) (the production schema has no such type; deploy the development schema)")
            }
            let missing = userQuery(query, predicate: asked).missingIndexes(in: typeSchema)
            if let first = missing.first {
                throw StratusError(.invalidArguments, refusal(first, schema: typeSchema) + (missing.count > 1 ? " (and \(missing.count - 1) more: " + missing.dropFirst().map(\.description).joined(separator: ", ") + ")" : ""))
            }
        }
        guard context.scope == .public else { return query }
        let access = RecordAccess(typeSchema, context: context)
        if access.everyRecord.contains(.read) {
            if continuing && asked != query.predicate {
                throw StratusError(.invalidArguments, "the cursor was made for another user's query; start the query again")
            }
            return query
        }
        guard let restriction, access.ownRecords.contains(.read) else {
            throw access.denial(.read, recordID: nil, recordType: query.recordType, creator: nil)
                ?? StratusError(.permissionFailure, "READ operation not permitted on records of type \(query.recordType)")
        }
        if continuing {
            guard asked != query.predicate else {
                throw StratusError(.permissionFailure, "READ operation not permitted on records of type \(query.recordType): the cursor is not restricted to the caller's own records; start the query again")
            }
            return query
        }
        let restricted = userQuery(query, predicate: .and([query.predicate, restriction]))
        return try CompiledQuery(restricted, zoneID: query.zoneID, desiredKeys: query.desiredKeys)
    }

    /// `query` with `__defaultOwner__` (`CurrentUserDefaultName`) in a condition on
    /// `creatorUserRecordID` or `lastModifiedUserRecordID` read as the caller's user record name,
    /// as CloudKit reads it: records hand the current user out under that name, and a predicate
    /// built from one (`creatorUserRecordID == %@` with `record.creatorUserRecordID`) finds the
    /// caller's records.
    static func namingCurrentUser(_ query: CompiledQuery, context: DatabaseContext) throws -> CompiledQuery {
        guard let me = context.userRecordName else { return query }
        let named = query.predicate.namingCurrentUser(me)
        guard named != query.predicate else { return query }
        return try CompiledQuery(userQuery(query, predicate: named), zoneID: query.zoneID, desiredKeys: query.desiredKeys)
    }

    /// CloudKit's words for a missing index: "Field 'rank' is not marked sortable", or for a
    /// field the type does not have: "Did not find field: 'rnak' in type: 'Item'".
    static func refusal(_ requirement: IndexRequirement, schema: RecordTypeSchema? = nil) -> String {
        guard let field = requirement.field else {
            return "Type '\(requirement.recordType)' has no field marked searchable, which self CONTAINS needs; declare one SEARCHABLE in the production schema"
        }
        if let schema, SystemField(rawValue: field) == nil, schema.field(field) == nil {
            let parentHint = field == "parent" ? "; the record's parent is ___parent, Record.SystemFieldKey.parent" : ""
            return "Did not find field: '\(field)' in type: '\(requirement.recordType)' (the production schema has no such field: check its spelling, or deploy the development schema\(parentHint))"
        }
        if let system = SystemField(rawValue: field), system.declaredType == nil {
            return "Field '\(field)' is not marked \(requirement.attribute.lowercased()); no schema can mark it (\"\(system.cloudKitName)\" takes no index), so no query in production may use it"
        }
        return "Field '\(field)' is not marked \(requirement.attribute.lowercased()); declare \(requirement) in the production schema"
    }

    /// The condition that keeps a query to the records `user` created.
    private static func ownRecordsCondition(_ user: Record.ID) -> QueryPredicate {
        .condition(.compare(.creatorUserRecordID, .equal, .reference(Record.Reference(recordID: user, action: .none))))
    }

    /// `predicate` without `condition` among its top-level parts.
    private static func removing(_ condition: QueryPredicate?, from predicate: QueryPredicate) -> QueryPredicate {
        guard let condition else { return predicate }
        switch predicate {
        case condition: return .all
        case .and(let parts) where parts.contains(condition):
            let rest = parts.filter { $0 != condition }
            return rest.count == 1 ? rest[0] : .and(rest)
        default: return predicate
        }
    }

    /// The query as its caller asked it, for ``Query/missingIndexes(in:)``.
    private static func userQuery(_ query: CompiledQuery, predicate: QueryPredicate) -> Query {
        let asked = Query(recordType: query.recordType, predicate: predicate)
        asked.sortDescriptors = query.sortKeys.map { key in
            key.distanceFrom.map { RecordSortDescriptor(distanceOf: key.key.description, from: $0, ascending: key.ascending) }
                ?? RecordSortDescriptor(key: key.key.description, ascending: key.ascending)
        }
        return asked
    }
}

extension QueryPredicate {
    /// The predicate with `__defaultOwner__` in conditions on the record's creator or last
    /// modifier replaced by the user record name `me` (see ``QueryAdmission/namingCurrentUser(_:context:)``).
    func namingCurrentUser(_ me: String) -> QueryPredicate {
        mappingValues(of: { $0 == .creatorUserRecordID || $0 == .lastModifiedUserRecordID }) { _, value in
            switch value {
            case .reference(let reference) where reference.recordID.recordName == RecordZone.ID.currentUserDefaultOwner:
                .reference(Record.Reference(recordID: Record.ID(recordName: me, zoneID: reference.recordID.zoneID), action: reference.action))
            case .string(RecordZone.ID.currentUserDefaultOwner): .string(me)
            default: value
            }
        }
    }
}
