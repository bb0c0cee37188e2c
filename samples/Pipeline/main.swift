// An operation pipeline: query → save (the save's closure changes each batch), then fetch →
// delete, across two queues, with no shared variables and no polling. Each consumer streams
// its producer's batches as they come; the fetch waits for the first pipeline's save
// (`addDependency`), so the second pipeline starts once the first finished.
//
//   swift run pipeline [--store PATH]
import Foundation
import Stratus
import StratusSQLite

func takeOption(_ name: String, from arguments: inout [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}

var arguments = Array(CommandLine.arguments.dropFirst())
let storePath = takeOption("--store", from: &arguments)
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("stratus-pipeline-\(getpid()).sqlite").path

let container = try Container(identifier: "com.example.pipeline", storePath: storePath)
let database = container.publicCloudDatabase

// Seed: ten open to-dos.
let seed = ModifyRecordsOperation(recordsToSave: (1...10).map { n in
    let todo = Record(recordType: "Todo", recordID: Record.ID(recordName: "todo-\(n)"))
    todo["title"] = "Task \(n)"
    todo["priority"] = n % 3
    todo["checked"] = 0
    return todo
})
seed.savePolicy = .allKeys

// 1. Query the open, high-priority to-dos…
let findUrgent = QueryOperation(query: try Query(recordType: "Todo", format: "checked == %@ AND priority >= %@", 0, 2))
findUrgent.addDependency(seed)

// 2. …mark them done, on another queue.
let markDone = ModifyRecordsOperation(savingRecordsFrom: findUrgent) { records in
    for record in records { record["checked"] = 1 }
    return records
}
markDone.perRecordSaveBlock = { id, result in
    print("marked done: \(id.recordName)", (try? result.get()) == nil ? "(failed)" : "")
}

// 3. Fetch two specific to-dos and delete them.
let fetchOld = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "todo-1"), Record.ID(recordName: "todo-4")])
fetchOld.addDependency(markDone)
let deleteOld = DeleteRecordsOperation(deletingRecordsFrom: fetchOld)
deleteOld.perRecordDeleteBlock = { id, _ in print("deleted: \(id.recordName)") }

// Room for every pipeline stage put on it, as README's "Pipelines" asks: a stage holds its
// place on its queue until its pipeline ends.
let otherQueue = OperationQueue()
otherQueue.maxConcurrentOperationCount = 2

// Wait for the last step's final block without blocking a thread: set it before any
// operation starts, then start them all.
await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    deleteOld.deleteRecordsResultBlock = { _ in continuation.resume() }
    for operation in [seed, findUrgent, fetchOld] { database.add(operation) }
    for operation in [markDone, deleteOld] {
        operation.database = database
        otherQueue.addOperation(operation)
    }
}
let remaining = try await database.records(matching: Query(recordType: "Todo"), resultsLimit: 100).matchResults
let checked = remaining.filter { (try? $0.1.get())?["checked"] as? Int64 == 1 }.count
print("\(remaining.count) to-dos remain, \(checked) of them done (store: \(storePath))")
