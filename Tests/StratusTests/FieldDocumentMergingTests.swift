import Foundation
@_spi(StratusEngine) import Stratus
import SeededRandom
import Testing

/// Changed fields written over a stored document without decoding it: the result is the
/// document of the merged fields, whatever spelling the stored one has.
@Suite("Field document merging")
struct FieldDocumentMergingTests {
    private static func document(_ fields: [String: FieldValue]) -> [UInt8] { FieldDocument.encodedBytes(fields, encryptedKeys: []) }

    private static func merged(_ stored: [String: FieldValue], _ changes: [String: FieldValue?]) -> [String: FieldValue] {
        var fields = stored
        for (key, value) in changes { fields[key] = value }
        return fields
    }

    @Test("changes written over a document give exactly the document of the merged fields")
    func mergesAsEncodingTheMergedFields() throws {
        let stored: [String: FieldValue] = ["b": .string("bee"), "d": .int64(4), "f": .doubleList([1, 2.5]), "h": .string("É\"\\")]
        let cases: [[String: FieldValue?]] = [
            [:],
            ["d": .int64(5)],                                   // replaced in place
            ["a": .int64(1), "z": .string("last")],             // added before and after every key
            ["c": .string("between"), "b": nil],                // added between, removed first
            ["h": nil, "f": nil, "d": nil, "b": nil],           // everything removed
            ["x": nil],                                         // removing a key that is not there
            ["e": .reference(Record.Reference(recordID: Record.ID(recordName: "t"), action: .none)), "g": .location(Location(latitude: 1, longitude: 2))],
        ]
        for changes in cases {
            let result = try FieldDocument.merging(FieldDocument.encodedChanges(changes), into: Self.document(stored))
            #expect(result == Self.document(Self.merged(stored, changes)), "\(changes)")
        }
        // Into an empty document, and many keys (sorted without the short-list path).
        #expect(try FieldDocument.merging(FieldDocument.encodedChanges(["k": .int64(1)]), into: Self.document([:])) == Self.document(["k": .int64(1)]))
        var generator = SeededGenerator(seed: 18)
        for round in 0..<200 {
            let keyCount = round % 3 == 0 ? 40 : 6
            var fields: [String: FieldValue] = [:]
            var changes: [String: FieldValue?] = [:]
            for _ in 0..<Int.random(in: 0...keyCount, using: &generator) {
                fields["k\(Int.random(in: 0..<keyCount, using: &generator))"] = .int64(Int64.random(in: -5...5, using: &generator))
            }
            for _ in 0..<Int.random(in: 0...keyCount, using: &generator) {
                let key = "k\(Int.random(in: 0..<keyCount, using: &generator))"
                changes[key] = Bool.random(using: &generator) ? .some(.string("v\(round)")) : .some(nil)
            }
            let result = try FieldDocument.merging(FieldDocument.encodedChanges(changes), into: Self.document(fields))
            #expect(result == Self.document(Self.merged(fields, changes)), "round \(round)")
        }
    }

    @Test("a stored document with spaces, escaped or unordered keys, or a key twice merges by the names it decodes to")
    func mergesOtherSpellingsByName() throws {
        let spellings = [
            #" { "b" : ["I",1] , "a":["S","x"] } "#,
            #"{"\u0061":["S","x"],"b":["I",1]}"#,
            #"{"a":["S","old"],"b":["I",1],"a":["S","x"]}"#,
        ]
        for spelling in spellings {
            let result = try #require(try FieldDocument.merging(FieldDocument.encodedChanges(["b": .int64(2), "c": .double(0.5)]), into: Array(spelling.utf8)))
            let fields = try FieldDocument.decode(String(decoding: result, as: UTF8.self), zoneID: .default) { _ in nil }
            #expect(fields == ["a": .string("x"), "b": .int64(2), "c": .double(0.5)], "\(spelling)")
            #expect(result == Self.document(fields), "the merged document is in the written form: \(spelling)")
        }
    }

    @Test("a document that holds more than fields (encrypted keys, JSON extras) is not merged")
    func documentsWithMoreThanFieldsAreNotMerged() throws {
        let changes = FieldDocument.encodedChanges(["a": .int64(1)])
        let encrypted = FieldDocument.encodedBytes(["a": .int64(0), "s": .string("x")], encryptedKeys: ["s"])
        var extras = Record.JSONExtras()
        extras.members["pluginFields"] = "{}"
        let withExtras = FieldDocument.encodedBytes(["a": .int64(0)], encryptedKeys: [], jsonExtras: extras)
        for stored in [encrypted, withExtras, Array(#"{"~json":{},"a":["I",0]}"#.utf8), Array(#"{"b":["I",0],"\u007ejson":{}}"#.utf8)] {
            #expect(try FieldDocument.merging(changes, into: stored) == nil, "\(String(decoding: stored, as: UTF8.self))")
        }
        // A value that merely holds "~ is a field like any other.
        let tilde = Self.document(["b": .string("~x")])
        #expect(try FieldDocument.merging(changes, into: tilde) == Self.document(["a": .int64(1), "b": .string("~x")]))
    }

    @Test("a document that is not an object of members fails as corrupt and says where")
    func corruptDocumentsFail() {
        for text in [#"{"a":"#, "[1]", #"{"a":["I",1]} x"#, #"{"a" ["I",1]}"#, ""] {
            #expect(throws: StratusError.self, "\(text)") { try FieldDocument.merging(FieldDocument.encodedChanges(["a": .int64(1)]), into: Array(text.utf8)) }
        }
        #expect(throws: StratusError.self) { try FieldDocument.merging(Array(#"{"a":"#.utf8), into: Self.document(["a": .int64(1)])) }
    }

    @Test("no value holds more bytes of field data per character of its document than the bound says")
    func fieldDataPerCharacterIsBounded() {
        let asset = Asset(downloadURL: nil, size: 0)
        let reference = Record.Reference(recordID: Record.ID(recordName: "r"), action: .none)
        let values: [FieldValue] = [
            .string(""), .string("é"), .string("\u{10FFFF}"), .int64(0), .double(0), .date(Date(timeIntervalSinceReferenceDate: 0)), .bytes(Data()),
            .bytes(Data([1])), .reference(reference), .location(Location(latitude: 0, longitude: 0)), .asset(asset),
            .stringList(["", "é"]), .int64List(Array(repeating: 0, count: 100)), .doubleList(Array(repeating: 0, count: 100)),
            .dateList(Array(repeating: Date(timeIntervalSinceReferenceDate: 0), count: 100)), .bytesList([Data(), Data([1])]),
            .referenceList(Array(repeating: reference, count: 100)), .locationList(Array(repeating: Location(latitude: 0, longitude: 0), count: 100)),
            .assetList(Array(repeating: asset, count: 100)), .assetList(Array(repeating: Asset(storedIdentifier: "", size: 0, fileURL: nil), count: 100)),
        ]
        for value in values {
            let fields: [String: FieldValue] = ["k": value]
            let characters = String(decoding: Self.document(fields), as: UTF8.self).unicodeScalars.count - 2   // as SQL counts them, without the braces
            #expect(Record.fieldDataSize(of: fields) <= FieldDocument.maximumFieldDataPerCharacter * characters, "\(value)")
        }
    }
}
