import Foundation
import Stratus
import StratusTestSupport
import StratusTransfer
import Testing

/// A CloudKit `changes/zone` answer's records are whole versions: an import told to replace
/// with them removes the fields a newer version lacks; by default a program's `.forceUpdate`
/// import merges, as it always did.
@Suite("Whole versions from a changes answer, through RecordImporter")
struct WholeVersionImportTests {
    static let user = #""userRecordName":"_0123456789abcdef0123456789abcdef""#

    /// A changes answer holding note N1 with `fields` (or without a `fields` member when nil).
    static func changes(tag: String, fields: String?) -> Data {
        let member = fields.map { #","fields":{\#($0)}"# } ?? ""
        return Data((#"{"zones":[{"zoneID":{"zoneName":"_defaultZone"},"syncToken":"t","moreComing":false,"records":[{"recordName":"N1","recordType":"Note""#
            + member + #","recordChangeTag":"\#(tag)","created":{"timestamp":1735689600000,\#(user)},"modified":{"timestamp":1735689600000,\#(user)}}]}]}"#).utf8)
    }

    static let both = #""title":{"value":"hi","type":"STRING"},"pinned":{"value":1,"type":"INT64"}"#
    static let titleOnly = #""title":{"value":"hi","type":"STRING"}"#

    static func importing(_ data: Data, into database: Database, replacing: Bool? = nil) async throws -> (RecordImporter.Summary, RecordReader) {
        var options = RecordImporter.Options()
        options.createsZones = true
        if let replacing { options.replacesWithWholeVersions = replacing }
        var readOptions = RecordReadOptions()
        readOptions.readsDeletions = true
        let reader = try RecordReader(data: data, options: readOptions)
        return (try await RecordImporter(database: database, options: options).run(from: reader), reader)
    }

    @Test("replacesWithWholeVersions removes the field a newer version lacks; without it (the default) the import merges; a record without a fields member replaces no field")
    func replacingAndMerging() async throws {
        try await SQLiteFixture.with { fixture in
            // Private: the answer's creator is another user, whom the public database's _creator
            // grant would let write alone.
            let database = fixture.container().privateCloudDatabase
            let id = Record.ID(recordName: "N1")
            _ = try await Self.importing(Self.changes(tag: "t1", fields: Self.both), into: database)

            let (merged, reader) = try await Self.importing(Self.changes(tag: "t2", fields: Self.titleOnly), into: database)
            #expect(merged.updated == 1 && reader.holdsWholeVersions)
            #expect(try await database.record(for: id)["pinned"] as? Int64 == 1, "a program's forceUpdate merges unless told")

            _ = try await Self.importing(Self.changes(tag: "t1", fields: Self.both), into: database)
            let (replaced, _) = try await Self.importing(Self.changes(tag: "t2", fields: Self.titleOnly), into: database, replacing: true)
            #expect(replaced.updated == 1)
            let newest = try await database.record(for: id)
            #expect(newest["pinned"] == nil && newest["title"] as? String == "hi" && newest.recordChangeTag == "t2")

            // An answer to a request that named no keys says nothing of the fields.
            let (systemOnly, _) = try await Self.importing(Self.changes(tag: "t3", fields: nil), into: database, replacing: true)
            #expect(systemOnly.failed == 0)
            let kept = try await database.record(for: id)
            #expect(kept["title"] as? String == "hi" && kept.recordChangeTag == "t3")
        }
    }

    @Test("a records/changes answer (records beside a syncToken or moreComing, before or after them) is whole versions too")
    func recordsChangesAnswer() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let id = Record.ID(recordName: "N1", zoneID: RecordZone.ID(zoneName: "RC"))
            func answer(tag: String, fields: String, token: String) -> Data {
                let record = #"{"recordName":"N1","recordType":"Note","fields":{\#(fields)},"recordChangeTag":"\#(tag)","created":{"timestamp":1735689600000,\#(Self.user)},"modified":{"timestamp":1735689600000,\#(Self.user)}}"#
                return Data(#"{"zoneID":{"zoneName":"RC"},"records":[\#(record),{"recordName":"gone","deleted":true}],\#(token)}"#.utf8)
            }
            for token in [#""syncToken":"s1","moreComing":false"#, #""moreComing":true"#] {
                _ = try await Self.importing(answer(tag: "t1", fields: Self.both, token: token), into: database, replacing: true)
                let (replaced, reader) = try await Self.importing(answer(tag: "t2", fields: Self.titleOnly, token: token), into: database, replacing: true)
                #expect(replaced.updated == 1 && reader.holdsWholeVersions, "\(token)")
                let newest = try await database.record(for: id)
                #expect(newest["pinned"] == nil && newest["title"] as? String == "hi" && newest.recordChangeTag == "t2", "\(token): the field CloudKit removed is gone")
            }
        }
    }

    @Test("CKTool JS's record changes answer (recordResults) merges, with moreComing or without, as the README says")
    func recordResultsMerge() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let stored = Record(recordType: "Note", recordID: Record.ID(recordName: "n1"))
            stored["title"] = "old"
            stored["pinned"] = Int64(1)
            _ = try await database.save(stored)
            let answer = #"{"recordResults":[{"type":"existing","recordName":"n1","record":{"recordName":"n1","recordType":"Note","fields":{"title":{"value":"new","type":"STRING"}}}}],"moreComing":false,"changeToken":"AQ"}"#
            let (summary, reader) = try await Self.importing(Data(answer.utf8), into: database, replacing: true)
            #expect(summary.updated == 1 && !reader.holdsWholeVersions)
            let record = try await database.record(for: Record.ID(recordName: "n1"))
            #expect(record["title"] as? String == "new" && record["pinned"] as? Int64 == 1)
        }
    }

    @Test("a query answer's records are no whole versions: replacesWithWholeVersions leaves them merging")
    func queryAnswersMerge() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let query = #"{"records":[{"recordName":"N1","recordType":"Note","fields":{"title":{"value":"hi","type":"STRING"}}}]}"#
            let stored = Record(recordType: "Note", recordID: Record.ID(recordName: "N1"))
            stored["title"] = "old"
            stored["pinned"] = Int64(1)
            _ = try await database.save(stored)
            let (summary, reader) = try await Self.importing(Data(query.utf8), into: database, replacing: true)
            #expect(summary.updated == 1 && !reader.holdsWholeVersions)
            let record = try await database.record(for: Record.ID(recordName: "N1"))
            #expect(record["title"] as? String == "hi" && record["pinned"] as? Int64 == 1)
        }
    }
}
