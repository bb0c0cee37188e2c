import Foundation
import Stratus
import StratusTransfer
import Testing

/// The writer tests strings for escapes a word at a time; a character that needs one must be
/// escaped wherever it falls in or across those words.
@Suite("Writer strings")
struct WriterStringTests {
    @Test("a quote, backslash or control character at every position is escaped and reads back")
    func escapesAtEveryPosition() throws {
        for special in ["\"", "\\", "\n", "\u{0}", "\u{1F}", "\t"] {
            for length in [1, 7, 8, 9, 16, 17, 24] {
                for position in 0..<length {
                    var characters = Array(repeating: Character("a"), count: length)
                    characters[position] = Character(special)
                    let text = String(characters) + "é"
                    let record = storedRecord("T", "r", ["s": .string(text)], tag: nil, created: nil, modified: nil)
                    let line = RecordJSONWriter.json(for: record)
                    #expect(!line.utf8.contains { $0 < 0x20 }, "raw control character for \(special.debugDescription) at \(position)")
                    let back = try #require(try readAll(line).first?.record)
                    #expect(back.fieldValue(forKey: "s") == .string(text), "\(special.debugDescription) at \(position) of \(length)")
                }
            }
        }
    }

    @Test("deletion and zone lines escape their names as record lines do")
    func changeLines() throws {
        let zone = RecordZone.ID(zoneName: "Notes", ownerName: "_owner")
        #expect(RecordJSONWriter.json(forDeletionOf: Record.ID(recordName: "note-1", zoneID: zone), recordType: "Note")
            == #"{"recordName":"note-1","recordType":"Note","deleted":true,"zoneID":{"zoneName":"Notes","ownerRecordName":"_owner"}}"#)
        #expect(RecordJSONWriter.json(forDeletedZone: zone) == #"{"zoneID":{"zoneName":"Notes","ownerRecordName":"_owner"},"deleted":true}"#)
        let odd = "a\"b\\c\n\u{1}é"
        let line = RecordJSONWriter.json(forDeletionOf: Record.ID(recordName: odd, zoneID: zone), recordType: nil)
        #expect(line == #"{"recordName":"a\"b\\c\n\u0001é","deleted":true,"zoneID":{"zoneName":"Notes","ownerRecordName":"_owner"}}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["recordName"] as? String == odd)
    }
}
