import Foundation

extension Container {
    /// Saves record type schemas into the development schema and builds their indexes; returns
    /// all the environment's record types.
    ///
    /// A type saved replaces the type's previous declaration; indexes it no longer declares go.
    ///
    /// ```swift
    /// var schema = RecordTypeSchema(recordType: "Todo")
    /// schema.addField("title", type: .string, indexes: [.queryable, .searchable])
    /// try await container.saveSchema(schema)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a bad schema, or in production (whose
    ///   schema changes only by ``deploySchema()``); store errors.
    @discardableResult
    public func saveSchema(_ schemas: RecordTypeSchema...) async throws -> [RecordTypeSchema] {
        try await runSchemaOperation(ModifySchemasOperation(schemasToSave: schemas))
    }

    /// The record type schemas of this environment.
    ///
    /// ```swift
    /// for schema in try await container.schemas() { print(schema.recordType) }
    /// ```
    public func schemas() async throws -> [RecordTypeSchema] {
        try await runSchemaOperation(ModifySchemasOperation())
    }

    /// This environment's whole schema: its roles and record types, with the `Users` type every
    /// CloudKit container has.
    ///
    /// ```swift
    /// let schema = try await container.schema()
    /// print(SchemaWriter().text(for: schema))   // StratusTransfer: the .ckdb file
    /// ```
    public func schema() async throws -> ContainerSchema {
        try await publicCloudDatabase.perform { engine, context in
            var schema = try engine.fetchSchema(storageContainer: context.storageContainer)
            schema.includeCloudKitDeclarations()
            return schema
        }
    }

    /// Replaces the development schema with `schema` (roles, record types, indexes, grants),
    /// as `cktool import-schema` does, and builds its indexes.
    ///
    /// The schema must keep every record type and field production has, with its type
    /// (``ContainerSchema/checkKeeps(_:for:)``), and may not give a field a type that records of
    /// development hold it with otherwise, a field dropped before included
    /// (``StorageEngine/checkFieldTypes(from:to:storageContainer:for:)``): CloudKit never
    /// changes a field's type. It may not hold more than `limits` allow (as a schema file is
    /// counted), unless the development schema held as much already. Refused, nothing changes.
    ///
    /// ```swift
    /// let schema = try SchemaReader().read(text)   // StratusTransfer
    /// try await container.replaceSchema(schema)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for an invalid schema, one past `limits`,
    ///   one that drops or retypes what production has or gives a field a type its records do
    ///   not hold, or a production container; `zoneBusy` when saves kept growing the
    ///   development schema while the replacement was checked; store errors.
    @discardableResult
    public func replaceSchema(_ schema: ContainerSchema, limits: ContainerSchema.Limits = ContainerSchema.Limits()) async throws -> ContainerSchema {
        guard environment == .development else {
            throw StratusError(.invalidArguments, "the production schema changes only by deploying the development schema; replace the development schema, then deploy")
        }
        var replacement = schema
        replacement.includeCloudKitDeclarations()
        try replacement.validate()
        let stored = replacement
        let developmentKey = Environment.development.storageContainer(for: identifier)
        let productionKey = Environment.production.storageContainer(for: identifier)
        return try await publicCloudDatabase.perform { engine, _ in
            let production = try engine.fetchSchema(storageContainer: productionKey)
            try stored.checkKeeps(production, for: "replace the development schema")
            // The stored values are checked outside the transaction that stores the schema (a
            // scan must not hold every writer back): when records saved meanwhile grew the
            // schema, their values were not checked, and the check runs again.
            for _ in 0..<Self.schemaReplacementAttempts {
                let development = try engine.fetchSchema(storageContainer: developmentKey)
                try stored.checkLimits(limits, comparedWith: development)
                try engine.checkFieldTypes(from: development, to: stored, storageContainer: developmentKey, for: "replace the development schema")
                let replaced = try engine.modifySchema(storageContainer: developmentKey, comparedWith: productionKey) { schema, production -> Bool in
                    guard schema == development else { return false }
                    // Again in the transaction that stores it: a deploy since the check above
                    // may have given production what this replacement drops.
                    try stored.checkKeeps(production, for: "replace the development schema")
                    try stored.checkLimits(limits, comparedWith: schema)
                    schema = stored
                    return true
                }
                if replaced { return stored }
            }
            throw StratusError(.zoneBusy, "development's schema kept changing while the replacement was checked (saves adding fields to it); nothing was changed, try again",
                               retryAfterSeconds: 1)
        }
    }

    /// How many times a replacement of development is checked before it gives up on a schema
    /// that saves keep growing.
    private static let schemaReplacementAttempts = 5

    /// How many records each record type has in this environment: every database, user and
    /// zone counted, from the store's inventory (no record is read). A tool that replaces the
    /// schema asks it to say which dropped types still hold records.
    ///
    /// ```swift
    /// let counts = try await container.recordCountsByType()   // ["Item": 12, "Reminder": 1]
    /// ```
    ///
    /// - Throws: store errors.
    public func recordCountsByType() async throws -> [String: Int] {
        let key = environment.storageContainer(for: identifier)
        return try await publicCloudDatabase.perform { engine, _ in try engine.recordCountsByType(storageContainer: key) }
    }

    /// Checks, changing nothing, that ``replaceSchema(_:limits:)`` would take `schema`: it keeps
    /// what production has, gives no field a type that development's records hold it with
    /// otherwise, and stays within `limits`.
    ///
    /// ```swift
    /// try await container.checkSchemaReplacement(schema, for: "import schema.ckdb")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what the replacement would drop or
    ///   retype (the message starts `cannot ACTION:`); store errors.
    public func checkSchemaReplacement(_ schema: ContainerSchema, for action: String, limits: ContainerSchema.Limits = ContainerSchema.Limits()) async throws {
        var replacement = schema
        replacement.includeCloudKitDeclarations()
        let checked = replacement
        let developmentKey = Environment.development.storageContainer(for: identifier)
        let productionKey = Environment.production.storageContainer(for: identifier)
        try await publicCloudDatabase.perform { engine, _ in
            try checked.checkKeeps(try engine.fetchSchema(storageContainer: productionKey), for: action)
            let development = try engine.fetchSchema(storageContainer: developmentKey)
            try checked.checkLimits(limits, comparedWith: development)
            try engine.checkFieldTypes(from: development, to: checked, storageContainer: developmentKey, for: action)
        }
    }

    /// Deploys the development schema to production, as CloudKit's "Deploy Schema Changes"
    /// does: production gets development's record types, fields, indexes, roles and grants.
    /// Additive only: a type or field production has that development lacks or retyped fails
    /// the deploy, and production stays as it was. Records are not copied.
    ///
    /// ```swift
    /// let deployed = try await container.deploySchema()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what the deploy would remove or
    ///   retype; store errors.
    @discardableResult
    public func deploySchema() async throws -> ContainerSchema {
        let developmentKey = Environment.development.storageContainer(for: identifier)
        let productionKey = Environment.production.storageContainer(for: identifier)
        return try await publicCloudDatabase.perform { engine, _ in
            // Development as the transaction that stores production reads it: a replacement of
            // development cannot come between the read and the deploy.
            try engine.modifySchema(storageContainer: productionKey, comparedWith: developmentKey) { production, development in
                var deployed = development
                deployed.includeCloudKitDeclarations()
                try deployed.checkKeeps(production, for: "deploy the development schema to production")
                production = deployed
                return deployed
            }
        }
    }

    /// Resets the development environment, as CloudKit's "Reset Environment" does: deletes
    /// every zone and record of development (every database, every user) and puts the
    /// development schema back to production's. Production is untouched. Change tokens of
    /// development taken before expire.
    ///
    /// ```swift
    /// try await container.resetDevelopmentEnvironment()
    /// ```
    ///
    /// - Throws: `permissionFailure` when the engine's connection reaches only some of the
    ///   store's rows (a PostgreSQL role bound by row-level security): a reset deletes every
    ///   user's rows and changes the schema, the job of the role that owns the store's tables;
    ///   store errors.
    public func resetDevelopmentEnvironment() async throws {
        let developmentKey = Environment.development.storageContainer(for: identifier)
        let productionKey = Environment.production.storageContainer(for: identifier)
        try await publicCloudDatabase.perform { engine, _ in
            // Asked first: such a role would otherwise be refused halfway with only the server's
            // "permission denied for table record_types", or delete only the rows it reaches.
            if let limit = try (engine as? any RowAccessReporting)?.rowAccessLimit() {
                throw StratusError(.permissionFailure, "resetting the development environment deletes every user's records and zones, which is the job of the role that owns the store's tables: \(limit)")
            }
            // Production is read by the reset's own transaction: a deploy committing meanwhile
            // would otherwise leave development without what it gave production.
            try engine.resetEnvironment(storageContainer: developmentKey, toSchemaOf: productionKey)
        }
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
