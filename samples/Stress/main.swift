// Stress: writer processes for the multi-process and crash tests (and scripts/soak-writers,
// scripts/crash-loop). Each subcommand writes to one store through the public API and logs
// what it committed, so that a test can check the store against the logs, also after a kill.
//
//   swift run stress counter --store PATH --writer ID [--record NAME] [--increments N]
//                            [--seconds S] [--think-ms N] [--log FILE] [--container ID] [--seed N]
//
//     Read-modify-write with the default save policy (.ifServerRecordUnchanged): fetch the
//     `Counter` record, add 1 to `n`, save. A save that loses the race fails with
//     serverRecordChanged; the writer then adds 1 to the error's serverRecord and tries again.
//     After each successful save the new value is appended to the log as one line, so the
//     logs of all writers together must hold 1…final exactly once each (no lost update).
//     Stops after N increments or S seconds; prints one JSON summary line on stdout:
//     {"writer":"w1","increments":812,"conflicts":377,"seconds":3.0}
//
//   swift run stress batches --store PATH --writer ID --batches N --size K [--log FILE]
//                            [--keep K] [--pause-ms N] [--container ID]
//
//     Atomic requests: batch i saves a head record `<ID>-<i>-h` and K-1 children
//     `<ID>-<i>-c<j>` whose `head` field is a .deleteSelf reference to the head, sets the
//     `<ID>-progress` record's `batch` to i, and deletes the head of batch i-keep (default 3),
//     which cascades to its children. All of it commits together or not at all: the default
//     zone is not atomic (as CloudKit's), but a request of at most 400 items and 2 MB is one
//     transaction, and `.allKeys` fails no item. After each commit the line "committed i" is
//     appended to the log.
//
// Records have the type `Counter` or `Batch`; the container is `com.example.stress` unless
// given. Exit status: 0 done, 1 usage, 3 an unexpected error (printed on stderr).
import Foundation
import SeededRandom
import Stratus
import StratusSQLite

func takeOption(_ name: String, from arguments: inout [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("stress: \(message)\n".utf8))
    exit(status)
}

/// Appends lines to a file with one write each, so that a line is in the file (the kernel's
/// page cache) as soon as the call returns, even if the process is killed right after.
struct LogFile {
    let handle: FileHandle?

    init(path: String?) {
        guard let path else { handle = nil; return }
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            fail("cannot create the log file \(path)")
        }
        self.handle = handle
    }

    func append(_ line: String) { handle?.write(Data((line + "\n").utf8)) }
}


var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first, ["counter", "batches"].contains(command) else {
    fail("usage: stress counter|batches --store PATH --writer ID … (see samples/Stress/main.swift)")
}
arguments.removeFirst()
guard let storePath = takeOption("--store", from: &arguments), let writer = takeOption("--writer", from: &arguments) else {
    fail("\(command) needs --store PATH and --writer ID")
}
let containerIdentifier = takeOption("--container", from: &arguments) ?? "com.example.stress"
let log = LogFile(path: takeOption("--log", from: &arguments))

@MainActor func database() -> Database {
    do {
        return try Container(identifier: containerIdentifier, storePath: storePath, userName: "stress").publicCloudDatabase
    } catch {
        fail("cannot open the store: \(error)", status: 3)
    }
}

// MARK: - counter

@MainActor func runCounter() async {
    let recordName = takeOption("--record", from: &arguments) ?? "counter"
    let limit = Int(takeOption("--increments", from: &arguments) ?? "") ?? Int.max
    let seconds = Double(takeOption("--seconds", from: &arguments) ?? "") ?? .infinity
    let thinkMilliseconds = Int(takeOption("--think-ms", from: &arguments) ?? "0") ?? 0
    var random = SeededGenerator(seed: UInt64(takeOption("--seed", from: &arguments) ?? "1") ?? 1)
    if let unknown = arguments.first { fail("unknown argument '\(unknown)'") }
    guard limit < Int.max || seconds.isFinite else { fail("counter needs --increments N or --seconds S") }

    let db = database()
    let id = Record.ID(recordName: recordName)
    let start = ContinuousClock.now
    var increments = 0, conflicts = 0
    var base: Record?   // the record to add 1 to: fetched, or the server record of a conflict
    let deadline: ContinuousClock.Instant? = seconds.isFinite ? start + .milliseconds(Int64(seconds * 1000)) : nil
    while increments < limit && deadline.map({ ContinuousClock.now < $0 }) ?? true {
        do {
            let current: Record
            if let known = base {
                current = known
            } else {
                do {
                    current = try await db.record(for: id)
                } catch let error as StratusError where error.code == .unknownItem {
                    current = Record(recordType: "Counter", recordID: id)   // the first save creates it
                }
            }
            let value = (current.fieldValue(forKey: "n").flatMap { if case .int64(let n) = $0 { n } else { nil } } ?? 0) + 1
            current["n"] = value
            current["lastWriter"] = writer
            if thinkMilliseconds > 0 { usleep(UInt32(Int.random(in: 0...thinkMilliseconds, using: &random) * 1000)) }
            _ = try await db.save(current)
            increments += 1
            log.append(String(value))
            base = nil
        } catch let error as StratusError where error.code == .serverRecordChanged {
            conflicts += 1
            // Merge: the server's record is the new base; with no server record, fetch again.
            base = error.serverRecord
        } catch {
            fail("unexpected error after \(increments) increments: \(error)", status: 3)
        }
    }
    let duration = ContinuousClock.now - start
    let elapsed = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    print(#"{"writer":"\#(writer)","increments":\#(increments),"conflicts":\#(conflicts),"seconds":\#(String(format: "%.2f", elapsed))}"#)
}

// MARK: - batches

@MainActor func runBatches() async {
    guard let batches = takeOption("--batches", from: &arguments).flatMap(Int.init), let size = takeOption("--size", from: &arguments).flatMap(Int.init), size >= 1 else {
        fail("batches needs --batches N and --size K")
    }
    let keep = Int(takeOption("--keep", from: &arguments) ?? "3") ?? 3
    let pauseMilliseconds = Int(takeOption("--pause-ms", from: &arguments) ?? "0") ?? 0
    if let unknown = arguments.first { fail("unknown argument '\(unknown)'") }

    let db = database()
    for batch in 0..<batches {
        let head = Record(recordType: "Batch", recordID: Record.ID(recordName: "\(writer)-\(batch)-h"))
        head["writer"] = writer
        head["batch"] = batch
        var saves = [head]
        for child in 1..<size {
            let record = Record(recordType: "Batch", recordID: Record.ID(recordName: "\(writer)-\(batch)-c\(child)"))
            record["writer"] = writer
            record["batch"] = batch
            record["head"] = Record.Reference(record: head, action: .deleteSelf)
            saves.append(record)
        }
        let progress = Record(recordType: "Progress", recordID: Record.ID(recordName: "\(writer)-progress"))
        progress["batch"] = batch
        saves.append(progress)
        let deletes = batch >= keep ? [Record.ID(recordName: "\(writer)-\(batch - keep)-h")] : []
        do {
            let (saved, deleted) = try await db.modifyRecords(saving: saves, deleting: deletes, savePolicy: .allKeys, atomically: true)
            for record in saves {
                guard let result = saved[record.recordID] else { fail("no result for \(record.recordID.recordName)", status: 3) }
                _ = try result.get()
            }
            for id in deletes {
                guard let result = deleted[id] else { fail("no result for deleting \(id.recordName)", status: 3) }
                try result.get()
            }
        } catch {
            fail("unexpected error in batch \(batch): \(error)", status: 3)
        }
        log.append("committed \(batch)")
        if pauseMilliseconds > 0 { usleep(UInt32(pauseMilliseconds * 1000)) }
    }
}

switch command {
case "counter": await runCounter()
default: await runBatches()
}
