import Foundation
import StratusTestSupport
import Testing

/// CKTool JS answers (Apple's `@apple/cktool.database`, documented in Apple's CKTool JS
/// reference: `CKDBRecordChangesResponse` holds `recordResults`, `moreComing` and
/// `changeToken`; each result is a found record's, an error's or a deleted record's) imported
/// with `stratus import` as saved.
@Suite("CKTool JS answers through stratus", .timeLimit(.minutes(30)))
struct CKToolJSAnswerCLITests {
    @Test("a record changes answer: the found record is written into the zone it names, the deleted one deleted, the error result fails naming its code", arguments: TestEngine.all)
    func recordChanges(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let zone = #"{"zoneName":"Notes","canonicalName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE"}"#
            let stored = #"{"recordName":"n3","recordType":"Note","fields":{},"zoneID":{"zoneName":"Notes"}}"#
            let before = try await cli.run(["import", try cli.file("before.ndjson", stored + "\n"), "--database", "private", "--create-zones"])
            #expect(before.exitCode == 0, "\(before)")
            let answer = #"{"recordResults":["#
                + #"{"type":"existing","recordName":"n1","record":{"recordName":"n1","recordType":"Note","recordChangeTag":"abc","#
                + #""created":{"deviceId":"2","timestamp":"2024-03-01T12:00:00.123Z","userRecordName":"_9a065b60313a5937e75e03ed8e8f383d"},"#
                + #""fields":{"title":{"type":"stringType","value":"hi"}},"zone":\#(zone)}},"#
                + #"{"type":"error","recordName":"n2","errorCode":"NOT_FOUND","message":"Record not found"},"#
                + #"{"type":"deleted","recordName":"n3"}"#
                + #"],"moreComing":false,"changeToken":"AQ"}"#
            // A deleted result names no zone: the changes request named it, and so does --zone.
            let result = try await cli.run(["import", try cli.file("changes.json", answer), "--database", "private", "--zone", "Notes"])
            #expect(result.exitCode == 1, "one result fails: \(result)")
            #expect(result.stderr.contains("'errorCode' NOT_FOUND"), "\(result)")
            #expect(result.stderr.contains("deleted 1"), "\(result)")
            Summary.expectImport(result, imported: 1, failed: 1)
            let exported = try await cli.exported("Note", extra: ["--zone", "Notes", "--database", "private"])
            #expect(exported.keys.sorted() == ["n1"], "n3 deleted, n1 written: \(exported.keys)")
            #expect(JSONLine.value(try #require(exported["n1"]), "title") == "hi")
        }
    }

    @Test("a query answer with CKTool JS's continuationToken first, or a changes answer with moreComing, imports its records and says it is one page, naming CKTool JS's token", arguments: TestEngine.all)
    func continuationToken(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let page = #"{"continuationToken":"abc","records":[{"recordName":"c1","recordType":"C","fields":{}}]}"#
            let result = try await cli.run(["import", try cli.file("page.json", page)])
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stderr.contains("note: the input is one page of a CloudKit answer"), "\(result)")
            Summary.expectImport(result, imported: 1)
            let changes = #"{"recordResults":[{"type":"existing","recordName":"c2","record":{"recordName":"c2","recordType":"C","fields":{}}}],"moreComing":true,"changeToken":"AQ"}"#
            let more = try await cli.run(["import", try cli.file("changes.json", changes)])
            #expect(more.exitCode == 0 && more.stderr.contains("one page of a CloudKit changes answer") && more.stderr.contains("changeToken"), "\(more)")
        }
    }
}
