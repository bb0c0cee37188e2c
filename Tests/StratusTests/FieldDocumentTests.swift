import Foundation
@_spi(StratusEngine) import Stratus
import SeededRandom
import StratusTestSupport
import Testing

/// The stored field document: what the encoder writes reads back the same, and the direct
/// reader for that form agrees with the general JSON reader on every other input.
@Suite("Field document")
struct FieldDocumentTests {
    static let zone = RecordZone.ID(zoneName: "Notes")

    @Test("a read of many documents that remembers their shape decodes each exactly as a lone decode does")
    func shapedDecodesAgree() throws {
        func document(_ fields: [String: FieldValue]) -> [UInt8] { FieldDocument.encodedBytes(fields, encryptedKeys: []) }
        let long = String(repeating: "long value ", count: 4)
        var documents: [[UInt8]] = [
            document(["a": .int64(1), "b": .string("x"), "c": .double(1.5)]),
            document(["a": .int64(2), "b": .string(long), "c": .double(2.5)]),      // same names
            document(["a": .int64(3), "b": .string("y"), "c": .double(3.5)]),
            document(["a": .int64(4), "b": .string("z")]),                          // one fewer
            document(["a": .int64(5), "b": .string("w"), "c": .double(5), "d": .date(Date(timeIntervalSinceReferenceDate: 5))]),  // one more
            document(["a": .int64(6), "b": .string("v"), "c": .double(6), "d": .date(Date(timeIntervalSinceReferenceDate: 6))]),
            document([:]),
            document(["z": .string("only")]),
            document(["a": .int64(7), "b": .string("u"), "c": .double(7)]),
            document(["a": .int64(8), "b": .string("t"), "c": .double(8)]),
        ]
        // Names given twice (a document the encoder never writes): the last value wins either way.
        documents.append(Array(#"{"a":["I",1],"a":["I",2]}"#.utf8))
        documents.append(Array(#"{"a":["I",3],"b":["S","s"],"c":["F",1.0]}"#.utf8))
        documents.append(Array(#"{"a":["I",4],"b":["S","s"],"b":["S","again"]}"#.utf8))
        var shape: FieldDocument.Shape? = FieldDocument.Shape()
        var kept: [[String: FieldValue]] = []
        for bytes in documents {
            let alone = try bytes.withUnsafeBufferPointer { try FieldDocument.decodeStoredDocument(utf8: $0, zoneID: Self.zone) { _ in nil } }
            let shaped = try bytes.withUnsafeBufferPointer { try FieldDocument.decodeStoredDocument(utf8: $0, zoneID: Self.zone, shape: &shape) { _ in nil } }
            #expect(shaped.fields == alone.fields, "\(String(decoding: bytes, as: UTF8.self))")
            kept.append(shaped.fields)
        }
        // Each dictionary stays its record's own: later decodes changed none of them.
        for (bytes, fields) in zip(documents, kept) {
            let again = try bytes.withUnsafeBufferPointer { try FieldDocument.decodeStoredDocument(utf8: $0, zoneID: Self.zone) { _ in nil } }
            #expect(fields == again.fields)
        }
    }

    static func assetURL(_ identifier: String) -> URL? { URL(fileURLWithPath: "/assets/" + identifier) }

    static let fields: [String: FieldValue] = [
        "title": .string("Milk"), "plain": .string("milk"), "empty": .string(""), "unicode": .string("Grüße 日本 👩‍👩‍👧"),
        "escaped": .string("quote \" backslash \\ newline \n tab \t nul \u{0}"),
        "int": .int64(2), "negative": .int64(-17), "max": .int64(.max), "min": .int64(.min), "zero": .int64(0),
        "double": .double(2), "fraction": .double(0.1 + 0.2), "tiny": .double(1e-300), "huge": .double(-1.7e300),
        "negativeZero": .double(-0.0), "least": .double(.leastNonzeroMagnitude), "score": .double(0.125),
        "date": .date(Date(timeIntervalSinceReferenceDate: 817_020_265.450_568)), "early": .date(Date(timeIntervalSince1970: -1_234_567.891)),
        "bytes": .bytes(Data([0, 1, 2, 0xFF])), "noBytes": .bytes(Data()),
        "reference": .reference(Record.Reference(recordID: Record.ID(recordName: "target", zoneID: zone), action: .deleteSelf)),
        "location": .location(fullLocation(1)),
        "asset": .asset(Asset(storedIdentifier: "asset-1", size: 42, fileURL: assetURL("asset-1"))),
        "strings": .stringList(["a", "B", "", "c\"d"]), "ints": .int64List([1, -2, .max]), "noInts": .int64List([]),
        "doubles": .doubleList([1.5, -0.0, 1e22, 1e23]), "dates": .dateList([Date(timeIntervalSinceReferenceDate: 0.000_501)]),
        "bytesList": .bytesList([Data([1]), Data()]),
        "references": .referenceList([Record.Reference(recordID: Record.ID(recordName: "a", zoneID: zone), action: .none),
                                      Record.Reference(recordID: Record.ID(recordName: "b", zoneID: zone), action: .deleteSelf)]),
        "locations": .locationList([fullLocation(0), Location(latitude: -33.868_82, longitude: 151.209_29)]),
        "assets": .assetList([Asset(storedIdentifier: "x", size: 1, fileURL: assetURL("x")), Asset(storedIdentifier: "y", size: 0, fileURL: assetURL("y"))]),
    ]

    /// What decoding gives: the values (and their text, which tells -0.0 from 0.0), or the error's code.
    enum Outcome: Equatable {
        case decoded([String: FieldValue], Set<String>, String)
        case failed(String)
        case unexpected(String)
    }

    static func outcome(_ text: String) -> Outcome {
        do {
            let (fields, encrypted) = try FieldDocument.decodeDocument(text, zoneID: zone, assetURL: assetURL)
            return .decoded(fields, encrypted, "\(fields.sorted { $0.key < $1.key })")
        } catch let error as StratusError {
            return .failed("\(error.code)")
        } catch {
            return .unexpected("\(error)")
        }
    }

    /// What the general reader makes of `text`: a leading space is outside the form the
    /// direct reader takes, and JSON allows it.
    static func generalOutcome(_ text: String) -> Outcome { outcome(" " + text) }

    @Test("every kind of value reads back as it was stored, with the encrypted keys")
    func roundTrip() throws {
        let text = FieldDocument.encode(Self.fields, encryptedKeys: ["bytes", "title"])
        let (fields, encrypted) = try FieldDocument.decodeDocument(text, zoneID: Self.zone, assetURL: Self.assetURL)
        #expect(fields == Self.fields)
        #expect(encrypted == ["bytes", "title"])
        if case .double(let d)? = fields["negativeZero"] { #expect(d.sign == .minus) }
        #expect(Self.outcome(text) == Self.generalOutcome(text))
        var utf8 = Array(text.utf8)
        let direct = try utf8.withUnsafeMutableBufferPointer {
            try FieldDocument.decodeDocument(utf8: UnsafeBufferPointer($0), zoneID: Self.zone, assetURL: Self.assetURL)
        }
        #expect(direct.fields == Self.fields)
        #expect(try FieldDocument.decode("{}", zoneID: Self.zone, assetURL: Self.assetURL).isEmpty)
    }

    @Test("the written form: keys in order, base64 bytes, a folded copy only where lowercasing A-Z cannot make it")
    func writtenForm() throws {
        let text = FieldDocument.encode(["b": .int64(2), "a": .string("Milk"), "c": .string("ÉCOLE"), "d": .string("Café"), "e": .string("ÀB")])
        #expect(text == #"{"a":["S","Milk"],"b":["I",2],"c":["S","ÉCOLE","école"],"d":["S","Café"],"e":["S","ÀB","àb"]}"#)
        // Many keys take the other ordering path; both give sorted keys.
        let many = Dictionary(uniqueKeysWithValues: (0..<40).map { ("k\($0)", FieldValue.int64(Int64($0))) })
        let manyText = FieldDocument.encode(many)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(manyText.utf8)) as? [String: Any]).keys
        #expect(keys.count == 40)
        let positions = many.keys.map { manyText.range(of: "\"\($0)\":")!.lowerBound }
        #expect(zip(many.keys, positions).sorted { $0.0 < $1.0 }.map(\.1) == positions.sorted(), "keys appear in sorted order")
        var generator = SeededGenerator(seed: 7)
        // Doubles (and dates) as Swift prints them, including the whole numbers written directly.
        var doubles: [Double] = [0, -0.0, 1, -1, 0x1p53, 0x1p53 - 1, -(0x1p53 - 1), 1e15, 1e16, 721_692_800, 0.125, 1e-7, .greatestFiniteMagnitude]
        for _ in 0..<2_000 {
            let whole = Double(Int64.random(in: -(1 << 54)...(1 << 54), using: &generator)) / Double(1 << Int.random(in: 0...20, using: &generator))
            doubles.append(whole.rounded(.towardZero))
        }
        for d in doubles {
            #expect(FieldDocument.encode(["x": .double(d)]) == #"{"x":["F","# + d.description + "]}", "\(d)")
            let date = Date(timeIntervalSinceReferenceDate: d)
            #expect(FieldDocument.encode(["x": .date(date)]) == #"{"x":["D","# + d.description + "]}", "\(d)")
        }
        for length in 0..<40 {
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            #expect(FieldDocument.encode(["x": .bytes(data)]) == #"{"x":["B",""# + data.base64EncodedString() + #""]}"#)
        }
    }

    @Test("documents outside the written form read as the general reader reads them")
    func otherForms() {
        let documents = [
            #"{"a":["I",+5]}"#, #"{"a":["I",007]}"#, #"{"a":["I",-0]}"#, #"{"a":["I",2.0]}"#, #"{"a":["I",1e3]}"#,
            #"{"a":["I",9223372036854775807]}"#, #"{"a":["I",-9223372036854775808]}"#, #"{"a":["I",9223372036854775808]}"#,
            #"{"a":["F",1E5]}"#, #"{"a":["F",1e400]}"#, #"{"a":["F",-1e-400]}"#, #"{"a":["F",0e999]}"#, #"{"a":["F",1.]}"#,
            #"{"a":["F",.5]}"#, #"{"a":["F",1e]}"#, #"{"a":["F",--1]}"#, #"{"a":["F",1.5e+3]}"#, #"{"a":["F",123456789012345678901234]}"#,
            #"{"a":["F",0.30000000000000004]}"#, #"{"a":["F",9007199254740993]}"#, #"{"a":["D",-0.0]}"#,
            #"{"a":["S","x","y","z"]}"#, #"{"a":["S","x",1]}"#, #"{"a":["S","\u00e9\n"]}"#, #"{"a\"b":["S","x"]}"#,
            #"{"a":["I",1],"a":["S","x"]}"#, #"{"~encrypted":["a"],"~encrypted":["b"],"a":["I",1]}"#, #"{"~encrypted":"a"}"#,
            #"{"a":["I",1] }"#, #"{ "a":["I",1]}"#, #"{"a":[ "I",1]}"#, #"{"a":["I",1]}x"#, #"{"a":["I"]}"#, #"{"a":["X",1]}"#,
            #"{"a":["L",1,2,3,4,5,6,7]}"#, #"{"a":["L",1,2,3,4,5,6,7,8,9]}"#, #"{"a":["R","t",1,0]}"#, #"{"a":["R","t"]}"#,
            #"{"a":["RL",["t"],[1,0]]}"#, #"{"a":["AL",["t"],[]]}"#, #"{"a":["LL",[[1,2,3,4,5,6,7,8]]]}"#, #"{"a":["B","%%"]}"#,
            #"{"a":["SL",["x",1]]}"#, #"{"a":["IL",[1,]]}"#, #"{"a":["IL",[]]}"#, #"{"a":["R","t",7]}"#, #"[]"#, #""#, #"{"#,
            #"{"a":["S","x"],}"#, #"{"a":[]}"#, #"{"a":"S"}"#, #"{"a":["SL",[]],"b":["BL",[""]]}"#, #"{"~encrypted":[],"a":["I",1]}"#,
        ]
        for document in documents {
            #expect(Self.outcome(document) == Self.generalOutcome(document), "\(document)")
        }
    }

    @Test("every truncation and single-byte change of a document reads as the general reader reads it")
    func mutations() {
        var small = Self.fields
        for key in ["unicode", "escaped", "location", "locations", "assets", "references", "bytesList", "unicode"] { small[key] = nil }
        let text = Array(FieldDocument.encode(small, encryptedKeys: ["int"]).utf8)
        let replacements = Array("\"\\,:[]{}0-+.eE1 xSIFL".utf8)
        var checked = 0
        for end in 0..<text.count {
            let truncated = String(decoding: text[..<end], as: UTF8.self)
            #expect(Self.outcome(truncated) == Self.generalOutcome(truncated), "\(truncated)")
        }
        for index in text.indices {
            for replacement in replacements where replacement != text[index] {
                var changed = text
                changed[index] = replacement
                let document = String(decoding: changed, as: UTF8.self)
                #expect(Self.outcome(document) == Self.generalOutcome(document), "\(document)")
                checked += 1
            }
        }
        #expect(checked > 1000)
    }

    /// The written form spelled as JSON also allows: whitespace around every token, and every
    /// character of every string as a `\u` escape (surrogate pairs beyond the BMP).
    static func respelled(_ text: String) -> String {
        var out = ""
        var inString = false
        var escapedNext = false
        var rawScalars = 0  // the hex digits of an escape already there
        for scalar in text.unicodeScalars {
            if inString {
                if rawScalars > 0 {
                    out.unicodeScalars.append(scalar)
                    rawScalars -= 1
                } else if escapedNext {
                    out.unicodeScalars.append(scalar)
                    escapedNext = false
                    if scalar == "u" { rawScalars = 4 }
                } else if scalar == "\\" {
                    out += "\\"
                    escapedNext = true
                } else if scalar == "\"" {
                    out += "\""
                    inString = false
                } else {
                    for unit in String(scalar).utf16 { out += "\\u" + String(format: "%04X", unit) }
                }
            } else if scalar == "\"" {
                out += " \""
                inString = true
            } else if "{}[],:".unicodeScalars.contains(scalar) {
                out += " \n\t" + String(scalar) + "\r "
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    @Test("any spelling JSON allows reads as the written form")
    func otherSpellings() throws {
        let text = FieldDocument.encode(Self.fields, encryptedKeys: ["bytes", "title"])
        let respelled = Self.respelled(text)
        #expect(respelled.count > text.count * 2)
        let (fields, encrypted) = try FieldDocument.decodeDocument(respelled, zoneID: Self.zone, assetURL: Self.assetURL)
        #expect(fields == Self.fields)
        #expect(encrypted == ["bytes", "title"])
        // Parts after the ones a tag reads (a string's folded copy) are skipped, whatever they hold.
        let extra = try FieldDocument.decode(#"{"a":["S","x","y",{"z":[1,2]}],"b":["R","t",1,0],"c":["I",7,null]}"#, zoneID: Self.zone, assetURL: Self.assetURL)
        #expect(extra == ["a": .string("x"), "b": .reference(Record.Reference(recordID: Record.ID(recordName: "t", zoneID: Self.zone), action: .deleteSelf)), "c": .int64(7)])
    }

    @Test("one field read for a scan: its value when it has an order, what string equality compares, in any spelling")
    func fieldProbes() throws {
        let written = FieldDocument.encode(Self.fields, encryptedKeys: ["title"])
        for text in [written, Self.respelled(written)] {
            var text = text
            try text.withUTF8 { document in
                for name in Array(Self.fields.keys) + ["missing", "~encrypted"] {
                    var name = name
                    let expected = Self.fields[name].flatMap { QueryRules.orderedFamily(of: $0) == nil ? nil : $0 }
                    let found = try name.withUTF8 { try FieldDocument.orderedValue(ofField: $0, inStoredDocument: document) }
                    if case .reference(let reference)? = expected {
                        // A reference reads as what it orders by: its record name.
                        guard case .reference(let read)? = found else { Issue.record("\(name): \(String(describing: found))"); continue }
                        #expect(read.recordID.recordName == reference.recordID.recordName)
                    } else {
                        #expect(found == expected, "\(name)")
                    }
                    var equality: String?
                    let isString = try name.withUTF8 { nameBytes in
                        try FieldDocument.withEqualityText(ofField: nameBytes, inStoredDocument: document) { bytes, isFolded in
                            equality = isFolded ? String(decoding: bytes, as: UTF8.self) : QueryRules.asciiLowercased(String(decoding: bytes, as: UTF8.self))
                        }
                    }
                    #expect(isString == (equality != nil), "\(name)")
                    if case .string(let value)? = Self.fields[name] {
                        #expect(equality == QueryRules.equalityKey(value), "\(name)")
                    } else {
                        #expect(equality == nil, "\(name)")
                    }
                }
            }
        }
        func orderedValue(_ name: String, in document: String) throws -> FieldValue? {
            var name = name, document = document
            return try document.withUTF8 { document in try name.withUTF8 { try FieldDocument.orderedValue(ofField: $0, inStoredDocument: document) } }
        }
        // What follows a string and is not its folded copy is skipped, as decoding skips it.
        var extra = #"{"a":["S","X",null]}"#, a = "a"
        let skipped = try extra.withUTF8 { document in
            try a.withUTF8 { name in
                var read: (String, Bool)?
                try FieldDocument.withEqualityText(ofField: name, inStoredDocument: document) { read = (String(decoding: $0, as: UTF8.self), $1) }
                return read
            }
        }
        #expect(skipped?.0 == "X" && skipped?.1 == false)
        let damaged = #"{"a":["I",1],"b":["S",}"#
        #expect(throws: StratusError.self) { try orderedValue("b", in: damaged) }
        #expect(try orderedValue("a", in: damaged) == .int64(1), "a field before the damage reads")
    }

    @Test("a document that is not JSON, or not a stored document, fails as corrupt and says where")
    func corruptDocuments() {
        let documents = [
            "", "[]", #"{"a":["I",+5]}"#, #"{"a":["I",007]}"#, #"{"a":["F",.5]}"#, #"{"a":["F",1.]}"#, #"{"a":["I",2.0]}"#,
            #"{"a":["I",9223372036854775808]}"#, #"{"a":["X",1]}"#, #"{"a":["S","x"]} x"#, #"{"a":["S","\ud800"]}"#, #"{"a":["S","\q"]}"#,
            #"{"a":["RL",["t"],[1,0]]}"#, #"{"a":["L",1,2,3,4,5,6,7,8,9]}"#, #"{"a":["L",1,2,3,4,5,6,7]}"#, #"{"a":["B","%%"]}"#,
            #"{"~encrypted":"a"}"#, #"{"a":["SL",["x",1]]}"#, #"{"a":["I"]}"#, #"{"a":"S"}"#, #"{"a":["I",1],}"#,
        ]
        for document in documents {
            #expect(Self.outcome(document) == .failed("\(StratusError.Code.internalError)"), "\(document)")
            do {
                _ = try FieldDocument.decode(document, zoneID: Self.zone, assetURL: Self.assetURL)
            } catch {
                #expect("\(error)".contains("stored field document is corrupt"), "\(document): \(error)")
                #expect("\(error)".contains("at byte") || document.isEmpty, "\(document): \(error)")
            }
        }
        // Bytes that are not UTF-8 inside a string.
        let invalid: [UInt8] = Array(#"{"a":["S",""#.utf8) + [0xFF] + Array(#""]}"#.utf8)
        #expect(throws: StratusError.self) {
            try invalid.withUnsafeBufferPointer { try FieldDocument.decodeDocument(utf8: $0, zoneID: Self.zone, assetURL: Self.assetURL) }
        }
    }
}
