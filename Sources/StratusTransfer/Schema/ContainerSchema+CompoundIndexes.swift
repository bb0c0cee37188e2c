import Stratus

extension ContainerSchema {
    /// This schema, read from CloudKit's schema language, with the compound indexes of `stored`
    /// that still fit it: the language has no form for them (``SchemaWriter`` leaves them out),
    /// so a file exported, edited and imported again says nothing about them, and dropping them
    /// would make the queries they served scan. An index is kept for a record type the file
    /// still declares, when every field it names is still declared and may be in one (a
    /// STRING, INT64, DOUBLE, TIMESTAMP or REFERENCE field, not encrypted).
    ///
    /// ```swift
    /// let file = try SchemaReader().read(contentsOf: schemaFile)
    /// try await container.replaceSchema(file.keepingCompoundIndexes(of: try await container.schema()))
    /// ```
    public func keepingCompoundIndexes(of stored: ContainerSchema) -> ContainerSchema {
        var kept = self
        for (place, type) in kept.recordTypes.enumerated() {
            guard let old = stored.recordType(type.recordType) else { continue }
            for index in old.compoundIndexes where !type.compoundIndexes.contains(index) {
                // The schema's own rules decide what fits, so that what is kept always validates.
                let trial = RecordTypeSchema(recordType: type.recordType, fields: type.fields, compoundIndexes: [index])
                guard (try? trial.validate()) != nil else { continue }
                kept.recordTypes[place].compoundIndexes.append(index)
            }
        }
        return kept
    }
}
