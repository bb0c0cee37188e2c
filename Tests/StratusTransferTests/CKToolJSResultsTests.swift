import Foundation
import Stratus
import StratusTransfer
import Testing

/// CKTool JS's answers (Apple's `@apple/cktool.database`): `CKDBLookupRecordsResponse`
/// (`{"recordResults": […]}`) and `CKDBRecordChangesResponse` (`{"recordResults": […],
/// "moreComing", "changeToken"}`), whose results are, as Apple's CKTool JS reference documents
/// them, `CKDBExistingRecordResult` (`type`, `recordName`, `record`), `CKDBErrorRecordResult`
/// (`type`, `recordName`, `errorCode`, `message`) and `CKDBDeletedRecordResult` (`type`,
/// `recordName`). Before, such a file was read as one record without a name.
@Suite("CKTool JS record results")
struct CKToolJSResultsTests {
    static let zone = #"{"zoneName":"Notes","canonicalName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE"}"#
    static let found = #"{"type":"existing","recordName":"n1","record":{"recordName":"n1","recordType":"Note","recordChangeTag":"abc","#
        + #""created":{"deviceId":"2","timestamp":"2024-03-01T12:00:00.123Z","userRecordName":"_9a065b60313a5937e75e03ed8e8f383d"},"#
        + #""fields":{"title":{"type":"stringType","value":"hi"}},"zone":\#(zone)}}"#
    static let failed = #"{"type":"error","recordName":"n2","errorCode":"NOT_FOUND","message":"Record not found"}"#
    static let deleted = #"{"type":"deleted","recordName":"n3"}"#

    static func read(_ text: String, readsDeletions: Bool = false) throws -> [RecordReadResult] {
        var options = RecordReadOptions()
        options.readsDeletions = readsDeletions
        return try readAll(Data(text.utf8), options)
    }

    @Test("a lookup answer: a found record's result is its record in the zone it names; an error result is rejected naming its code and message")
    func lookup() throws {
        let items = try Self.read(#"{"recordResults":[\#(Self.found),\#(Self.failed)]}"#)
        #expect(items.count == 2, "\(items)")
        let record = try #require(items.first?.record, "\(items)")
        #expect(record.recordID.recordName == "n1" && record.recordID.zoneID.zoneName == "Notes")
        #expect(record.fieldValue(forKey: "title") == .string("hi"))
        let rejection = try #require(items.last?.rejection, "\(items)")
        #expect(rejection.recordName == "n2")
        #expect(rejection.message.contains("'errorCode' NOT_FOUND") && rejection.message.contains("Record not found"), "\(rejection.message)")
    }

    @Test("a changes answer, whatever key comes first: a deleted record's result is a deletion when deletions are read, else rejected", arguments: [
        #"{"recordResults":[\#(found),\#(deleted)],"moreComing":true,"changeToken":"AQ"}"#,
        #"{"changeToken":"AQ","moreComing":true,"recordResults":[\#(found),\#(deleted)]}"#,
        // As JSON.stringify(answer, null, 2) prints it: whitespace before each result.
        "{\n  \"recordResults\": [\n    \(found),\n    \(deleted),\n    \(deleted.replacingOccurrences(of: "n3", with: "n5"))\n  ],\n  \"moreComing\": false\n}\n",
    ])
    func changes(input: String) throws {
        let deleting = try Self.read(input, readsDeletions: true)
        #expect(deleting.first?.record?.recordID.recordName == "n1", "\(deleting)")
        guard case .deletion(let id, _, _)? = deleting.last else {
            Issue.record("the deleted result is not a deletion: \(deleting)")
            return
        }
        #expect(id.recordName == (input.contains("n5") ? "n5" : "n3"))
        #expect(deleting.allSatisfy { $0.rejection == nil }, "\(deleting)")
        let saving = try Self.read(input)
        #expect(saving.last?.rejection?.message.contains("deleted record's result") == true, "\(saving)")
    }

    @Test("a record answer (CKDBRecordResponse, what getRecord, createRecord and updateRecord answer) is its one record, in the zone it names, however it is laid out")
    func recordAnswer() throws {
        let record = #"{"recordName":"n1","recordType":"Note","fields":{"title":{"type":"stringType","value":"hi"},"tags":{"type":"stringListType","value":["a","b"]}},"zone":\#(Self.zone)}"#
        for input in [#"{"record":\#(record)}"#, "{\n  \"record\": \(record)\n}\n"] {
            let items = try Self.read(input)
            #expect(items.count == 1, "\(items)")
            let read = try #require(items.first?.record, "\(items)")
            #expect(read.recordID.recordName == "n1" && read.recordID.zoneID.zoneName == "Notes")
            #expect(read.fieldValue(forKey: "tags") == .stringList(["a", "b"]))
        }
        // Beside another member, in either order, it is no answer: nothing is read as a save.
        for input in [#"{"record":\#(record),"operationType":"forceDelete"}"#, #"{"operationType":"forceDelete","record":\#(record)}"#,
                      #"{"record":\#(record),"records":[]}"#, #"{"zoneID":{"zoneName":"Notes"},"record":\#(record)}"#] {
            let items = try Self.read(input)
            #expect(!items.isEmpty && items.allSatisfy { $0.record == nil && $0.rejection != nil }, "\(input): \(items)")
        }
    }

    @Test("a result that is none of the three (a misspelt 'record', a record that is not an object) is rejected, never read as a deletion")
    func neitherShape() throws {
        let items = try Self.read(#"{"recordResults":[{"type":"existing","recordName":"n1","rec0rd":{"recordName":"n1"}},{"type":"existing","recordName":"n4","record":"n4"},7]}"#,
                                  readsDeletions: true)
        #expect(items.count == 3, "\(items)")
        #expect(items[0].rejection?.message.contains("'rec0rd'") == true, "\(items[0])")
        #expect(items[1].rejection?.message.contains("'record' must be an object") == true, "\(items[1])")
        #expect(items[2].rejection?.message.contains("expected a record result object") == true, "\(items[2])")
        // A record's members written inline (no 'record'): its fields make it no deletion.
        let inline = try Self.read(#"{"recordResults":[{"type":"existing","recordName":"n1","recordType":"Note","fields":{"title":{"type":"stringType","value":"hi"}}}]}"#,
                                   readsDeletions: true)
        #expect(inline.count == 1 && inline.first?.rejection?.message.contains("carries no fields") == true, "\(inline)")
    }

    @Test("an envelope that holds two lists of records (a changes answer's zones and a query answer's records) is refused, naming both")
    func twoListsInOneEnvelope() throws {
        let mixed = #"{"records":[{"recordName":"n1","recordType":"Note","fields":{}}],"zones":[{"zoneID":{"zoneName":"Z"},"records":[]}]}"#
        #expect { _ = try Self.read(mixed) } throws: { "\($0)".contains("holds both 'records' and 'zones'") }
    }

    @Test("a query answer's continuationToken (CKTool JS's continuationMarker), first or last, makes the object an envelope and is the reader's marker",
          arguments: [#"{"continuationToken":"abc","records":[{"recordName":"c1","recordType":"C","fields":{}}]}"#,
                      #"{"records":[{"recordName":"c1","recordType":"C","fields":{}}],"continuationToken":"abc"}"#])
    func continuationToken(input: String) throws {
        let reader = try RecordReader(data: Data(input.utf8), options: RecordReadOptions())
        var items: [RecordReadResult] = []
        while let item = try reader.next() { items.append(item) }
        #expect(items.count == 1 && items.first?.record?.recordID.recordName == "c1", "\(items)")
        #expect(reader.continuationMarker == "abc")
    }

    @Test("a CKTool JS reference's zone (CKDBNullableReference.zone) places it as a zoneID does: another zone than its record's is refused, never pointed into the record's zone")
    func referenceZone() throws {
        let other = #"{"recordName":"a","recordType":"T","zone":{"zoneName":"Z"},"fields":{"r":{"type":"referenceType","value":{"recordName":"b","zone":{"zoneName":"Other"}}}}}"#
        #expect(try Self.read(other).first?.rejection?.message.contains("points into zone 'Other'") == true)
        let parent = #"{"recordName":"a","recordType":"T","zone":{"zoneName":"Z"},"fields":{},"parent":{"recordName":"b","zone":{"zoneName":"Other"}}}"#
        #expect(try Self.read(parent).first?.rejection?.message.contains("points into zone 'Other'") == true)
        // A record that names no zone goes where the importer puts it: its reference keeps the
        // zone it names, so that the save refuses it there.
        let unplaced = #"{"recordName":"a","recordType":"T","fields":{"r":{"type":"referenceType","value":{"recordName":"b","zone":{"zoneName":"Other"}}}}}"#
        let record = try #require(try Self.read(unplaced).first?.record)
        #expect(record.fieldValue(forKey: "r") == .reference(Record.Reference(recordID: Record.ID(recordName: "b", zoneID: RecordZone.ID(zoneName: "Other")), action: .none)))
        // Its own zone, and a zoneID given beside it, which wins.
        let same = #"{"recordName":"a","recordType":"T","zone":{"zoneName":"Z"},"fields":{"r":{"type":"referenceType","value":{"recordName":"b","zone":{"zoneName":"Other"},"zoneID":{"zoneName":"Z"}}},"#
            + #""s":{"type":"referenceType","value":{"recordName":"c","zone":{"zoneName":"Z","canonicalName":"Z","zoneType":"REGULAR_CUSTOM_ZONE"}}}}}"#
        let placed = try #require(try Self.read(same).first?.record)
        #expect(placed.fieldValue(forKey: "r") == .reference(Record.Reference(recordID: Record.ID(recordName: "b", zoneID: placed.recordID.zoneID), action: .none)))
        #expect(placed.fieldValue(forKey: "s") == .reference(Record.Reference(recordID: Record.ID(recordName: "c", zoneID: placed.recordID.zoneID), action: .none)))
    }
}
