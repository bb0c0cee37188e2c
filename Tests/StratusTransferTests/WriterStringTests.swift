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
}
