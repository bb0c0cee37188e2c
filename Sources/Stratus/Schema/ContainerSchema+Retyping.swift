extension ContainerSchema {
    /// Checks that `replacement` changes the type of no field (its type, encryption or `NUMBER`
    /// preference) of a record type that has records in this schema's environment: CloudKit
    /// never changes a field's type, and stored values would no longer have their field's
    /// type. A type without records may be retyped in development.
    ///
    /// `recordCounts` are the environment's records by type, every database, user and zone
    /// counted (``StorageEngine/recordCountsByType(storageContainer:)``).
    ///
    /// ```swift
    /// try development.checkRetypes(to: imported, recordCounts: ["Item": 12], for: "import schema.ckdb")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming each such field, its type, its old
    ///   and its new type, and how many records its type has.
    public func checkRetypes(to replacement: ContainerSchema, recordCounts: [String: Int], for action: String) throws {
        let problems = retypes(to: replacement).compactMap { change -> String? in
            guard case .fieldRetyped(let type, let old, let new) = change, let count = recordCounts[type], count > 0 else { return nil }
            return "field '\(old.name)' of \(type) is \(Self.declaredType(old)) and would become \(Self.declaredType(new)), "
                + "but \(type) has \(count) record\(count == 1 ? "" : "s")"
        }
        guard !problems.isEmpty else { return }
        throw StratusError(.invalidArguments, "cannot \(action): " + problems.joined(separator: "; ")
                           + " (CloudKit never changes a field's type; nothing was changed)")
    }

    /// The fields `replacement` gives another type, encryption or `NUMBER` preference.
    func retypes(to replacement: ContainerSchema) -> [SchemaChange] {
        changes(to: replacement).filter {
            if case .fieldRetyped = $0 { return true }
            return false
        }
    }

    /// `INT64`, `ENCRYPTED STRING`, `NUMBER PREFERRED AS DOUBLE`.
    private static func declaredType(_ field: RecordTypeSchema.Field) -> String {
        String(SchemaChange.text(RecordTypeSchema.Field(field.name, type: field.type, isEncrypted: field.isEncrypted, isNumber: field.isNumber))
            .dropFirst(field.name.count + 1))
    }
}

extension StorageEngine {
    /// How many records each record type has in one environment of a container
    /// (`storageContainer`, ``DatabaseContext/storageContainer``): every database, user and
    /// zone counted, from the store's inventory.
    ///
    /// ```swift
    /// let counts = try engine.recordCountsByType(storageContainer: context.storageContainer)   // ["Item": 12]
    /// ```
    ///
    /// - Throws: store errors.
    @_spi(StratusEngine) public func recordCountsByType(storageContainer: String) throws -> [String: Int] {
        let (identifier, environment) = Container.Environment.split(storageContainer: storageContainer)
        var counts: [String: Int] = [:]
        for database in try inventory().databases where database.containerIdentifier == identifier && database.environment == environment {
            for zone in database.zones {
                for (type, count) in zone.recordCounts { counts[type, default: 0] += count }
            }
        }
        return counts
    }
}
