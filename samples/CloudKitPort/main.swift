// A CloudKit command-line program on Stratus, as written for CloudKit: it keeps its
// `import CloudKit`, every `CK` name, its `NSPredicate(value: true)` and its
// `NSSortDescriptor(key:ascending:)`: nothing changed. It is compiled in Swift 5 language mode.
//
//     cloudkit-port add "Buy milk"      saves a note in the private "Notes" zone
//     cloudkit-port list                prints the notes, newest first (with CKContainer.default(),
//                                       on an OperationQueue of its own, as CloudKit code may)
//     cloudkit-port changes FILE        prints what changed since the token archived in FILE
//
// Its container is `CKContainer(identifier: "iCloud.com.example.notes")`, or
// `CKContainer.default()` when STRATUS_CONTAINER names one; STRATUS_STORE (an SQLite file's
// path or a PostgreSQL URL) chooses the store, as for every program that imports CloudKit.
import CloudKit
import Foundation

let arguments = CommandLine.arguments.dropFirst()
let usage = "usage: cloudkit-port add TEXT | list | changes TOKENFILE  (the store: $STRATUS_STORE)\n"
// Checked before the container opens the store: a mistake creates no store.
switch (arguments.first, arguments.count) {
case ("add", 2), ("list", 1), ("changes", 2): break
case ("--help", _), ("-h", _):
    FileHandle.standardOutput.write(usage.data(using: .utf8)!)
    exit(0)
default:
    FileHandle.standardError.write(usage.data(using: .utf8)!)
    exit(64)
}

let container = ProcessInfo.processInfo.environment["STRATUS_CONTAINER"] == nil
    ? CKContainer(identifier: "iCloud.com.example.notes") : CKContainer.default()
let database = container.privateCloudDatabase
let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: CKCurrentUserDefaultName)

func fail(_ error: Error) -> Never {
    let nsError = error as NSError
    FileHandle.standardError.write("error \(nsError.domain) \(nsError.code): \(nsError.localizedDescription)\n".data(using: .utf8)!)
    exit(1)
}

/// Creates the zone once, as CloudKit sync code does before its first save.
func createZone() {
    let semaphore = DispatchSemaphore(value: 0)
    let operation = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
    operation.modifyRecordZonesCompletionBlock = { _, _, error in
        if let error = error { fail(error) }
        semaphore.signal()
    }
    database.add(operation)
    semaphore.wait()
}

func add(_ text: String) {
    createZone()
    let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: UUID().uuidString, zoneID: zoneID))
    note["text"] = text as CKRecordValue
    note["createdAt"] = Date() as CKRecordValue
    note["pinned"] = false
    let semaphore = DispatchSemaphore(value: 0)
    database.save(note) { saved, error in
        if let error = error { fail(error) }
        print("saved \(saved!.recordID.recordName)")
        semaphore.signal()
    }
    semaphore.wait()
}

func list() {
    let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
    query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
    let operation = CKQueryOperation(query: query)
    operation.zoneID = zoneID
    let semaphore = DispatchSemaphore(value: 0)
    operation.recordFetchedBlock = { record in
        let text = record["text"] as? String ?? ""
        let pinned = record["pinned"] as? Bool ?? false
        print("\(pinned ? "*" : "-") \(text)")
    }
    operation.queryCompletionBlock = { _, error in
        // No notes zone yet (nothing was ever added): an empty list, as CloudKit apps treat it.
        if let error = error as? CKError, error.code == .zoneNotFound {
            semaphore.signal()
            return
        }
        if let error = error { fail(error) }
        semaphore.signal()
    }
    if ProcessInfo.processInfo.environment["STRATUS_CONTAINER"] != nil {
        // As code written for the default container often runs it: on a queue of its own, with
        // no database, which CloudKit reads as CKContainer.default()'s private database.
        OperationQueue().addOperation(operation)
    } else {
        database.add(operation)
    }
    semaphore.wait()
}

func changes(tokenFile: URL) {
    var token: CKServerChangeToken?
    if let data = try? Data(contentsOf: tokenFile) {
        token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: CKServerChangeToken.self, from: data)
    }
    let options = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
    options.previousServerChangeToken = token
    let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: options])
    let semaphore = DispatchSemaphore(value: 0)
    operation.recordChangedBlock = { record in
        print("changed \(record["text"] as? String ?? "")")
    }
    operation.recordWithIDWasDeletedBlock = { recordID, recordType in
        print("deleted \(recordType) \(recordID.recordName)")
    }
    operation.recordZoneFetchCompletionBlock = { _, newToken, _, _, error in
        if let error = error as? CKError, error.code == .changeTokenExpired {
            try? FileManager.default.removeItem(at: tokenFile)
            return
        }
        if let error = error { fail(error) }
        if let newToken = newToken,
           let data = try? NSKeyedArchiver.archivedData(withRootObject: newToken, requiringSecureCoding: true) {
            try? data.write(to: tokenFile)
        }
    }
    operation.fetchRecordZoneChangesCompletionBlock = { error in
        if let error = error { fail(error) }
        semaphore.signal()
    }
    database.add(operation)
    semaphore.wait()
}

switch (arguments.first, arguments.dropFirst().first) {
case ("add", let text?): add(text)
case ("list", _): list()
case ("changes", let file?): changes(tokenFile: URL(fileURLWithPath: file))
default:
    FileHandle.standardError.write(usage.data(using: .utf8)!)
    exit(64)
}
