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
// The module opens Stratus (the model, operations and convenience API) on both engines through
// the store chooser, under CloudKit's `CK` names only, as Apple's module takes no other names
// (a program's own `Database` or `SyncEngine`, or GRDB's, stays unambiguous); `import Stratus`
// brings Stratus's names. The `CK` names are in `CloudKitTypeNames.swift` and
// `CloudKitConstants.swift`. `CKContainer(identifier:)` and
// `CKContainer.default()` cannot fail, as CloudKit's cannot, and open the store `$STRATUS_STORE`
// names on either engine (`CKContainer+DefaultStore.swift`). As Apple's module brings
// CoreLocation, this one brings Stratus's `CoreLocation` (`CLLocation` and its companions).
@_exported import CoreLocation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusStores
