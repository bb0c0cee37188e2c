import Foundation

extension Container {
    /// Saves record type schemas and builds their indexes; returns all the container's schemas.
    ///
    /// ```swift
    /// var schema = RecordTypeSchema(recordType: "Todo")
    /// schema.addField("title", type: .string, indexes: [.queryable, .searchable])
    /// try await container.saveSchema(schema)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a bad schema; store errors.
    @discardableResult
    public func saveSchema(_ schemas: RecordTypeSchema...) async throws -> [RecordTypeSchema] {
        try await runSchemaOperation(ModifySchemasOperation(schemasToSave: schemas))
    }

    /// The record type schemas saved for this container.
    ///
    /// ```swift
    /// for schema in try await container.schemas() { print(schema.recordType) }
    /// ```
    public func schemas() async throws -> [RecordTypeSchema] {
        try await runSchemaOperation(ModifySchemasOperation())
    }

    private func runSchemaOperation(_ op: ModifySchemasOperation) async throws -> [RecordTypeSchema] {
        let result = Collector<[RecordTypeSchema]>()
        try await publicCloudDatabase.run { finish in
            op.modifySchemasResultBlock = { outcome in
                if case .success(let schemas) = outcome { result.append(schemas) }
                finish(outcome.map { _ in () })
            }
            return op
        }
        return result.items.first ?? []
    }
}
