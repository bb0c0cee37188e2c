// `import CloudKit` on Linux: Stratus under CloudKit's names.
//
// ```swift
// import CloudKit
//
// let database = CKContainer.default().privateCloudDatabase
// let note = CKRecord(recordType: "Note")
// note["title"] = "Water the plants"
// let saved = try await database.save(note)
// ```
//
// The module brings Stratus (the model, operations and convenience API), the embedded SQLite
// store (`CKContainer.default()`, `CKContainer(identifier:)`), the PostgreSQL engine and the
// store chooser (`Container(identifier:store:)`, which follows `$STRATUS_STORE` to either), and
// adds CloudKit's `CK` names for all of them (`CloudKitTypeNames.swift`, `CloudKitConstants.swift`).
@_exported import Stratus
@_exported import StratusPostgres
@_exported import StratusSQLite
@_exported import StratusStores
