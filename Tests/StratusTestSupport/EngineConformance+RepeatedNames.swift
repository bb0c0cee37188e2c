import Foundation
import Stratus
import Testing

// MARK: - Imports whose input names a record more than once

extension EngineConformance {
    static let repeatedNameCases: [TestCase] = [
        TestCase("import: input naming records again (repeated updates, a creation then its deletion, one name many times, a rejected line between two good ones, an atomic zone) reports every line, counts and dry run as the same input imported a line per batch, and ends the same, in every write mode and batch size", repeatedNamesMatchLineByLine),
        TestCase("import: input naming records again is checkpointed once per batch size, as distinct names are, not once per repeat", repeatedNamesBatchCount),
        TestCase("import: killed between a batch's commit and its checkpoint, input of creations, their deletions and repeated updates resumes to exactly the input's end state", repeatedNamesResume),
        TestCase("import: words of a searchable field follow records named again in one batch: a record updated twice is found by its last words only, one updated then deleted by none (and its deletion stays in the zone's changes), and 1,500 records updated among them by their new words", repeatedNamesKeepWordsTrue),
        TestCase("import: a record named in many segments of a batch (updated again and again, given a .deleteSelf reference, taken by its target's cascade, made again, retyped, refused for a stale change tag between good lines, deleted and made again) ends as imported a line per batch, in every write mode and batch size, and the zone's changes list each record once, as stored", repeatedNamesAcrossSegments),
    ]

    static func repeatedNamesKeepWordsTrue(_ env: Environment) async throws {
        let container = env.container()
        var schema = RecordTypeSchema(recordType: "Note")
        schema.addField("body", type: .string, indexes: [.searchable])
        try await container.saveSchema(schema)
        let database = container.privateCloudDatabase
        let notes = RecordZone.ID(zoneName: "Notes")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        func note(_ name: String, _ body: String) -> Record { makeRecord("Note", name, zoneID: notes, ["body": .string(body)]) }
        let many = (0..<1_500).map { "m\($0)" }
        _ = try await database.modifyRecords(saving: [note("twice", "apple"), note("gone", "banana"), note("once", "cherry")], deleting: [])
        for chunk in stride(from: 0, to: many.count, by: 400) {
            _ = try await database.modifyRecords(saving: many[chunk..<min(chunk + 400, many.count)].map { note($0, "plum \($0)") }, deleting: [])
        }
        let items: [RecordSourceItem] = [
            .record(note("twice", "date"), line: 1), .record(note("gone", "fig"), line: 2), .record(note("twice", "elder"), line: 3),
            .deletion(Record.ID(recordName: "gone", zoneID: notes), recordType: "Note", line: 4), .record(note("once", "grape"), line: 5),
        ] + many.enumerated().map { .record(note($1, "quince \($1)"), line: 6 + $0) }
        let before = try await database.recordZoneChanges(inZoneWith: notes, since: nil).changeToken
        // One batch, one transaction: every version and the deletion meet there.
        var options = RecordImporter.Options()
        options.batchSize = 5_000
        let summary = try await RecordImporter(database: database, options: options).run(from: RecordList(items: items), rejects: Rejections())
        #expect(summary.failed == 0, "\(summary)")
        var (changed, deleted, token, more) = (0, [String](), before, true)
        while more {
            let page = try await database.recordZoneChanges(inZoneWith: notes, since: token)
            changed += page.modificationResultsByID.count
            deleted += page.deletions.map(\.recordID.recordName)
            (token, more) = (page.changeToken, page.moreComing)
        }
        #expect(deleted == ["gone"], "the deletion stays in the zone's changes")
        #expect(changed == 2 + many.count)
        func found(_ word: String) async throws -> [String] {
            TestDatabase.names(try await TestDatabase.queryAll(try query("Note", "self CONTAINS %@", [word]), in: database)).sorted()
        }
        for gone in ["apple", "date", "banana", "fig", "cherry", "plum"] {
            #expect(try await found(gone).isEmpty, "no record holds '\(gone)' any more")
        }
        #expect(try await found("elder") == ["twice"])
        #expect(try await found("grape") == ["once"])
        #expect(try await found("quince").count == many.count)
        #expect(try await found("m1499") == ["m1499"])
        // Made again, `gone` holds only its new words: none of a version deleted in the batch.
        _ = try await database.modifyRecords(saving: [note("gone", "kiwi")], deleting: [])
        #expect(try await found("fig").isEmpty)
        #expect(try await found("banana").isEmpty)
        #expect(try await found("kiwi") == ["gone"])
    }

    /// Lines naming records again and again, with `prefix` before every name: updates in a
    /// row, a deletion of what a line before created and of what is not stored, a creation
    /// after a deletion, a line the schema rejects between good lines of its name (a field
    /// another line of the name grew), a record a deletion's cascade takes saved again, records of
    /// the atomic zone `Atomic` created and deleted, stored records (`kept`, `gone`) changed,
    /// deleted and made again, and one name many times.
    static func repeatedNameInput(prefix p: String) -> [RecordSourceItem] {
        let atomic = RecordZone.ID(zoneName: "Atomic")
        func save(_ name: String, _ fields: [String: FieldValue], zoneID: RecordZone.ID = .default) -> RecordSourceItem {
            .record(makeRecord("Node", p + name, zoneID: zoneID, fields), line: 0)
        }
        func delete(_ name: String, zoneID: RecordZone.ID = .default) -> RecordSourceItem {
            .deletion(Record.ID(recordName: p + name, zoneID: zoneID), recordType: "Node", line: 0)
        }
        var items: [RecordSourceItem] = [
            save("a", ["n": .int64(1), "label": .string("first")]),
            save("a", ["n": .int64(2), "grown": .string("g")]),
            save("b", ["n": .int64(1)]),
            save("a", ["grown": .int64(1)]),
            delete("b"),
            delete("c"),
            save("c", ["n": .int64(3)]),
            save("s", ["n": .int64(1)]),
            save("s", ["n": .int64(1)]),
            save("s", ["label": .int64(4)]),
            save("s", ["n": .int64(5)]),
            delete("s"),
            save("s", ["n": .int64(6)]),
            save("z", ["n": .int64(1)], zoneID: atomic),
            save("z", ["n": .int64(2)], zoneID: atomic),
            delete("z", zoneID: atomic),
            save("y", ["n": .int64(1)], zoneID: atomic),
            save("y", ["label": .int64(9)], zoneID: atomic),
            save("y", ["n": .int64(2)], zoneID: atomic),
            save("a", ["n": .int64(7)]),
            save("p", ["n": .int64(1)]),
            save("child", ["up": .reference(Record.Reference(recordID: Record.ID(recordName: p + "p"), action: .deleteSelf))]),
            delete("p"),
            save("child", ["n": .int64(2)]),
            save("kept", ["n": .int64(9)]),
            delete("gone"),
            save("gone", ["n": .int64(10)]),
            save("kept", ["n": .int64(9)]),
        ]
        items += (1...7).map { save("same", ["n": .int64(Int64($0 % 3))]) }
        return items.enumerated().map { index, item in
            switch item {
            case .record(let record, _): .record(record, line: index + 1)
            case .deletion(let id, let type, _): .deletion(id, recordType: type, line: index + 1)
            default: item
            }
        }
    }

    /// The stored state of every name `repeatedNameInput` uses: type and values, or nil.
    static func repeatedNameState(prefix p: String, in database: Database) async throws -> [String: String] {
        var state: [String: String] = [:]
        let atomic = RecordZone.ID(zoneName: "Atomic")
        for (name, zoneID) in [("a", RecordZone.ID.default), ("b", .default), ("c", .default), ("s", .default), ("z", atomic), ("y", atomic),
                               ("kept", .default), ("gone", .default), ("same", .default), ("p", .default), ("child", .default)] {
            let record = try await TestDatabase.fetch(p + name, zoneID: zoneID, in: database)
            state[name] = record.map { record in
                record.recordType + " " + record.allKeys().sorted().map { "\($0)=\(record[$0].map { "\($0)" } ?? "nil")" }.joined(separator: ",")
            } ?? "missing"
        }
        return state
    }

    /// Seeds what the input finds stored: `kept` and `gone`, the type's fields and the zone.
    static func seedRepeatedNames(prefix p: String, in database: Database) async throws {
        _ = try? await database.save(RecordZone(zoneID: RecordZone.ID(zoneName: "Atomic")))
        try await TestDatabase.save([
            makeRecord("Node", p + "kept", ["n": .int64(8), "label": .string("stored")]),
            makeRecord("Node", p + "gone", ["n": .int64(8)]),
        ], in: database)
    }

    static func repeatedNamesMatchLineByLine(_ env: Environment) async throws {
        // A line per batch is the reference: each line is applied after the one before it.
        let reference = env.container().publicCloudDatabase
        let others = try [3, 5, 5_000].map { size in (size, Container(identifier: Environment.containerIdentifier, engine: try env.makeAnotherEngine(), userName: "alice").publicCloudDatabase) }
        let modes: [RecordWriteMode] = [.forceUpdate, .forceReplace, .create, .update, .ifServerRecordUnchanged]
        for database in [reference] + others.map(\.1) {
            for mode in modes { try await seedRepeatedNames(prefix: "\(mode)-", in: database) }
        }
        for mode in modes {
            let prefix = "\(mode)-"
            var options = RecordImporter.Options()
            options.writeMode = mode
            options.createsZones = true
            options.batchSize = 1
            let expectedRejects = Rejections()
            let expected = try await RecordImporter(database: reference, options: options).run(from: RecordList(items: repeatedNameInput(prefix: prefix)), rejects: expectedRejects)
            let expectedState = try await repeatedNameState(prefix: prefix, in: reference)
            for (size, database) in others {
                options.batchSize = size
                options.isDryRun = true
                let dryRejects = Rejections()
                let dry = try await RecordImporter(database: database, options: options).run(from: RecordList(items: repeatedNameInput(prefix: prefix)), rejects: dryRejects)
                options.isDryRun = false
                let rejects = Rejections()
                let summary = try await RecordImporter(database: database, options: options).run(from: RecordList(items: repeatedNameInput(prefix: prefix)), rejects: rejects)
                let what = "\(mode), batches of \(size)"
                expectSameImport(summary, rejects: rejects, as: expected, expectedRejects: expectedRejects, what)
                #expect(try await repeatedNameState(prefix: prefix, in: database) == expectedState, "\(what)")
                #expect(dryRejects.all.map(\.line) == expectedRejects.all.map(\.line), "dry run, \(what): \(dryRejects.all.map(\.message))")
                #expect([dry.created, dry.updated, dry.unchanged, dry.deleted, dry.failed] as [Int] == [expected.created, expected.updated, expected.unchanged, expected.deleted, expected.failed] as [Int],
                        "dry run, \(what): \(dry) vs \(expected)")
            }
        }
        // What the reference did, so that the comparisons above compare something.
        let state = try await repeatedNameState(prefix: "\(RecordWriteMode.forceUpdate)-", in: reference)
        #expect(state["b"] == "missing" && state["z"] == "missing" && state["gone"] == "Node n=10", "\(state)")
        #expect(state["p"] == "missing" && state["child"] == "Node n=2", "\(state)")
        #expect(state["a"] == "Node grown=g,label=first,n=7" && state["s"] == "Node n=6" && state["same"] == "Node n=1" && state["y"] == "Node n=2", "\(state)")
    }

    /// Lines of zone `Feed` naming `m`, `q` and `w` again and again, with `prefix` before every
    /// name: `m` updated, given a `.deleteSelf` reference to `t`, updated, taken by `t`'s
    /// deletion, made again and retyped; `q` refused for a stale change tag between good lines,
    /// then deleted, made again and deleted again; `w` saved unchanged between changes.
    static func acrossSegmentsInput(prefix p: String) -> [RecordSourceItem] {
        let feed = RecordZone.ID(zoneName: "Feed")
        func save(_ name: String, _ fields: [String: FieldValue], type: String = "Node", tag: String? = nil) -> RecordSourceItem {
            .record(Record(recordType: type, recordID: Record.ID(recordName: p + name, zoneID: feed), values: fields,
                           systemFields: Record.SystemFields(recordChangeTag: tag)), line: 0)
        }
        func delete(_ name: String) -> RecordSourceItem {
            .deletion(Record.ID(recordName: p + name, zoneID: feed), recordType: "Node", line: 0)
        }
        let toT = FieldValue.reference(Record.Reference(recordID: Record.ID(recordName: p + "t", zoneID: feed), action: .deleteSelf))
        let items: [RecordSourceItem] = [
            save("t", ["n": .int64(1)]),
            save("m", ["n": .int64(1)]),
            save("m", ["n": .int64(2)]),
            save("m", ["n": .int64(3), "up": toT]),
            save("m", ["n": .int64(4)]),
            delete("t"),
            save("m", ["n": .int64(5)]),
            save("m", ["n": .int64(6)]),
            save("m", ["n": .int64(7)], type: "Other"),
            save("m", ["n": .int64(8)], type: "Other"),
            save("q", ["n": .int64(1)]),
            save("q", ["n": .int64(2)], tag: "stale"),
            save("q", ["n": .int64(3)]),
            delete("q"),
            save("q", ["n": .int64(4)]),
            save("q", ["n": .int64(5)]),
            delete("q"),
            save("w", ["n": .int64(1)]),
            save("w", ["n": .int64(1)]),
            save("w", ["n": .int64(2)]),
        ]
        return items.enumerated().map { index, item in
            switch item {
            case .record(let record, _): .record(record, line: index + 1)
            case .deletion(let id, let type, _): .deletion(id, recordType: type, line: index + 1)
            default: item
            }
        }
    }

    static func repeatedNamesAcrossSegments(_ env: Environment) async throws {
        let feed = RecordZone.ID(zoneName: "Feed")
        let reference = env.container().privateCloudDatabase
        let others = try [2, 3, 5_000].map { size in (size, Container(identifier: Environment.containerIdentifier, engine: try env.makeAnotherEngine(), userName: "alice").privateCloudDatabase) }
        let modes: [RecordWriteMode] = [.forceUpdate, .forceReplace, .create, .update, .ifServerRecordUnchanged]
        /// Each name's stored type, values and change tag, and the change each has in the zone's
        /// changes since `start`: the record as fetched (its tag too), or its deletion.
        func state(_ p: String, in database: Database, since start: ServerChangeToken?) async throws -> (stored: [String: String], changes: [String: String]) {
            var stored: [String: String] = [:]
            for name in ["t", "m", "q", "w"] {
                let record = try await TestDatabase.fetch(p + name, zoneID: feed, in: database)
                stored[name] = record.map { record in
                    record.recordType + " " + record.allKeys().sorted().map { "\($0)=\(record[$0].map { "\($0)" } ?? "nil")" }.joined(separator: ",")
                        + " tag=\(record.recordChangeTag ?? "nil")"
                } ?? "missing"
            }
            var changes: [String: String] = [:]
            var token = start
            while true {
                let batch = try await database.recordZoneChanges(inZoneWith: feed, since: token)
                for (id, result) in batch.modificationResultsByID where id.recordName.hasPrefix(p) {
                    let record = try result.get().record
                    let name = String(id.recordName.dropFirst(p.count))
                    #expect(changes[name] == nil, "\(id.recordName) is in the changes twice")
                    changes[name] = record.recordType + " " + record.allKeys().sorted().map { "\($0)=\(record[$0].map { "\($0)" } ?? "nil")" }.joined(separator: ",")
                        + " tag=\(record.recordChangeTag ?? "nil")"
                }
                for deletion in batch.deletions where deletion.recordID.recordName.hasPrefix(p) {
                    changes[String(deletion.recordID.recordName.dropFirst(p.count))] = "deleted"
                }
                token = batch.changeToken
                if !batch.moreComing { break }
            }
            return (stored, changes)
        }
        // The changes are read from before the imports, so that they list deletions too.
        var starts: [ObjectIdentifier: ServerChangeToken] = [:]
        for database in [reference] + others.map(\.1) {
            _ = try await database.save(RecordZone(zoneID: feed))
            starts[ObjectIdentifier(database)] = try await database.recordZoneChanges(inZoneWith: feed, since: nil).changeToken
        }
        for mode in modes {
            let prefix = "\(mode)-"
            var options = RecordImporter.Options()
            options.writeMode = mode
            options.batchSize = 1
            let expectedRejects = Rejections()
            let expected = try await RecordImporter(database: reference, options: options).run(from: RecordList(items: acrossSegmentsInput(prefix: prefix)), rejects: expectedRejects)
            let expectedState = try await state(prefix, in: reference, since: starts[ObjectIdentifier(reference)])
            // Stored records are in the changes as stored; deleted ones as deleted.
            for (name, stored) in expectedState.stored {
                #expect(Self.changeMatches(expectedState.changes[name], stored: stored), "\(mode): \(name): \(expectedState.changes[name] ?? "nil") vs \(stored)")
            }
            for (size, database) in others {
                options.batchSize = size
                let rejects = Rejections()
                let summary = try await RecordImporter(database: database, options: options).run(from: RecordList(items: acrossSegmentsInput(prefix: prefix)), rejects: rejects)
                let what = "\(mode), batches of \(size)"
                expectSameImport(summary, rejects: rejects, as: expected, expectedRejects: expectedRejects, what)
                let got = try await state(prefix, in: database, since: starts[ObjectIdentifier(database)])
                // Change tags are the store's own: compared with what the same store's changes say.
                func untagged(_ map: [String: String]) -> [String: String] { map.mapValues { $0.components(separatedBy: " tag=")[0] } }
                #expect(untagged(got.stored) == untagged(expectedState.stored), "\(what)")
                for (name, stored) in got.stored {
                    #expect(Self.changeMatches(got.changes[name], stored: stored), "\(what): \(name): \(got.changes[name] ?? "nil") vs \(stored)")
                }
            }
        }
        // What the reference did, so that the comparisons above compare something.
        let forced = try await state("\(RecordWriteMode.forceReplace)-", in: reference, since: nil).stored.mapValues { $0.components(separatedBy: " tag=")[0] }
        #expect(forced["t"] == "missing" && forced["q"] == "missing" && forced["m"] == "Other n=8" && forced["w"] == "Node n=2", "\(forced)")
    }

    /// Whether a record's change since before the import says what is stored: the record with
    /// its values and change tag, or for a record not stored, its deletion or (made and deleted
    /// since) nothing.
    /// An import's summary and rejects are the reference import's: the same lines refused for
    /// the same records and reasons, and the same counts.
    static func expectSameImport(_ summary: RecordImporter.Summary, rejects: Rejections, as expected: RecordImporter.Summary, expectedRejects: Rejections,
                                 _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(rejects.all.map(\.line) == expectedRejects.all.map(\.line), "\(what): \(rejects.all.map(\.message)) vs \(expectedRejects.all.map(\.message))",
                sourceLocation: sourceLocation)
        #expect(rejects.all.map(\.recordName) == expectedRejects.all.map(\.recordName), "\(what)", sourceLocation: sourceLocation)
        for (got, wanted) in zip(rejects.all, expectedRejects.all) {
            // Messages name change tags, which differ from store to store: the first words say what failed.
            #expect(got.message.prefix(24) == wanted.message.prefix(24), "\(what): \(got.message) vs \(wanted.message)", sourceLocation: sourceLocation)
        }
        #expect([summary.read, summary.created, summary.updated, summary.unchanged, summary.deleted, summary.failed] as [Int]
                    == [expected.read, expected.created, expected.updated, expected.unchanged, expected.deleted, expected.failed] as [Int],
                "\(what): \(summary) vs \(expected)", sourceLocation: sourceLocation)
        #expect(summary.end == .finished, sourceLocation: sourceLocation)
    }

    static func changeMatches(_ change: String?, stored: String) -> Bool {
        stored == "missing" ? change == nil || change == "deleted" : change == stored
    }

    /// Input of `count` lines: every name twice in a row (`r0`, `r0`, `r1`, `r1`, …), or
    /// when `distinct`, as many distinct names.
    static func pairedNames(_ count: Int, distinct: Bool, prefix: String) -> [RecordSourceItem] {
        (0..<count).map { index in
            .record(makeRecord("Node", "\(prefix)r\(distinct ? index : index / 2)", ["n": .int64(Int64(index))]), line: index + 1)
        }
    }

    static func repeatedNamesBatchCount(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        var options = RecordImporter.Options()
        options.batchSize = 10
        var saves: [Bool: Int] = [:]
        for distinct in [true, false] {
            let checkpoint = CrashingCheckpoint()
            let summary = try await RecordImporter(database: database, options: options)
                .run(from: RecordList(items: pairedNames(40, distinct: distinct, prefix: distinct ? "d-" : "p-")), rejects: nil, checkpoint: checkpoint)
            #expect(summary.created == (distinct ? 40 : 20) && summary.updated == (distinct ? 0 : 20) && summary.failed == 0, "\(summary)")
            saves[distinct] = checkpoint.saves
        }
        // A checkpoint names the job, then follows each batch of 10 lines.
        #expect(saves[true] == 5 && saves[false] == saves[true], "\(saves)")
        let last = try await TestDatabase.fetch("p-r19", in: database)
        #expect(last?["n"] as? Int64 == 39)
    }

    static func repeatedNamesResume(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        func input(_ p: String) -> [RecordSourceItem] {
            var items: [RecordSourceItem] = []
            for index in 0..<6 {
                items.append(.record(makeRecord("Node", "\(p)r\(index)", ["n": .int64(Int64(index))]), line: 0))
                items.append(.record(makeRecord("Node", "\(p)u\(index % 2)", ["n": .int64(Int64(index))]), line: 0))
                items.append(.deletion(Record.ID(recordName: "\(p)r\(index)"), recordType: "Node", line: 0))
            }
            items.append(.record(makeRecord("Node", "\(p)r5", ["n": .int64(50)]), line: 0))
            return items.enumerated().map { index, item in
                switch item {
                case .record(let record, _): .record(record, line: index + 1)
                case .deletion(let id, let type, _): .deletion(id, recordType: type, line: index + 1)
                default: item
                }
            }
        }
        // Every save a kill could interrupt (1 names the job; the others follow batches of 4 lines).
        for failing in 2...6 {
            let p = "k\(failing)-"
            var options = RecordImporter.Options()
            options.batchSize = 4
            let checkpoint = CrashingCheckpoint()
            checkpoint.failingSave = failing
            let firstRejects = Rejections()
            do {
                _ = try await RecordImporter(database: database, options: options).run(from: RecordList(items: input(p)), rejects: firstRejects, checkpoint: checkpoint)
                Issue.record("killed at save \(failing): the import went on past its checkpoint's failure")
            } catch let failure as RecordImporter.Failure {
                #expect(failure.stage == .checkpoint, "\(failure)")
            }
            checkpoint.failingSave = nil
            let rejects = Rejections()
            let resumed = try await RecordImporter(database: database, options: options).run(from: RecordList(items: input(p)), rejects: rejects, checkpoint: checkpoint)
            #expect(resumed.end == .finished && resumed.skipped > 0, "killed at save \(failing): \(resumed)")
            #expect((firstRejects.all + rejects.all).isEmpty, "killed at save \(failing): \((firstRejects.all + rejects.all).map(\.message))")
            for index in 0..<5 {
                #expect(try await TestDatabase.exists("\(p)r\(index)", in: database) == false, "killed at save \(failing): r\(index) was deleted")
            }
            #expect(try await TestDatabase.fetch("\(p)r5", in: database)?["n"] as? Int64 == 50, "killed at save \(failing)")
            #expect(try await TestDatabase.fetch("\(p)u0", in: database)?["n"] as? Int64 == 4, "killed at save \(failing)")
            #expect(try await TestDatabase.fetch("\(p)u1", in: database)?["n"] as? Int64 == 5, "killed at save \(failing)")
        }
    }
}
