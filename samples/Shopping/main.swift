// Shopping lists whose items reference their list. Deleting a list deletes its items through
// the `.deleteSelf` reference action, in the same transaction.
//
//   swift run shopping add Weekend eggs        adds an item (and the list, if new)
//   swift run shopping show Weekend            the items of one list, found by reference
//   swift run shopping lists                   every list with its item count
//   swift run shopping delete Weekend          deletes the list and, by cascade, its items
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

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("shopping: \(message)\n".utf8))
    exit(1)
}

/// A list's record name is derived from its title, so `add` can find or create it.
func listID(_ title: String) -> Record.ID {
    Record.ID(recordName: "list-" + title.lowercased().map { $0.isLetter || $0.isNumber ? String($0) : "-" }.joined())
}

var arguments = Array(CommandLine.arguments.dropFirst())
let storePath = takeOption("--store", from: &arguments)
let userName = takeOption("--user", from: &arguments)

// The command is checked before the store is opened: a mistyped command creates no store.
if let command = arguments.first, !["add", "show", "lists", "delete"].contains(command) {
    if command == "--help" || command == "-h" {
        print("usage: shopping [add LIST ITEM | show LIST | lists | delete LIST] [--store PATH] [--user NAME]")
        exit(0)
    }
    fail("unknown command '\(command)'; use add, show, lists or delete")
}

do {
    let container = try Container(identifier: "com.example.shopping", storePath: storePath, userName: userName)
    let database = container.publicCloudDatabase

    func items(of listTitle: String) async throws -> [Record] {
        let reference = Record.Reference(recordID: listID(listTitle), action: .none)
        let query = Query(recordType: "Item", predicate: try QueryPredicate(format: "list == %@", reference))
        query.sortDescriptors = [RecordSortDescriptor(key: "name")]
        var found: [Record] = []
        for try await item in database.allRecords(matching: query) { found.append(item) }
        return found
    }

    switch arguments.first {
    case "add":
        guard arguments.count >= 3 else { fail("usage: shopping add LIST ITEM") }
        let title = arguments[1]
        let list = Record(recordType: "ShoppingList", recordID: listID(title))
        list["title"] = title
        let item = Record(recordType: "Item")
        item["name"] = arguments.dropFirst(2).joined(separator: " ")
        item["list"] = Record.Reference(recordID: list.recordID, action: .deleteSelf)
        // .changedKeys saves the list whether or not it exists yet; the item is new.
        let results = try await database.modifyRecords(saving: [list, item], deleting: [], savePolicy: .changedKeys)
        for (_, result) in results.saveResults { _ = try result.get() }
        print("\(title): " + (try await items(of: title)).compactMap { $0["name"] as? String }.joined(separator: ", "))
    case "show":
        guard arguments.count == 2 else { fail("usage: shopping show LIST") }
        let found = try await items(of: arguments[1])
        for item in found { print("- \(item["name"] as? String ?? "")") }
        print("\(found.count) item(s) on \(arguments[1])")
    case "lists", nil:
        for try await list in database.allRecords(matching: Query(recordType: "ShoppingList")) {
            let title = list["title"] as? String ?? ""
            print("\(title): \(try await items(of: title).count) item(s)")
        }
    case "delete":
        guard arguments.count == 2 else { fail("usage: shopping delete LIST") }
        let before = try await items(of: arguments[1]).count
        try await database.deleteRecord(withID: listID(arguments[1]))
        let after = try await items(of: arguments[1]).count
        print("deleted \(arguments[1]); its items went with it (\(before) before, \(after) after)")
    case let other?:
        fail("unknown command '\(other)'; use add, show, lists or delete")
    }
} catch {
    fail("\(error)")
}
