// A public to-do list, the app CloudKit tutorials build first, as a command-line program.
//
//   swift run todo add "Water the plants"    adds a to-do and prints the list, newest first
//   swift run todo list                      prints the list
//   swift run todo done <id>                 marks a to-do done (checked = 1)
//   swift run todo delete <id>               deletes a to-do
//
// Options: --store PATH (default: the embedded default store), --user NAME.
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
let userName = takeOption("--user", from: &arguments)

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("todo: \(message)\n".utf8))
    exit(1)
}

// The command is checked before the store is opened: a mistyped command creates no store.
if let command = arguments.first, !["add", "list", "done", "delete"].contains(command) {
    if command == "--help" || command == "-h" {
        print("usage: todo [add TITLE | list | done ID | delete ID] [--store PATH] [--user NAME]")
        exit(0)
    }
    fail("unknown command '\(command)'; use add, list, done or delete")
}

do {
    let container = try Container(identifier: "com.example.todo", storePath: storePath, userName: userName)
    let database = container.publicCloudDatabase

    func printList() async throws {
        let query = Query(recordType: "Todo")
        query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
        var count = 0
        for try await todo in database.allRecords(matching: query) {
            let mark = (todo["checked"] as? Int64) == 1 ? "x" : " "
            let created = (todo["createdAt"] as? Date).map { ISO8601DateFormatter().string(from: $0) } ?? "?"
            print("[\(mark)] \(todo["title"] as? String ?? "")  (\(created), id \(todo.recordID.recordName))")
            count += 1
        }
        print("\(count) to-do\(count == 1 ? "" : "s") in \((container.engine as? SQLiteEngine)?.path ?? "the store")")
    }

    switch arguments.first {
    case "add":
        guard arguments.count >= 2 else { fail("usage: todo add TITLE") }
        let todo = Record(recordType: "Todo")
        todo["title"] = arguments.dropFirst().joined(separator: " ")
        todo["createdAt"] = Date()
        todo["checked"] = false
        try await database.save(todo)
        try await printList()
    case "list", nil:
        try await printList()
    case "done":
        guard arguments.count == 2 else { fail("usage: todo done ID") }
        let todo = try await database.record(for: Record.ID(recordName: arguments[1]))
        todo["checked"] = true
        try await database.save(todo)
        try await printList()
    case "delete":
        guard arguments.count == 2 else { fail("usage: todo delete ID") }
        try await database.deleteRecord(withID: Record.ID(recordName: arguments[1]))
        try await printList()
    case let other?:
        fail("unknown command '\(other)'; use add, list, done or delete")
    }
} catch {
    fail("\(error)")
}
