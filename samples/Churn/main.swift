// Churn: a writer that saves, updates and deletes records in one zone at random and logs
// every change it committed — the "change history" that change-tracking tests and the
// incremental-export sample (samples/incremental-export.sh) compare an export against —
// and the checker that compares them (`churn verify`, see HistoryCheck.swift).
//
//   swift run churn --store PATH|URL --writer ID --operations N --log FILE
//                   [--zone NAME] [--database public|private] [--user NAME]
//                   [--container ID] [--seed N] [--pause-ms N]
//   swift run churn verify --log a.log [--log b.log …] [--at-least-once] EXPORT.ndjson…
//
// Each writer owns the records named "<writer>-<n>" and never reuses a name, so its log is
// the full, ordered history of its records. Records have the type "Item" and the fields
// `writer` and `version` (1 when created, +1 per update). Some requests save and delete
// several records atomically. A log line is appended after its request committed:
//
//   {"writer":"a","op":"save","recordName":"a-3","version":2,"changeTag":"k2x…","request":7,"sent":1732500000000}
//   {"writer":"a","op":"delete","recordName":"a-1","request":8,"sent":1732500000031}
//
// `request` numbers the writer's requests (each one transaction), for checks of what a
// transaction fires (a zone subscription's notifications); `sent` is when the request was
// sent (milliseconds since 1970, wall clock), for measures of how soon a change is seen.
//
// The zone is created when missing (the default zone needs nothing). Exit status 0, or 1
// with a message on stderr. A writer killed between a commit and its log line leaves that
// change out of its log; kill the exporter, not the writers, when checking exactly-once.
import Foundation
import SeededRandom
import Stratus
import StratusPostgres
import StratusSQLite

func takeOption(_ name: String, from arguments: inout [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("churn: \(message)\n".utf8))
    exit(1)
}


var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "verify" { exit(HistoryCheck.run(Array(arguments.dropFirst()))) }
guard let storePath = takeOption("--store", from: &arguments),
      let writer = takeOption("--writer", from: &arguments),
      let operations = takeOption("--operations", from: &arguments).flatMap(Int.init),
      let logPath = takeOption("--log", from: &arguments)
else { fail("usage: churn --store PATH --writer ID --operations N --log FILE [--zone NAME] [--database public|private] [--user NAME] [--container ID] [--seed N] [--pause-ms N]") }
let zoneID = RecordZone.ID(zoneName: takeOption("--zone", from: &arguments) ?? RecordZone.ID.defaultZoneName)
let scope: Database.Scope = takeOption("--database", from: &arguments) == "private" ? .private : .public
let userName = takeOption("--user", from: &arguments)
let containerIdentifier = takeOption("--container", from: &arguments) ?? "com.example.churn"
var random = SeededGenerator(seed: UInt64(takeOption("--seed", from: &arguments) ?? "1") ?? 1)
let pauseMilliseconds = Int(takeOption("--pause-ms", from: &arguments) ?? "0") ?? 0
if let unknown = arguments.first { fail("unknown argument '\(unknown)'") }

guard FileManager.default.createFile(atPath: logPath, contents: nil), let log = FileHandle(forWritingAtPath: logPath) else {
    fail("cannot create the log file \(logPath)")
}

do {
    // A PostgreSQL URL or an SQLite file, as `stratus --store` takes them.
    let container = PostgresEngine.isStoreURL(storePath)
        ? try Container(identifier: containerIdentifier, postgresURL: storePath, userName: userName)
        : try Container(identifier: containerIdentifier, storePath: storePath, userName: userName)
    let database = container.database(with: scope)
    if !zoneID.isDefault { try await database.save(RecordZone(zoneID: zoneID)) }

    var live: [String: Int64] = [:]   // record name → version
    var created = 0

    func item(_ name: String, version: Int64) -> Record {
        let record = Record(recordType: "Item", recordID: Record.ID(recordName: name, zoneID: zoneID))
        record["writer"] = writer
        record["version"] = version
        return record
    }
    func pickLive() -> String { live.keys.sorted().randomElement(using: &random)! }

    for request in 0..<operations {
        var saves: [Record] = []
        var deletes: [String] = []
        let roll = Double.random(in: 0..<1, using: &random)
        if live.isEmpty || roll < 0.4 {
            created += 1
            saves.append(item("\(writer)-\(created)", version: 1))
        } else if roll < 0.75 {
            let name = pickLive()
            saves.append(item(name, version: live[name]! + 1))
        } else if roll < 0.9 {
            deletes.append(pickLive())
        } else {
            // One atomic request with several changes: they commit together or not at all.
            for _ in 0..<2 {
                created += 1
                saves.append(item("\(writer)-\(created)", version: 1))
            }
            let victim = pickLive()
            deletes.append(victim)
            if let other = live.keys.sorted().filter({ $0 != victim }).randomElement(using: &random) {
                saves.append(item(other, version: live[other]! + 1))
            }
        }
        let sent = (Date().timeIntervalSince1970 * 1000).rounded()
        let (saved, deleted) = try await database.modifyRecords(
            saving: saves, deleting: deletes.map { Record.ID(recordName: $0, zoneID: zoneID) }, savePolicy: .allKeys)
        var lines = ""
        for record in saves {
            let stored = try saved[record.recordID]!.get()
            let version = record["version"] as! Int64
            live[record.recordID.recordName] = version
            lines += "{\"writer\":\"\(writer)\",\"op\":\"save\",\"recordName\":\"\(record.recordID.recordName)\",\"version\":\(version),\"changeTag\":\"\(stored.recordChangeTag!)\",\"request\":\(request),\"sent\":\(Int64(sent))}\n"
        }
        for name in deletes {
            try deleted[Record.ID(recordName: name, zoneID: zoneID)]!.get()
            live[name] = nil
            lines += "{\"writer\":\"\(writer)\",\"op\":\"delete\",\"recordName\":\"\(name)\",\"request\":\(request),\"sent\":\(Int64(sent))}\n"
        }
        log.write(Data(lines.utf8))
        if pauseMilliseconds > 0 { usleep(UInt32(Int.random(in: 0...pauseMilliseconds, using: &random) * 1000)) }
    }
    try log.close()
} catch {
    fail("\(error)")
}
