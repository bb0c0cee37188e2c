extension ContainerSchema {
    /// The fields whose declaration `replacement` makes or changes the type of: retyped ones,
    /// and added ones (a field dropped from the schema may still be held by records).
    func typeDeclarations(to replacement: ContainerSchema) -> [(recordType: String, old: RecordTypeSchema.Field?, new: RecordTypeSchema.Field)] {
        changes(to: replacement).compactMap { change in
            switch change {
            case .fieldRetyped(let type, let old, let new): (type, old, new)
            case .fieldAdded(let type, let new): (type, nil, new)
            default: nil
            }
        }
    }

    /// `INT64`, `ENCRYPTED STRING`, `NUMBER PREFERRED AS DOUBLE`.
    static func declaredType(_ field: RecordTypeSchema.Field) -> String {
        String(SchemaChange.text(RecordTypeSchema.Field(field.name, type: field.type, isEncrypted: field.isEncrypted, isNumber: field.isNumber,
                                                              namesPreferredType: field.namesPreferredType))
            .drop { $0 != " " }.dropFirst())
    }
}

extension RecordTypeSchema.Field {
    /// Whether a value of type `given` (encrypted or not) fits this declaration: its type, or
    /// INT64 and DOUBLE (or their lists) for a `NUMBER` field, with the same encryption.
    func takes(_ given: FieldType, encrypted: Bool) -> Bool {
        guard encrypted == isEncrypted else { return false }
        if given == type { return true }
        guard isNumber else { return false }
        return type.isList ? (given == .int64List || given == .doubleList) : (given == .int64 || given == .double)
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
        var counts: [String: Int] = [:]
        for (_, zone) in try zonesOfEnvironment(storageContainer) {
            for (type, count) in zone.recordCounts { counts[type, default: 0] += count }
        }
        return counts
    }

    /// Checks that `replacement` gives no field a type that records of the environment hold
    /// it with otherwise: CloudKit never changes a field's type, and stored values would no
    /// longer have their field's type. A retyped field and a field added back after it was
    /// dropped from the schema are both checked against the values stored, in every database,
    /// user and zone; a field that no record holds may take any type (development).
    ///
    /// Each record type with records whose fields the replacement declares anew is read once
    /// (only those fields), so the check costs a scan of those types, never of the others.
    ///
    /// ```swift
    /// try engine.checkFieldTypes(from: development, to: imported, storageContainer: key, for: "import schema.ckdb")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming each such field, its old and new
    ///   declaration, how many records hold it and as what; store errors.
    @_spi(StratusEngine) public func checkFieldTypes(from current: ContainerSchema, to replacement: ContainerSchema,
                                                     storageContainer: String, for action: String) throws {
        let declarations = current.typeDeclarations(to: replacement)
        guard !declarations.isEmpty else { return }
        let zones = try zonesOfEnvironment(storageContainer)
        var problems: [String] = []
        for (type, changes) in Dictionary(grouping: declarations, by: \.recordType).sorted(by: { $0.key < $1.key }) {
            let typeZones = zones.filter { ($0.zone.recordCounts[type] ?? 0) > 0 }
            guard !typeZones.isEmpty else { continue }
            let held = try heldTypes(of: changes.map(\.new), recordType: type, in: typeZones)
            for change in changes.sorted(by: { $0.new.name < $1.new.name }) {
                guard let misfits = held[change.new.name], !misfits.isEmpty else { continue }
                let count = misfits.values.reduce(0, +)
                let spelled = misfits.keys.sorted().joined(separator: " or ")
                let holders = "\(count) record\(count == 1 ? "" : "s") of \(type) hold\(count == 1 ? "s" : "") it as \(spelled)"
                if let old = change.old {
                    problems.append("field '\(old.name)' of \(type) is \(ContainerSchema.declaredType(old)) and would become \(ContainerSchema.declaredType(change.new)), but \(holders)")
                } else {
                    problems.append("field '\(change.new.name)' of \(type) would be \(ContainerSchema.declaredType(change.new)), but \(holders)")
                }
            }
        }
        guard !problems.isEmpty else { return }
        throw StratusError(.invalidArguments, "cannot \(action): " + problems.joined(separator: "; ")
                           + " (CloudKit never changes a field's type; nothing was changed)")
    }

    /// For each field, the declarations (as text) its stored values have that `fields` do not
    /// take, with how many records hold each.
    private func heldTypes(of fields: [RecordTypeSchema.Field], recordType: String,
                           in zones: [(database: DatabaseContext, zone: StoreInventory.ZoneEntry)]) throws -> [String: [String: Int]] {
        let byName = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var misfits: [String: [String: Int]] = [:]
        for (database, zone) in zones {
            // Desired keys are plain identifiers; the dotted fields of CloudKit's own types
            // (`cloudkit.title`) are read with the whole record.
            let plain = byName.keys.allSatisfy { (try? Naming.checkIdentifier($0, kind: "field name")) != nil }
            let query = try CompiledQuery(Query(recordType: recordType), zoneID: zone.zone.zoneID, desiredKeys: plain ? byName.keys.sorted() : nil)
            let stream = try openQueryStream(query, in: database, after: nil)
            defer { stream.close() }
            while case let page = try stream.next(limit: 1_000), !page.records.isEmpty {
                for record in page.records {
                    let encrypted = record.encryptedKeys
                    for (name, value) in record.fieldValues {
                        guard let field = byName[name] else { continue }
                        let isEncrypted = encrypted.contains(name)
                        // As a save judges it (RecordTypeRules): an empty list that came without
                        // an element type fits any list field, and only its encryption must
                        // match; one that named its type is a list of that type.
                        let untyped = value.isEmptyList && record.jsonExtras.holdsUntypedEmptyList(name)
                        if !field.takes(untyped && field.type.isList ? field.type : value.type, encrypted: isEncrypted) {
                            // An untyped empty list is no list of any one type, whichever stands in for it.
                            let held = untyped ? "an empty list" + (isEncrypted ? " (encrypted)" : "")
                                : (isEncrypted ? "ENCRYPTED " : "") + (value.isEmptyList ? "an empty " : "") + value.type.rawValue
                            misfits[name, default: [:]][held, default: 0] += 1
                        }
                    }
                }
            }
        }
        return misfits
    }

    /// The zones of one environment's databases, each with a context that reads every row of
    /// it (its owner's, as an administrator: security roles do not hide records from a check).
    private func zonesOfEnvironment(_ storageContainer: String) throws -> [(database: DatabaseContext, zone: StoreInventory.ZoneEntry)] {
        let (identifier, environment) = Container.Environment.split(storageContainer: storageContainer)
        var zones: [(database: DatabaseContext, zone: StoreInventory.ZoneEntry)] = []
        for database in try inventory().databases where database.containerIdentifier == identifier && database.environment == environment {
            var context = DatabaseContext.administrator(containerIdentifier: identifier, environment: environment, scope: database.scope, owner: database.owner)
            // The check decides a schema write: a lagging standby would hide a record just saved.
            context.readsLatestCommits = true
            for zone in database.zones { zones.append((context, zone)) }
        }
        return zones
    }
}
