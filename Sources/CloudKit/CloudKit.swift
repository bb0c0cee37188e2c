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
// The module brings Stratus (the model, operations and convenience API), both engines and the
// store chooser (`Container(identifier:store:)`), and adds CloudKit's `CK` names for all of them
// (`CloudKitTypeNames.swift`, `CloudKitConstants.swift`). `CKContainer(identifier:)` and
// `CKContainer.default()` cannot fail, as CloudKit's cannot, and open the store `$STRATUS_STORE`
// names on either engine (`CKContainer+DefaultStore.swift`). As Apple's module brings
// CoreLocation, this one brings Stratus's `CoreLocation` (`CLLocation` and its companions).
@_exported import CoreLocation
@_exported import Stratus
@_exported import StratusPostgres
@_exported import StratusSQLite
@_exported import StratusStores
