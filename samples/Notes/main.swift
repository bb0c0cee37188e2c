// A private notes keeper: title, text, last edited date and an optional image (an asset).
// Notes live in the private database, so each user (--user) sees only their own.
//
//   swift run notes add "Groceries" "eggs, flour" [--image photo.jpg]
//   swift run notes list
//   swift run notes show <id>           prints the note and where its image can be read
//   swift run notes edit <id> "new text"
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
    FileHandle.standardError.write(Data("notes: \(message)\n".utf8))
    exit(1)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let storePath = takeOption("--store", from: &arguments)
let userName = takeOption("--user", from: &arguments)
let imagePath = takeOption("--image", from: &arguments)

// The command is checked before the store is opened: a mistyped command creates no store.
if let command = arguments.first, !["add", "list", "show", "edit"].contains(command) {
    if command == "--help" || command == "-h" {
        print("usage: notes [add TITLE TEXT [--image FILE] | list | show ID | edit ID TEXT] [--store PATH] [--user NAME]")
        exit(0)
    }
    fail("unknown command '\(command)'; use add, list, show or edit")
}

do {
    let container = try Container(identifier: "com.example.notes", storePath: storePath, userName: userName)
    let database = container.privateCloudDatabase

    switch arguments.first {
    case "add":
        guard arguments.count == 3 else { fail("usage: notes add TITLE TEXT [--image FILE]") }
        let note = Record(recordType: "Note")
        note["title"] = arguments[1]
        note["text"] = arguments[2]
        note["lastEdited"] = Date()
        if let imagePath { note["image"] = Asset(fileURL: URL(fileURLWithPath: imagePath)) }
        let saved = try await database.save(note)
        print("saved note \(saved.recordID.recordName) for \(container.userName ?? "nobody")")
    case "list", nil:
        let query = Query(recordType: "Note")
        query.sortDescriptors = [RecordSortDescriptor(key: "lastEdited", ascending: false)]
        let (matches, _) = try await database.records(matching: query, desiredKeys: ["title", "lastEdited"])
        for (id, result) in matches {
            let note = try result.get()
            print("\(id.recordName)  \(note["title"] as? String ?? "")  (edited \(note["lastEdited"] as? Date ?? Date.distantPast))")
        }
        print("\(matches.count) note(s) for \(container.userName ?? "nobody")")
    case "show":
        guard arguments.count == 2 else { fail("usage: notes show ID") }
        let note = try await database.record(for: Record.ID(recordName: arguments[1]))
        print(note["title"] as? String ?? "")
        print(note["text"] as? String ?? "")
        if let image = note["image"] as? Asset, let url = image.fileURL {
            let bytes = try Data(contentsOf: url)
            print("image: \(url.path) (\(bytes.count) bytes)")
        }
    case "edit":
        guard arguments.count == 3 else { fail("usage: notes edit ID TEXT") }
        let note = try await database.record(for: Record.ID(recordName: arguments[1]))
        note["text"] = arguments[2]
        note["lastEdited"] = Date()
        // The fetched record carries its change tag, so a concurrent edit is detected.
        try await database.save(note)
        print("edited \(arguments[1])")
    case let other?:
        fail("unknown command '\(other)'; use add, list, show or edit")
    }
} catch {
    fail("\(error)")
}
