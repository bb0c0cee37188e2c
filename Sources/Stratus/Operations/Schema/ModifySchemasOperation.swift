import Foundation

/// Saves record type schemas (indexes) for the database's container, or fetches them.
///
/// Schemas belong to the container: every database of it uses the same indexes. Saving a
/// schema builds its indexes over the records already stored, which takes time on a large store.
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
    /// Called last with the container's schemas after the save, or the error.
    public var modifySchemasResultBlock: (@Sendable (Result<[RecordTypeSchema], any Error>) -> Void)?

    private var savedSchemas: [RecordTypeSchema] = []

    /// With no schemas to save, the operation only fetches the container's schemas.
    public init(schemasToSave: [RecordTypeSchema] = []) {
        self.schemasToSave = schemasToSave
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        for schema in schemasToSave { try schema.validate() }
        if !schemasToSave.isEmpty {
            try withRetry { try engine.saveSchemas(schemasToSave, containerIdentifier: context.containerIdentifier) }
        }
        savedSchemas = try withRetry { try engine.fetchSchemas(containerIdentifier: context.containerIdentifier) }
        return nil
    }

    override func complete(with error: StratusError?) {
        modifySchemasResultBlock?(error.map { .failure($0) } ?? .success(savedSchemas))
    }
}
