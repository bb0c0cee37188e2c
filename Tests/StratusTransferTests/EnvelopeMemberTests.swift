import Foundation
import Stratus
import StratusTransfer
import Testing

/// The members of an envelope, a `changes/zone` zone entry and a `records/modify` operation,
/// in any order JSON allows, given twice, or standing for an error.
@Suite("Envelope and zone entry members")
struct EnvelopeMemberTests {
    static func record(_ name: String) -> String { #"{"recordName":"\#(name)","recordType":"T","fields":{}}"# }

    static func records(_ count: Int) -> String { (0..<count).map { record("r\($0)") }.joined(separator: ",") }

    static let zone = RecordZone.ID(zoneName: "Z", ownerName: "_owner")
    static let zoneJSON = #""zoneID":{"zoneName":"Z","ownerRecordName":"_owner"}"#

    @Test("a zoneID after the records names their zone, also when the input comes in small reads", arguments: [
        #"{"zones":[{"records":[\#(records(40))],\#(zoneJSON)}]}"#,
        #"{"zones":[{"syncToken":"t","records":[\#(records(40))],"moreComing":false,\#(zoneJSON)}]}"#,
        #"{"operations":[\#((0..<40).map { #"{"operationType":"create","record":\#(record("r\($0)"))}"# }.joined(separator: ","))],\#(zoneJSON)}"#,
        #"{"records":[\#(records(40))],\#(zoneJSON)}"#,
    ])
    func zoneAfterRecords(input: String) throws {
        for chunkSize in [64, 1_000, 1 << 20] {
            let items = try readFromFile(Data(input.utf8), chunkSize: chunkSize)
            #expect(items.count == 40, "chunks of \(chunkSize)")
            for item in items {
                #expect(item.record?.recordID.zoneID == Self.zone, "chunks of \(chunkSize): \(item)")
            }
        }
    }

    @Test("an envelope or zone entry larger than the look-ahead, without a zoneID in it, is refused before its records unless the zone was chosen", arguments: [
        #"{"zones":[{"records":[\#(records(40))],\#(zoneJSON)}]}"#,
        #"{"operations":[\#((0..<40).map { #"{"operationType":"forceUpdate","record":\#(record("r\($0)"))}"# }.joined(separator: ","))],\#(zoneJSON)}"#,
        #"{"records":[\#(records(40))]}"#,
    ])
    func zoneUnknownBeyondLookAhead(input: String) throws {
        var options = RecordReadOptions()
        options.maximumRecordSize = 500
        do {
            let items = try readFromFile(Data(input.utf8), chunkSize: 64, options)
            Issue.record("read \(items.count) records into a zone the input may not name")
        } catch let error as StratusError {
            #expect(error.message.contains("is larger than 500 bytes and names no zoneID before its records"), "\(error)")
            #expect(error.line == 1 && error.column == column(of: #"{"recordName":"r0""#, in: input), "at the first record: \(error)")
        }
        // Chosen: the records go there (a later zoneID naming another zone is refused, below).
        var chosen = options
        chosen.zoneID = Self.zone
        chosen.zoneIsChosen = true
        let read = try readFromFile(Data(input.utf8), chunkSize: 64, chosen)
        #expect(read.count == 40 && read.allSatisfy { $0.record?.recordID.zoneID == Self.zone })
    }

    @Test("a zoneID further than the reader looks ahead, after records read into the zone chosen for the input, is refused when it names another")
    func lateZoneBeyondLookAhead() throws {
        var options = RecordReadOptions()
        options.maximumRecordSize = 500
        options.zoneIsChosen = true
        let input = #"{"zones":[{"records":[\#(Self.records(40))],\#(Self.zoneJSON)}]}"#
        let url = scratchFile()
        try Data(input.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        options.readChunkSize = 64
        let reader = try RecordReader(fileHandle: handle, options: options)
        var read = 0
        do {
            while let item = try reader.next() {
                #expect(item.record?.recordID.zoneID == .default)
                read += 1
            }
            Issue.record("the late zoneID was not refused")
        } catch let error as StratusError {
            #expect(read == 40)
            #expect(error.message.contains("the zoneID of a zone entry (zone 'Z') comes after records that name no zone"), "\(error)")
            #expect(error.message.contains("they were read into zone '_defaultZone'"), "\(error)")
            #expect(error.line == 1 && error.column == column(of: #""zoneID""#, in: input), "\(error)")
        }

        // The zone they were read into, named late, is no contradiction.
        var defaultZone = options
        defaultZone.zoneID = Self.zone
        let same = try readFromFile(Data(input.utf8), chunkSize: 64, defaultZone)
        #expect(same.count == 40 && same.allSatisfy { $0.record?.recordID.zoneID == Self.zone })
    }

    @Test("a key given twice in an envelope or a zone entry is refused where it stands", arguments: [
        (#"{"records":[\#(record("a"))],"records":[\#(record("b"))]}"#, #""records":[{"recordName":"b""#, "the key 'records' appears twice in the envelope"),
        (#"{"records":[],"continuationMarker":"a","continuationMarker":"b"}"#, #""continuationMarker":"b""#, "the key 'continuationMarker' appears twice in the envelope"),
        (#"{"zones":[{\#(zoneJSON),"zoneID":{"zoneName":"Y"},"records":[\#(record("a"))]}]}"#, #""zoneID":{"zoneName":"Y""#, "the key 'zoneID' appears twice in a zone entry"),
        (#"{"zones":[{"records":[],"rec\u006frds":[\#(record("a"))]}]}"#, #""rec\u006frds""#, "the key 'records' appears twice in a zone entry"),
        // An error result that holds records too, in either order: which is true is ambiguous.
        (#"{"zones":[{\#(zoneJSON),"serverErrorCode":"ZONE_NOT_FOUND","records":[\#(record("a"))]}]}"#, #""records":[{"#, "holds both 'records' and 'serverErrorCode'"),
        (#"{"zones":[{\#(zoneJSON),"records":[\#(record("a"))],"serverErrorCode":"ZONE_NOT_FOUND"}]}"#, #""serverErrorCode""#, "holds both 'records' and 'serverErrorCode'"),
    ] as [(String, String, String)])
    func duplicateEnvelopeKey(input: String, at needle: String, message: String) throws {
        do {
            let items = try readAll(input)
            Issue.record("no error for \(input); read \(items)")
        } catch let error as StratusError {
            #expect(error.message.contains(message), "\(error)")
            #expect(error.line == 1 && error.column == column(of: needle, in: input), "\(error)")
        }
    }

    @Test("an operation that gives its operationType or record twice is rejected")
    func duplicateOperationKey() throws {
        let input = #"{"operations":[{"operationType":"create","operationType":"forceDelete","record":\#(Self.record("a"))},{"operationType":"create","record":\#(Self.record("b")),"record":\#(Self.record("c"))},{"operationType":"create","record":\#(Self.record("d"))}]}"#
        let items = try readAll(input)
        #expect(items.count == 3)
        #expect(items[0].rejection?.message.contains("the operation has the key 'operationType' twice") == true, "\(items[0])")
        #expect(items[1].rejection?.message.contains("the operation has the key 'record' twice") == true, "\(items[1])")
        #expect(items[2].record?.recordID.recordName == "d")
    }

    @Test("a zone entry that is an error result is a rejected item naming the zone and the code; the other zones read")
    func zoneErrorEntry() throws {
        let input = #"{"zones":[{"zoneID":{"zoneName":"Gone","ownerRecordName":"_owner"},"serverErrorCode":"ZONE_NOT_FOUND","reason":"Zone 'Gone' does not exist"},{\#(Self.zoneJSON),"syncToken":"t","moreComing":false,"records":[\#(Self.record("a"))]}]}"#
        let items = try readAll(input)
        #expect(items.count == 2)
        let rejection = try #require(items[0].rejection)
        #expect(rejection.message.contains("the changes of zone 'Gone' are a CloudKit error result ('serverErrorCode' ZONE_NOT_FOUND)"), "\(rejection)")
        #expect(rejection.line == 1 && rejection.column == column(of: #""serverErrorCode""#, in: input))
        #expect(items[1].record?.recordID == Record.ID(recordName: "a", zoneID: Self.zone))

        // An answer whose every zone failed is still an answer about zones, not "no records".
        let failed = try readAll(#"{"zones":[{"zoneID":{"zoneName":"Gone"},"serverErrorCode":"CHANGE_TOKEN_EXPIRED"}]}"#)
        #expect(failed.count == 1)
        #expect(failed.first?.rejection?.message.contains("CHANGE_TOKEN_EXPIRED") == true)

        // The reason, written before the code as CloudKit writes it, says why.
        let explained = try readAll(#"{"zones":[{"zoneID":{"zoneName":"Gone"},"reason":"Zone 'Gone' does not exist","serverErrorCode":"ZONE_NOT_FOUND"}]}"#)
        #expect(explained.first?.rejection?.message.contains("('serverErrorCode' ZONE_NOT_FOUND, 'reason' Zone 'Gone' does not exist)") == true, "\(explained)")
    }
}
