import Foundation

/// Saves record type schemas (fields, indexes, grants) into the development schema of the
/// database's container, or fetches the environment's record types.
///
/// Schemas belong to the container's environment: every database of it uses the same types
/// and indexes. A saved type may not change the type of a field while the type has records
/// (CloudKit never changes a field's type): the operation then fails with `invalidArguments`
/// and saves nothing. Saving a schema builds its indexes over the records already stored, which
/// takes time on a large store. The production schema changes only by
/// ``Container/deploySchema()``; saving there fails with `invalidArguments`. Custom roles a
/// saved type grants to are created when the schema lacks them. A save that would take the
/// schema past ``limits`` (record types, fields, indexes, roles, as a schema file is counted)
/// fails with `invalidArguments` and saves nothing.
///
/// ```swift
/// var schema = RecordTypeSchema(recordType: "Todo")
/// schema.addField("createdAt", type: .timestamp, indexes: [.queryable, .sortable])
/// let op = ModifySchemasOperation(schemasToSave: [schema])
/// op.modifySchemasResultBlock = { print($0) }
/// database.add(op)
/// ```
public final class ModifySchemasOperation: DatabaseOperation, @unchecked Sendable {
    public var schemasToSave: [RecordTypeSchema]
    /// How much the saved schema may hold; Stratus's defaults unless raised. A count the
    /// schema already holds past a limit may stay, not grow.
    ///
    /// ```swift
    /// op.limits.fieldsPerRecordType = 2_000
    /// ```
    public var limits = ContainerSchema.Limits()
    /// Called last with the environment's record types (by name) after the save, or the error.
    public var modifySchemasResultBlock: ((Result<[RecordTypeSchema], any Error>) -> Void)?

    private var savedSchemas: [RecordTypeSchema] = []

    /// With no schemas to save, the operation only fetches the container's schemas.
    public init(schemasToSave: [RecordTypeSchema] = []) {
        self.schemasToSave = schemasToSave
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        for schema in schemasToSave { try schema.validate() }
        if !schemasToSave.isEmpty {
            guard context.environment == .development else {
                return StratusError(.invalidArguments, "the production schema changes only by deploying the development schema; save the record types in development, then deploy")
            }
            let saving = schemasToSave
            let limits = limits
            let identifier = Container.Environment.split(storageContainer: context.storageContainer).containerIdentifier
            let productionKey = Container.Environment.production.storageContainer(for: identifier)
            // The stored values are checked outside the transaction that stores the types (a
            // scan must not hold every writer back); when saves grew the saved types meanwhile,
            // the check runs again against what they made.
            for _ in 0..<Self.attempts {
                // A field keeps the type its records hold it with (CloudKit never changes one).
                let current = try withRetry { try engine.fetchSchema(storageContainer: context.storageContainer) }
                var replacement = current
                for type in saving {
                    replacement.recordTypes.removeAll { $0.recordType == type.recordType }
                    replacement.recordTypes.append(type)
                }
                do {
                    try withRetry { try engine.checkFieldTypes(from: current, to: replacement, storageContainer: context.storageContainer, for: "save the record types") }
                    let saved: [RecordTypeSchema]? = try withRetry {
                        try engine.modifySchema(storageContainer: context.storageContainer, comparedWith: productionKey) { schema, production in
                            // Growth of other types changes nothing the check looked at.
                            guard saving.allSatisfy({ schema.recordType($0.recordType) == current.recordType($0.recordType) }) else { return nil }
                            let before = schema
                            for type in saving {
                                schema.recordTypes.removeAll { $0.recordType == type.recordType }
                                schema.recordTypes.append(type)
                                schema.roles.formUnion(type.grants.keys.filter { !$0.isSystem })
                            }
                            try schema.validate()
                            try schema.checkLimits(limits, comparedWith: before)
                            // Development never holds what cannot be deployed: production keeps
                            // every type and field it has, with its type.
                            var deployable = schema
                            deployable.includeCloudKitDeclarations()
                            try deployable.checkKeeps(production, for: "save the record types")
                            return schema.recordTypes.sorted { $0.recordType < $1.recordType }
                        }
                    }
                    if let saved {
                        savedSchemas = saved
                        return nil
                    }
                } catch let error as StratusError where error.code == .invalidArguments {
                    return error
                }
            }
            return StratusError(.zoneBusy, "development's schema kept changing while the record types were checked (saves adding fields to it); nothing was saved, try again",
                                retryAfterSeconds: 1)
        }
        savedSchemas = try withRetry { try engine.fetchSchema(storageContainer: context.storageContainer).recordTypes.sorted { $0.recordType < $1.recordType } }
        return nil
    }

    /// How many times a save is checked before it gives up on a schema that saves keep growing.
    private static let attempts = 5

    override func complete(with error: StratusError?) {
        modifySchemasResultBlock?(error.map { .failure($0) } ?? .success(savedSchemas))
    }
}
