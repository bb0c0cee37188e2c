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
// The module brings Foundation, as Apple's does, and Stratus (the model, operations and
// convenience API; Swift 6 requires the module that declares `CKRecord.ID`'s type to be visible
// where a public declaration names it), and opens it on both engines through the store chooser
// without bringing the engines' and the chooser's own names (a server's PostgresNIO
// `PostgresConnection` stays unambiguous). The `CK` names are in `CloudKitTypeNames.swift` and
// `CloudKitConstants.swift`. `CKContainer(identifier:)` and
// `CKContainer.default()` cannot fail, as CloudKit's cannot, and open the store `$STRATUS_STORE`
// names on either engine (`CKContainer+DefaultStore.swift`). As Apple's module brings
// CoreLocation, this one brings Stratus's `CoreLocation` (`CLLocation` and its companions).
@_exported import CoreLocation
@_exported import Foundation
@_exported import Stratus
import StratusPostgres
import StratusSQLite
import StratusStores
