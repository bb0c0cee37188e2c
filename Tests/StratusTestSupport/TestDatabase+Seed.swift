import Foundation
@_spi(StratusEngine) import Stratus

extension TestDatabase {
    /// Stores records as they are, through the engine, past the core's schema and role rules:
    /// data of any shape (one field holding values of several types), as stores made before
    /// types were enforced, and development schemas replaced since, hold it. For the query
    /// cases, whose subject is what engines do with whatever is stored. A record with the name
    /// of a stored one replaces it; records carry no parent, assets or `.deleteSelf` references.
    ///
    /// Answers the records as stored, as ``save(_:in:savePolicy:)`` does.
    ///
    /// ```swift
    /// try await TestDatabase.seed([makeRecord("Item", "a", ["code": .int64(1)]), makeRecord("Item", "b", ["code": .string("1")])], in: database)
    /// ```
    @discardableResult
    public static func seed(_ records: [Record], in database: Database) async throws -> [Record] {
        let context = try database.resolvedContext()
        let now = Date()
        try database.engine.writeRecords(in: context) { transaction in
            for (index, record) in records.enumerated() {
                let system = Record.SystemFields(
                    creationDate: record.creationDate ?? now, modificationDate: record.modificationDate ?? now,
                    creatorUserRecordID: record.systemFields.creatorUserRecordID ?? context.userRecordID,
                    lastModifiedUserRecordID: record.systemFields.lastModifiedUserRecordID ?? context.userRecordID,
                    recordChangeTag: "seed\(index)-\(UUID().uuidString.prefix(8).lowercased())")
                let fields = record.fieldValues, encrypted = record.encryptedKeys
                let row = RecordRow(recordID: record.recordID, recordType: record.recordType, systemFields: system, fields: fields,
                                    encryptedKeys: encrypted, parent: nil, document: FieldDocument.encodedBytes(fields, encryptedKeys: encrypted))
                try transaction.writeRecord(row, replacing: try transaction.recordExists(record.recordID))
            }
        }
        let stored = try await database.records(for: records.map(\.recordID))
        return try records.map { try stored[$0.recordID]!.get() }
    }
}

extension EngineConformance.Environment {
    /// The user record name a login of the conformance container has (no directory entry).
    public func recordName(of login: String) -> String {
        UserDirectoryEntry.derivedRecordName(containerIdentifier: Self.containerIdentifier, login: login)
    }
}
