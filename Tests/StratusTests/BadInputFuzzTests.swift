import Foundation
import SeededRandom
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import StratusTransfer
import Testing

// Bad input: generated (not only mutated) malformed predicates, CloudKit record JSON and CSV —
// truncated, wrong types, huge numbers, invalid UTF-8, deep nesting, giant strings, hostile
// names — must never crash or hang, and every problem must come back as an error with a
// position. What parses is then compiled, run against a real store or saved into one, so that
// nothing unchecked reaches SQL. Names that are not identifiers are rejected at every entry.
//
// STRATUS_FUZZ_CASES (inputs per kind, default 2,500) and STRATUS_FUZZ_SEED scale and replay
// the run; scripts/fuzz-inputs runs the long version and prints its figures.

// MARK: - Generator

/// Builds malformed inputs from hostile pieces.
struct BadInputGenerator {
    var random: SeededGenerator

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &random) < p }
    mutating func pick<T>(_ options: [T]) -> T { options[int(0...options.count - 1)] }

    /// Names that are not identifiers, several of them shaped like SQL or JSON-path injection.
    static let hostileNames = [
        "Item'; DROP TABLE records; --", "n') OR ('1'='1", "a\" OR \"1\"=\"1", "x); DELETE FROM records; --", "$.n", "n[0]",
        "a b", "a-b", "a.b", "a'b", "a;b", "a/*b*/", "--", "", "1a", "_a", "é", "Ｎ", "a\u{0}b", "a\nb", "🙂",
        String(repeating: "n", count: 256),
    ]
    /// Names that are fine (and so must be stored as given).
    static let goodNames = ["Item", "n", "s", "title", "Z9", "a_1_B", "records", "select"]

    mutating func name() -> String { chance(0.5) ? pick(Self.goodNames) : pick(Self.hostileNames) }

    mutating func hugeNumber() -> String {
        pick([
            "1e99999", "-1e99999", "1e-99999", "99999999999999999999999", "9223372036854775808", "-9223372036854775809",
            "9223372036854775807", "-9223372036854775808", "1.7976931348623157e309", "4.9e-325", "-0", "0x1F", "0b1", "1_000",
            "00012", ".5", "5.", "1e", "-", "+1", "NaN", "Infinity", "-Infinity", "1" + String(repeating: "0", count: int(20...2_000)),
            "0." + String(repeating: "0", count: int(20...600)) + "1", "1e" + String(repeating: "9", count: int(3...40)),
        ])
    }

    /// Bytes that are not UTF-8.
    mutating func invalidUTF8() -> [UInt8] {
        pick([[0xFF], [0xFE, 0xFF], [0xC3], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]])
    }

    /// Text full of escapes, quotes, control characters and non-ASCII, sometimes giant.
    mutating func text() -> String {
        let pieces = ["a", "Z", "0", " ", "'", "\"", "\\", "\\n", "\\u00e9", "\\ud800", "\\u", "\\x", "\n", "\r", "\t", "\u{0}", "\u{1F}", "é", "日本", "👩‍👩‍👧", "\u{FEFF}", "\u{2028}", "%", "_", "%@", "{", "}", "[", "]", ",", ":", ";", "--", "/*"]
        if chance(0.01) { return String(repeating: pick(pieces), count: int(10_000...100_000)) }
        return (0..<int(0...12)).map { _ in pick(pieces) }.joined()
    }

    /// Damages bytes: truncates, cuts, duplicates, flips, or inserts invalid UTF-8, deep
    /// nesting, giant strings or huge numbers at random places.
    mutating func damage(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0..<int(1...3) {
            let at = bytes.isEmpty ? 0 : int(0...bytes.count - 1)
            switch int(0...8) {
            case 0: bytes.removeSubrange(at...)
            case 1: bytes.removeSubrange(at..<min(bytes.count, at + int(1...30)))
            case 2: if !bytes.isEmpty { bytes[at] = UInt8.random(in: 0...255, using: &random) }
            case 3: bytes.insert(contentsOf: invalidUTF8(), at: at)
            case 4: bytes.insert(contentsOf: repeatElement(pick([UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: "(")]), count: int(60...20_000)), at: at)
            case 5: bytes.insert(contentsOf: Array(("\"" + String(repeating: "x\\\"", count: int(1_000...30_000)) + "\"").utf8), at: at)
            case 6: bytes.insert(contentsOf: Array(hugeNumber().utf8), at: at)
            case 7:
                let end = min(bytes.count, at + int(1...200))
                bytes.insert(contentsOf: Array(bytes[at..<end]), at: int(0...bytes.count))
            default: bytes.insert(contentsOf: Array(pick([",", ":", "\"", "\\", "}", "]", "\n", "\r\n", "null", "true", "\u{0}"]).utf8), at: at)
            }
        }
        return bytes
    }

    // MARK: Predicates

    /// A predicate format and arguments: a well-formed predicate with hostile values (often
    /// damaged afterwards), or token soup.
    mutating func predicate() -> (format: String, arguments: [any Sendable]) {
        var tokens: [String] = []
        var arguments: [any Sendable] = []
        if chance(0.7) {
            (tokens, arguments) = wellFormedPredicate()
            if chance(0.5) {
                for _ in 0..<int(1...3) {
                    let at = int(0...tokens.count)
                    switch int(0...5) {
                    case 0: tokens.removeSubrange(at...)
                    case 1: if at < tokens.count { tokens.remove(at: at) }
                    case 2: tokens.insert(predicateToken(), at: at)
                    case 3: if at < tokens.count { tokens[at] = predicateToken() }
                    case 4: tokens.insert(String(repeating: "(", count: int(50...3_000)), at: at)
                    default: if at < tokens.count { tokens.insert(tokens[at], at: at) }
                    }
                }
            }
            if chance(0.2) { arguments = (0..<int(0...4)).map { _ in argument() } }
        } else {
            tokens = (0..<int(1...14)).map { _ in predicateToken() }
            arguments = (0..<int(0...4)).map { _ in argument() }
        }
        var format = tokens.joined(separator: pick([" ", " ", " ", "  ", "\n", "\t", " \r\n "]))
        if chance(0.05) {
            // Invalid UTF-8 arrives as replacement characters in a Swift string.
            var bytes = Array(format.utf8)
            bytes.insert(contentsOf: invalidUTF8(), at: bytes.isEmpty ? 0 : int(0...bytes.count))
            format = String(decoding: bytes, as: UTF8.self)
        }
        return (format, arguments)
    }

    /// A string literal for a predicate, quoted and escaped as the format language wants.
    mutating func quoted() -> String {
        let raw = text().replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
        return "'" + raw + "'"
    }

    /// A valid-looking value argument, sometimes of a kind the field does not hold.
    mutating func valueArgument() -> any Sendable {
        switch int(0...8) {
        case 0: return text()
        case 1: return pick([Int64.max, Int64.min, 0, -1, 42])
        case 2: return pick([1e308, -1e308, Double.leastNonzeroMagnitude, -0.0, 2.5, Double.nan, Double.infinity])
        case 3: return Date(timeIntervalSinceReferenceDate: pick([0, -1e12, 1e12, 712_345_678.5]))
        case 4: return Data((0..<int(0...8)).map { _ in UInt8(int(0...255)) })
        case 5: return Record.Reference(recordID: Record.ID(recordName: pick(["a", "b", "'; DROP TABLE records; --"])), action: .none)
        case 6: return Location(latitude: Double(int(-90...90)), longitude: Double(int(-180...180)))
        case 7: return pick(Self.goodNames)
        default: return argument()
        }
    }

    /// A predicate that parses (unless a value is out of range), and its arguments.
    mutating func wellFormedPredicate() -> ([String], [any Sendable]) {
        var parts: [[String]] = []
        var arguments: [any Sendable] = []
        func key(_ generator: inout BadInputGenerator) -> String {
            if generator.chance(0.2) {
                arguments.append(generator.chance(0.5) ? generator.pick(Self.goodNames) : generator.pick(Self.hostileNames))
                return "%K"
            }
            return generator.pick(["n", "s", "title", "tags", "place", "modificationDate", "creationDate", "recordName", "#now", "Z9", "a_1_B"])
        }
        func value(_ generator: inout BadInputGenerator) -> String {
            switch generator.int(0...4) {
            case 0:
                arguments.append(generator.valueArgument())
                return "%@"
            case 1: return generator.quoted()
            case 2: return generator.hugeNumber()
            case 3: return String(generator.int(-1_000...1_000))
            default: return generator.pick(["YES", "NO", "nil", "now()", "CAST(700000000.25, \"NSDate\")", "LOCATION(1.0, 2.0)", "REFERENCE(\"r\")", "BYTES(\"AAEC/w==\")", "{1, 2}"])
            }
        }
        for _ in 0..<int(1...4) {
            let k = key(&self)
            switch int(0...8) {
            case 0: parts.append([k, pick(["==", "!=", "<", "<=", ">", ">=", "="]), value(&self)])
            case 1: parts.append([value(&self), pick(["==", "<", ">="]), k])
            case 2: parts.append([k, "BETWEEN", "{", value(&self), ",", value(&self), "}"])
            case 3: parts.append([k, "IN", "{"] + (0..<int(1...4)).map { _ in value(&self) }.joined(separator: ",").split(separator: " ").map(String.init) + ["}"])
            case 4:
                if chance(0.5) { arguments.append(text()) }
                parts.append([k, "BEGINSWITH", arguments.count > 0 && chance(0.5) ? "%@" : quoted()])
            case 5: parts.append(["ANY", k, "=", value(&self)])
            case 6: parts.append(["self", "CONTAINS", quoted()])
            case 7:
                arguments.append(chance(0.9) ? Location(latitude: Double(int(-90...90)), longitude: Double(int(-180...180))) : valueArgument())
                parts.append(["distanceToLocation:fromLocation:(", k, ",", "%@", ")", pick(["<", ">="]), value(&self)])
            default: parts.append(["NOT", "(", k, pick(["==", "<"]), value(&self), ")"])
            }
        }
        if chance(0.1) { parts.append([pick(["TRUEPREDICATE", "FALSEPREDICATE"])]) }
        let tokens = parts.enumerated().flatMap { index, part in index == 0 ? part : [chance(0.05) ? "OR" : pick(["AND", "&&"])] + part }
        return (tokens, arguments)
    }

    mutating func predicateToken() -> String {
        switch int(0...9) {
        case 0: return pick(["AND", "OR", "NOT", "IN", "BETWEEN", "ANY", "ALL", "SOME", "NONE", "CONTAINS", "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES", "CONTAINS[c]", "TRUEPREDICATE", "FALSEPREDICATE", "self", "nil", "NULL", "YES", "NO", "now()", "SIZE"])
        case 1: return pick(["==", "=", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>", "&&", "||", "!", "+", "-", "*", "/", "**", "?"])
        case 2: return pick(["(", ")", "{", "}", "[", "]", ",", ".", ":", "@", "#", "$"])
        case 3: return pick(["%@", "%K", "%d", "%i", "%f", "%s", "%%", "%q", "%", "%1$@", "%@%@"])
        case 4: return hugeNumber()
        case 5: return pick(["'", "\"", "'unterminated", "\"x\\", "'\\u12'", "'\\uD800'", "\"\(text())\"", "'\(text())'"])
        case 6: return pick(["CAST(", "CAST('x', 'NSDate')", "LOCATION(", "LOCATION(1,2,3)", "REFERENCE(", "REFERENCE('a', 'b', 'c')", "BYTES(", "BYTES('***')", "distanceToLocation:fromLocation:(", "FUNCTION("])
        case 7: return pick(Self.hostileNames)
        case 8: return pick(["n", "s", "title", "tags", "place", "#AND", "#self", "recordID", "creationDate"])
        default: return text()
        }
    }

    /// An argument for a placeholder, often of a type the placeholder does not take.
    mutating func argument() -> any Sendable {
        switch int(0...13) {
        case 0: return pick(Self.hostileNames)
        case 1: return pick(Self.goodNames)
        case 2: return text()
        case 3: return Int64(int(-5...5))
        case 4: return pick([Int64.max, Int64.min, 0])
        case 5: return pick([Double.nan, Double.infinity, -Double.infinity, 1.5, -0.0, Double.greatestFiniteMagnitude])
        case 6: return Date(timeIntervalSinceReferenceDate: pick([0, -1e15, 1e15, 712_345_678.5]))
        case 7: return Data((0..<int(0...8)).map { _ in UInt8(int(0...255)) })
        case 8: return [pick(Self.hostileNames), "a"]
        case 9: return [Int64(1), Int64(2)]
        case 10: return Record.Reference(recordID: Record.ID(recordName: pick(["r", "_x", "é", ""])), action: .none)
        case 11: return Location(latitude: pick([0, 91, .nan, .infinity]), longitude: pick([0, 181, -.infinity]))
        case 12: return [[Int64(1)], [Int64(2)]]
        default: return true
        }
    }

    // MARK: Record JSON

    /// A JSON value of any kind (often not what its place wants).
    mutating func jsonValue(depth: Int = 0) -> String {
        switch int(0...(depth > 3 ? 5 : 8)) {
        case 0: return "null"
        case 1: return pick(["true", "false"])
        case 2: return hugeNumber()
        case 3: return String(int(-1_000...1_000))
        case 4: return "\"" + text() + "\""
        case 5: return "\"" + pick(["2024-01-01", "AAEC/w==", "***", "", "1", "r-1"]) + "\""
        case 6: return "[" + (0..<int(0...4)).map { _ in jsonValue(depth: depth + 1) }.joined(separator: ",") + "]"
        case 7: return "{" + (0..<int(0...3)).map { _ in "\"\(pick(["recordName", "zoneName", "latitude", "longitude", "downloadURL", "action", "x", text()]))\":\(jsonValue(depth: depth + 1))" }.joined(separator: ",") + "}"
        default: return String(repeating: "[", count: int(60...200)) + String(repeating: "]", count: int(0...200))
        }
    }

    /// A JSON string literal of hostile text.
    mutating func jsonString() -> String {
        var out = "\""
        for scalar in text().unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A `type` and `value` that belong together, with extreme but legal values.
    mutating func consistentField() -> (type: String, value: String) {
        switch int(0...10) {
        case 0: return ("STRING", jsonString())
        case 1: return ("INT64", pick(["9223372036854775807", "-9223372036854775808", "0", "-0", "42", "1e3"]))
        case 2: return ("DOUBLE", pick(["1.7976931348623157e308", "-1e308", "5e-324", "-0.0", "0.1", "2"]))
        case 3: return ("TIMESTAMP", pick(["0", "-62135596800000", "253402300799999", "1700000000000.5"]))
        case 4: return ("BYTES", pick(["\"\"", "\"AAEC/w==\"", "\"AAEC_w\"", "\"" + String(repeating: "QUFB", count: int(1...5_000)) + "\""]))
        case 5: return ("REFERENCE", "{\"recordName\":\"\(pick(["r-1", "'; DROP TABLE records; --", "_x"]))\",\"action\":\"\(pick(["NONE", "DELETE_SELF", "VALIDATE"]))\"}")
        case 6: return ("LOCATION", "{\"latitude\":\(pick(["0", "90", "-90", "91"])),\"longitude\":\(pick(["0", "180", "-181"]))}")
        case 7: return ("STRING_LIST", "[" + (0..<int(0...4)).map { _ in jsonString() }.joined(separator: ",") + "]")
        case 8: return ("INT64_LIST", "[" + (0..<int(0...4)).map { _ in String(int(-9...9)) }.joined(separator: ",") + "]")
        case 9: return ("DOUBLE_LIST", "[1.5,-0.0,1e300]")
        default: return ("TIMESTAMP_LIST", "[0,1700000000000]")
        }
    }

    mutating func jsonField(nearlyValid: Bool) -> String {
        if nearlyValid {
            let (type, value) = consistentField()
            let key = chance(0.9) ? pick(Self.goodNames + ["f\(int(0...20))"]) : name()
            return "\"\(key)\":{\"value\":\(value)" + (chance(0.9) ? ",\"type\":\"\(type)\"" : "") + "}"
        }
        let type = pick(FieldType.allCases.map(\.rawValue) + ["FROB", "", "int64", "ENCRYPTED_BYTES", "REFERENCE_LIST"])
        var members: [String] = []
        if chance(0.9) { members.append("\"value\":" + jsonValue()) }
        if chance(0.8) { members.append("\"type\":" + (chance(0.9) ? "\"\(type)\"" : jsonValue())) }
        if chance(0.1) { members.append("\"isEncrypted\":" + jsonValue()) }
        if chance(0.05) { members.append("\"value\":1") }  // duplicate key
        return "\"\(name())\":{" + members.joined(separator: ",") + "}"
    }

    mutating func jsonRecord() -> String {
        if chance(0.5) {
            // Nearly valid: names and types fit, values are extreme; a few keys are hostile.
            var members = ["\"recordName\":\"\(pick(["r-\(int(0...50))", "'; DROP TABLE records; --", "a b", String(repeating: "r", count: 255)]))\"",
                           "\"recordType\":\"\(chance(0.9) ? pick(Self.goodNames) : name())\""]
            var keys = Set<String>()
            let fields = (0..<int(0...5)).map { _ in jsonField(nearlyValid: true) }.filter { keys.insert(String($0.prefix { $0 != ":" })).inserted }
            members.append("\"fields\":{" + fields.joined(separator: ",") + "}")
            if chance(0.1) { members.append("\"zoneID\":{\"zoneName\":\"\(pick(["_defaultZone"] + Self.hostileNames))\"}") }
            members.shuffle(using: &random)
            return "{" + members.joined(separator: ",") + "}"
        }
        var members: [String] = []
        if chance(0.9) { members.append("\"recordName\":" + (chance(0.7) ? "\"\(pick(["r-\(int(0...50))", "_x", "é", "", String(repeating: "r", count: 256), "'; DROP TABLE records; --"]))\"" : jsonValue())) }
        if chance(0.9) { members.append("\"recordType\":" + (chance(0.8) ? "\"\(name())\"" : jsonValue())) }
        if chance(0.3) { members.append("\"zoneID\":" + (chance(0.7) ? "{\"zoneName\":\"\(pick(["_defaultZone", "Z"] + Self.hostileNames))\"}" : jsonValue())) }
        if chance(0.9) { members.append("\"fields\":" + (chance(0.85) ? "{" + (0..<int(0...5)).map { _ in jsonField(nearlyValid: false) }.joined(separator: ",") + "}" : jsonValue())) }
        if chance(0.15) { members.append("\"recordChangeTag\":" + jsonValue()) }
        if chance(0.1) { members.append("\"created\":" + jsonValue()) }
        if chance(0.1) { members.append("\"parent\":" + jsonValue()) }
        if chance(0.05) { members.append("\"deleted\":" + jsonValue()) }
        if chance(0.05) { members.append("\"\(text())\":" + jsonValue()) }
        members.shuffle(using: &random)
        return "{" + members.joined(separator: ",") + "}"
    }

    /// NDJSON, a JSON array or an envelope of generated records, sometimes damaged.
    mutating func jsonDocument() -> (bytes: [UInt8], format: RecordFormat?) {
        let records = (0..<int(1...6)).map { _ in jsonRecord() }
        let format: RecordFormat? = pick([nil, .ndjson, .json, .envelope])
        var text: String
        switch format {
        case .json?: text = "[" + records.joined(separator: ",\n") + "]"
        case .envelope?: text = "{\"records\":[" + records.joined(separator: ",") + "]" + (chance(0.3) ? ",\"zoneID\":" + jsonValue() : "") + "}"
        default: text = records.joined(separator: "\n") + (chance(0.5) ? "\n" : "")
        }
        var bytes = Array(text.utf8)
        if chance(0.3) { bytes = damage(bytes) }
        return (bytes, format)
    }

    // MARK: CSV

    mutating func csvCell() -> String {
        switch int(0...9) {
        case 0: return ""
        case 1: return hugeNumber()
        case 2: return text()
        case 3: return "\"" + text().replacingOccurrences(of: "\"", with: "\"\"") + "\""
        case 4: return "\"unterminated " + text()
        case 5: return "\"a\"b\""
        case 6: return pick(["2024-01-01T00:00:00Z", "yesterday", "1.5", "-7", "[1,2]", "{\"a\":1}", "r-1", "AAEC/w=="])
        case 7: return chance(0.2) ? String(repeating: "c", count: int(10_000...100_000)) : String(repeating: "c", count: int(100...2_000))
        case 8: return pick(Self.hostileNames)
        default: return String(int(-100...100))
        }
    }

    /// A CSV cell that fits its column's type, with extreme but legal values.
    mutating func typedCell(_ type: FieldType) -> String {
        func quote(_ text: String) -> String { "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        switch type {
        case .string: return quote(text())
        case .int64: return pick(["9223372036854775807", "-9223372036854775808", "0", "7", ""])
        case .double: return pick(["1.7976931348623157e308", "-0.0", "5e-324", "2.5", ""])
        case .timestamp: return pick(["2024-02-29T23:59:59.999Z", "1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z", ""])
        case .bytes: return pick(["AAEC/w==", "", String(repeating: "QUFB", count: int(1...1_000))])
        case .reference: return pick(["r-1", "'; DROP TABLE records; --", ""])
        case .stringList: return quote("[\"a\",\"b\"]")
        case .int64List: return quote("[1,2,3]")
        default: return ""
        }
    }

    /// A CSV document with a generated header and rows, and options to read it with.
    mutating func csvDocument() -> (bytes: [UInt8], options: RecordReadOptions) {
        var options = RecordReadOptions()
        options.format = .csv
        if chance(0.5) {
            // Nearly valid: good header, cells that fit their columns, hostile text.
            let types: [FieldType] = [.string, .int64, .double, .timestamp, .bytes, .reference, .stringList, .int64List]
            var columns: [(String, FieldType)] = []
            for i in 0..<int(1...5) { columns.append((chance(0.95) ? "f\(i)" : pick(Self.hostileNames), pick(types))) }
            var lines = [(["recordName"] + columns.map { "\($0.0):\($0.1.rawValue)" }).joined(separator: ",")]
            for row in 0..<int(1...8) {
                let name = chance(0.9) ? "row-\(row)" : pick(["_x", "é", "'; DROP TABLE records; --", ""])
                lines.append(([name] + columns.map { typedCell($0.1) }).joined(separator: ","))
            }
            options.csvRecordType = chance(0.95) ? pick(Self.goodNames) : pick(Self.hostileNames)
            var bytes = Array(lines.joined(separator: pick(["\n", "\r\n"])).utf8)
            if chance(0.2) { bytes = damage(bytes) }
            return (bytes, options)
        }
        var header: [String] = []
        if chance(0.9) { header.append("recordName") }
        if chance(0.4) { header.append("recordType") }
        for _ in 0..<int(0...5) {
            let type = pick(FieldType.allCases.map(\.rawValue) + ["FROB", "", "int64"])
            header.append(chance(0.7) ? "\(name()):\(type)" : name())
        }
        if chance(0.1) { header.append(header.first ?? "recordName") }   // a duplicate column
        header.shuffle(using: &random)
        var lines = [header.joined(separator: ",")]
        for _ in 0..<int(0...6) {
            let cells = (0..<max(0, header.count + int(-1...1))).map { _ in csvCell() }
            lines.append(cells.joined(separator: pick([",", ",", ";"])))
        }
        var bytes = Array(lines.joined(separator: pick(["\n", "\r\n", "\r"])).utf8)
        if chance(0.4) { bytes = damage(bytes) }
        options.csvRecordType = pick([nil, "Item", "Item", pick(Self.hostileNames)])
        if chance(0.2) { options.csvTypes = [name(): pick(FieldType.allCases)] }
        return (bytes, options)
    }
}

// MARK: - Checking

/// What a fuzz run found, in figures and problem examples.
struct FuzzTally: CustomStringConvertible {
    var inputs = 0
    var accepted = 0
    var rejected = 0
    var thrown = 0
    var slowest: Duration = .zero
    var bytes = 0
    var problems: [String] = []

    mutating func problem(_ text: @autoclosure () -> String) {
        if problems.count < 20 { problems.append(String(text().prefix(600))) } else if problems.count == 20 { problems.append("…") }
    }

    var description: String {
        "\(inputs) inputs (\(bytes / 1024) KB): \(accepted) accepted, \(rejected) items rejected with a position, \(thrown) thrown with a position; slowest \(slowest)"
    }
}

/// A short, printable excerpt of an input for a problem report.
func excerpt(_ bytes: some Collection<UInt8>) -> String {
    String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription
}

/// The size and seed of a fuzz run, from the environment.
enum FuzzSettings {
    static let cases = ProcessInfo.processInfo.environment["STRATUS_FUZZ_CASES"].flatMap(Int.init) ?? 2_500
    static let seed = ProcessInfo.processInfo.environment["STRATUS_FUZZ_SEED"].flatMap(UInt64.init) ?? 20_251_122
    /// Prints examples of rejected inputs (STRATUS_FUZZ_VERBOSE=1), to tune the generator.
    static let verbose = ProcessInfo.processInfo.environment["STRATUS_FUZZ_VERBOSE"] != nil
}

@Suite("Bad input: generated malformed predicates, record JSON, CSV and hostile names", .timeLimit(.minutes(FuzzSettings.cases / 5_000 + 30)))
struct BadInputFuzzTests {
    static let cases = FuzzSettings.cases
    static let seed = FuzzSettings.seed
    // A hang is caught by the suite's time limit; the slowest input is printed, not asserted
    // (on a busy machine any duration can be exceeded).

    static func elapsedSince(_ start: ContinuousClock.Instant) -> Duration { ContinuousClock.now - start }

    // MARK: Predicates

    @Test("malformed predicates parse or throw invalidArguments with a position; what parses compiles and runs on SQLite or is rejected")
    func predicates() async throws {
        try await SQLiteFixture.with { fixture in
            // `n` and `s` hold values of two types each, as a store may from before types were enforced.
            try await TestDatabase.seed([
                makeRecord("Item", "a", ["n": .int64(1), "s": .string("pre x"), "title": .string("Title"), "tags": .stringList(["t"]), "place": .location(Location(latitude: 1, longitude: 2))]),
                makeRecord("Item", "b", ["n": .double(2.5), "s": .int64(3)]),
            ], in: fixture.database)
            var generator = BadInputGenerator(seed: Self.seed)
            var tally = FuzzTally()
            var compiled = 0, executed = 0, compileRejected = 0, executeRejected = 0
            let context = fixture.database.context
            for _ in 0..<Self.cases {
                let (format, arguments) = generator.predicate()
                tally.inputs += 1
                tally.bytes += format.utf8.count
                let start = ContinuousClock.now
                let predicate: QueryPredicate
                do {
                    predicate = try QueryPredicate(format: format, argumentArray: arguments)
                    tally.accepted += 1
                } catch let error as StratusError {
                    tally.thrown += 1
                    if FuzzSettings.verbose && tally.thrown < 40 { print("rejected: \(format.prefix(160).debugDescription) \(arguments.count) args -> \(error.message.prefix(160).debugDescription)") }
                    // An upper bound: \n, \r\n and \r may each end a line.
                    let lines = format.utf8.reduce(1) { $1 == 0x0A || $1 == 0x0D ? $0 + 1 : $0 }
                    if error.code != .invalidArguments { tally.problem("\(error.code) for \(format.debugDescription.prefix(200))") }
                    if let line = error.line, let column = error.column, line >= 1, line <= lines + 1, column >= 1 {} else {
                        tally.problem("no position (line \(String(describing: error.line)), column \(String(describing: error.column))) for \(format.debugDescription.prefix(200)): \(error.message.prefix(200))")
                    }
                    tally.slowest = max(tally.slowest, Self.elapsedSince(start))
                    continue
                } catch {
                    tally.problem("a non-Stratus error \(error) for \(format.debugDescription.prefix(200))")
                    continue
                }
                // Whatever parses is compiled, and run against the store: a result or a
                // StratusError about the query, never a store error.
                do {
                    let query = try CompiledQuery(Query(recordType: "Item", predicate: predicate), zoneID: .default, desiredKeys: nil)
                    compiled += 1
                    do {
                        _ = try fixture.engine.queryRecords(query, in: context, after: nil, limit: 5)
                        executed += 1
                    } catch let error as StratusError where error.code == .invalidArguments {
                        executeRejected += 1
                        if FuzzSettings.verbose && executeRejected < 15 { print("store rejected: \(predicate) -> \(error.message.prefix(200))") }
                    } catch {
                        tally.problem("running \(format.debugDescription.prefix(200)) failed with \(error)")
                    }
                } catch let error as StratusError where error.code == .invalidArguments {
                    compileRejected += 1
                } catch {
                    tally.problem("compiling \(format.debugDescription.prefix(200)) failed with \(error)")
                }
                tally.slowest = max(tally.slowest, Self.elapsedSince(start))
            }
            #expect(tally.problems.isEmpty, "\(tally.problems.count) problems: \(tally.problems)")
            #expect(tally.accepted > 0 && tally.thrown > 0)
            print("fuzz predicates (seed \(Self.seed)): \(tally); \(compiled) compiled (\(compileRejected) rejected by the compiler), \(executed) ran on SQLite (\(executeRejected) rejected there)")
        }
    }

    // MARK: Readers

    /// Reads an input to its end, checking positions and that every record that comes out has
    /// valid names. Returns the records read.
    static func read(_ bytes: [UInt8], _ options: RecordReadOptions, _ tally: inout FuzzTally) -> [Record] {
        tally.inputs += 1
        tally.bytes += bytes.count
        let lineCount = bytes.reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
        var records: [Record] = []
        let start = ContinuousClock.now
        defer { tally.slowest = max(tally.slowest, elapsedSince(start)) }
        do {
            let reader = try RecordReader(data: Data(bytes), options: options)
            var steps = 0
            while let item = try reader.next() {
                steps += 1
                if steps > bytes.count + 2 {
                    tally.problem("no end after \(steps) items: \(excerpt(bytes))")
                    break
                }
                switch item {
                case .record(let record, let line):
                    tally.accepted += 1
                    if line < 1 || line > lineCount { tally.problem("record at line \(line) of \(lineCount): \(excerpt(bytes))") }
                    do {
                        try Naming.checkRecordName(record.recordID.recordName)
                        try Naming.checkIdentifier(record.recordType, kind: "record type")
                        try Naming.checkZoneName(record.recordID.zoneID.zoneName)
                        for key in record.allKeys() { try Naming.checkFieldKey(key) }
                    } catch {
                        tally.problem("a record with a bad name came out of the reader (\(error.message)): \(excerpt(bytes))")
                    }
                    records.append(record)
                case .deletion:
                    tally.problem("a deletion without readsDeletions: \(excerpt(bytes))")
                case .rejected(let error):
                    tally.rejected += 1
                    if error.line < 1 || error.line > lineCount || error.column < 1 || error.message.isEmpty {
                        tally.problem("rejection without a good position (line \(error.line) of \(lineCount), column \(error.column)): \(error.message.prefix(200)) in \(excerpt(bytes))")
                    }
                }
            }
        } catch let error as StratusError {
            tally.thrown += 1
            if let line = error.line, let column = error.column, line >= 1, line <= lineCount, column >= 1 {} else {
                tally.problem("thrown \(error.code) without a good position (line \(String(describing: error.line)) of \(lineCount), column \(String(describing: error.column))): \(error.message.prefix(200)) in \(excerpt(bytes))")
            }
        } catch let error as RecordInputError {
            tally.thrown += 1
            if error.line < 1 || error.column < 1 { tally.problem("thrown RecordInputError without a position: \(error)") }
        } catch {
            tally.problem("a non-Stratus error \(error) for \(excerpt(bytes))")
        }
        return records
    }

    /// Saves what the readers produced: each record is saved or rejected for itself, never a
    /// store error.
    static func saveAll(_ records: [Record], in database: Database, _ tally: inout FuzzTally) async throws -> (saved: Int, refused: Int) {
        var saved = 0, refused = 0
        for start in stride(from: 0, to: records.count, by: 200) {
            let chunk = Array(records[start..<min(records.count, start + 200)])
            var unique: [Record.ID: Record] = [:]
            for record in chunk { unique[record.recordID] = record }
            let results = try await database.modifyRecords(saving: Array(unique.values), deleting: [], savePolicy: .allKeys, atomically: false)
            for (id, result) in results.saveResults {
                switch result {
                case .success: saved += 1
                case .failure(let error as StratusError) where ![.internalError, .badDatabase].contains(error.code): refused += 1
                case .failure(let error): tally.problem("saving \(id.recordName.prefix(40)) from the reader failed with a store error: \(error)")
                }
            }
        }
        return (saved, refused)
    }

    @Test("generated malformed record JSON: no crash, no hang, every problem with a position, good names only, saves cleanly")
    func recordJSON() async throws {
        try await SQLiteFixture.with { fixture in
            var generator = BadInputGenerator(seed: Self.seed &+ 1)
            var tally = FuzzTally()
            var records: [Record] = []
            for _ in 0..<Self.cases {
                let (bytes, format) = generator.jsonDocument()
                var options = RecordReadOptions()
                options.format = format
                records += Self.read(bytes, options, &tally)
            }
            let (saved, refused) = try await Self.saveAll(records, in: fixture.database, &tally)
            #expect(tally.problems.isEmpty, "\(tally.problems.count) problems: \(tally.problems)")
            #expect(tally.rejected > 0 && tally.accepted > 0)
            print("fuzz record JSON (seed \(Self.seed &+ 1)): \(tally); \(saved) read records saved, \(refused) refused by the save rules")
        }
    }

    @Test("generated malformed CSV: no crash, no hang, every problem with a position, good names only, saves cleanly")
    func csv() async throws {
        try await SQLiteFixture.with { fixture in
            var generator = BadInputGenerator(seed: Self.seed &+ 2)
            var tally = FuzzTally()
            var records: [Record] = []
            for _ in 0..<Self.cases {
                let (bytes, options) = generator.csvDocument()
                records += Self.read(bytes, options, &tally)
            }
            let (saved, refused) = try await Self.saveAll(records, in: fixture.database, &tally)
            #expect(tally.problems.isEmpty, "\(tally.problems.count) problems: \(tally.problems)")
            #expect(tally.rejected > 0 && tally.accepted > 0)
            print("fuzz CSV (seed \(Self.seed &+ 2)): \(tally); \(saved) read records saved, \(refused) refused by the save rules")
        }
    }

    // MARK: Names

    /// Names that are not identifiers; each must be refused with invalidArguments.
    static let badNames = BadInputGenerator.hostileNames

    /// Runs `body` for each bad name and returns the names it did not reject with invalidArguments.
    static func notRejected(_ names: [String], alsoAccepting accepted: [StratusError.Code] = [], _ body: (String) async throws -> Void) async -> [String] {
        var slipped: [String] = []
        for name in names {
            do {
                try await body(name)
                slipped.append("\(name.debugDescription.prefix(40)): accepted")
            } catch let error as StratusError where error.code == .invalidArguments || accepted.contains(error.code) {
                continue
            } catch {
                slipped.append("\(name.debugDescription.prefix(40)): \(error)")
            }
        }
        return slipped
    }

    /// The error of the one item in a modify result, thrown.
    static func itemError<T>(_ result: Result<T, any Error>?) throws {
        if case .failure(let error)? = result { throw error }
        if result == nil { throw StratusError(.internalError, "no item result") }
    }

    @Test("record types, field names and zone names that are not identifiers are refused at every entry, before SQL")
    func hostileNamesAreRejected() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let canary = try await database.save(makeRecord("Item", "canary", ["n": .int64(1)]))
            let names = Self.badNames
            var report: [String: [String]] = [:]
            // CloudKit allows any ASCII zone name not starting with '_' (bound as a value, never
            // spliced into SQL), and queries read its dotted record types (cloudkit.share).
            let badZoneNames = names.filter { (try? Naming.checkZoneName($0)) == nil }
            let badQueryTypes = names.filter { !Naming.isSystemIdentifier($0) }
            func check(_ entry: String, alsoAccepting accepted: [StratusError.Code] = [], _ body: (String) async throws -> Void) async {
                let only = entry.contains("zone") ? badZoneNames : entry == "query: record type" ? badQueryTypes : names
                let slipped = await Self.notRejected(only, alsoAccepting: accepted, body)
                if !slipped.isEmpty { report[entry] = slipped }
            }

            await check("save: record type") { name in
                let results = try await database.modifyRecords(saving: [makeRecord(name, "r1")], deleting: [])
                try Self.itemError(results.saveResults[Record.ID(recordName: "r1")])
            }
            await check("save: field name") { name in
                let results = try await database.modifyRecords(saving: [makeRecord("Item", "r2", [name: .int64(1)])], deleting: [])
                try Self.itemError(results.saveResults[Record.ID(recordName: "r2")])
            }
            await check("save: zone name") { name in
                let id = Record.ID(recordName: "r3", zoneID: RecordZone.ID(zoneName: name))
                let results = try await database.modifyRecordsEachItem(saving: [Record(recordType: "Item", recordID: id)], deleting: [])
                try Self.itemError(results.saveResults[id])
            }
            // Reading and deleting by ID bind the zone name as a value: a zone that cannot exist
            // is not found (zoneNotFound, unknownItem) rather than refused; either is safe.
            await check("delete: zone name", alsoAccepting: [.zoneNotFound, .unknownItem]) { name in
                let id = Record.ID(recordName: "canary", zoneID: RecordZone.ID(zoneName: name))
                let results = try await database.modifyRecordsEachItem(saving: [], deleting: [id])
                try Self.itemError(results.deleteResults[id])
            }
            await check("fetch: zone name", alsoAccepting: [.zoneNotFound, .unknownItem]) { name in
                _ = try await database.record(for: Record.ID(recordName: "canary", zoneID: RecordZone.ID(zoneName: name)))
            }
            await check("fetch: desired key") { name in
                let results = try await database.records(for: [canary.recordID], desiredKeys: [name])
                try Self.itemError(results[canary.recordID])
            }
            await check("zones: create") { name in _ = try await database.save(RecordZone(zoneID: RecordZone.ID(zoneName: name))) }
            await check("zones: fetch") { name in _ = try await database.recordZone(for: RecordZone.ID(zoneName: name)) }
            await check("zones: delete") { name in _ = try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: name)) }
            await check("zones: changes") { name in _ = try await database.recordZoneChanges(inZoneWith: RecordZone.ID(zoneName: name), since: nil) }
            await check("query: record type") { name in _ = try await database.records(matching: Query(recordType: name)) }
            await check("query: %K key") { name in _ = try await database.records(matching: Query(recordType: "Item", format: "%K == 1", name)) }
            await check("query: sort key") { name in
                let query = Query(recordType: "Item")
                query.sortDescriptors = [RecordSortDescriptor(key: name)]
                _ = try await database.records(matching: query)
            }
            await check("query: desired key") { name in _ = try await database.records(matching: Query(recordType: "Item"), desiredKeys: [name]) }
            await check("query: zone") { name in _ = try await database.records(matching: Query(recordType: "Item"), inZoneWith: RecordZone.ID(zoneName: name)) }
            await check("schema: record type") { name in _ = try await fixture.container().saveSchema(RecordTypeSchema(recordType: name)) }
            await check("schema: field") { name in
                _ = try await fixture.container().saveSchema(RecordTypeSchema(recordType: "Item", fields: [.init(name, type: .int64, indexes: [.queryable, .sortable])]))
            }
            await check("schema: compound index") { name in
                _ = try await fixture.container().saveSchema(RecordTypeSchema(recordType: "Item", fields: [.init("n", type: .int64, indexes: [.queryable])],
                                                                              compoundIndexes: [.init(equalityFields: ["n"], sortField: name)]))
            }
            #expect(report.isEmpty, "bad names that were not refused with invalidArguments: \(report.sorted { $0.key < $1.key })")

            // The store is intact: the canary is there as saved, and queries still work.
            let again = try await database.record(for: canary.recordID)
            #expect(again.recordChangeTag == canary.recordChangeTag)
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).map(\.recordID.recordName) == ["canary"])
        }
    }

    @Test("SQL-looking record names and values are stored and matched as data")
    func sqlLookingDataIsData() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let nasty = ["'; DROP TABLE records; --", "\" OR 1=1 --", "%", "_", "a%b_c", "$.n[1]", "') OR ('1'='1", "\\", "x'||'y"]
            // Record names are ASCII and may not start with '_'; the rest is fine as a name.
            func recordName(_ text: String) -> String { text.hasPrefix("_") ? "x" + text : text }
            let records = nasty.enumerated().map { i, text in makeRecord("Item", recordName(text), ["title": .string(text), "n": .int64(Int64(i))]) }
            try await TestDatabase.save(records, in: database)
            for (i, text) in nasty.enumerated() {
                let fetched = try await database.record(for: Record.ID(recordName: recordName(text)))
                #expect(fetched.fieldValue(forKey: "title") == .string(text))
                let equal = try await TestDatabase.queryAll(Query(recordType: "Item", format: "title == %@", text), in: database)
                #expect(TestDatabase.names(equal) == [recordName(text)], "title == \(text.debugDescription)")
                let prefix = try await TestDatabase.queryAll(Query(recordType: "Item", format: "title BEGINSWITH %@", text), in: database)
                let expected = nasty.filter { $0.hasPrefix(text) }.map(recordName).sorted()
                #expect(TestDatabase.names(prefix).sorted() == expected, "BEGINSWITH \(text.debugDescription) matches literally")
                let byName = try await TestDatabase.queryAll(Query(recordType: "Item", format: "recordName == %@", Record.Reference(recordID: Record.ID(recordName: recordName(text)), action: .none)), in: database)
                #expect(byName.first?.fieldValue(forKey: "n") == .int64(Int64(i)))
            }
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == nasty.count)
        }
    }

    /// A serialized cursor with `replace` applied to its JSON text.
    static func tampered(_ cursor: QueryOperation.Cursor, _ replacements: [(String, String)]) throws -> String {
        // The cursor's own prefix: another (an older version's) is refused before the JSON is read.
        let prefix = String(cursor.serialized.prefix { $0 != "_" }) + "_"
        var base64 = String(cursor.serialized.dropFirst(prefix.count)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        var json = String(decoding: try #require(Data(base64Encoded: base64)), as: UTF8.self)
        for (old, new) in replacements {
            #expect(json.contains(old), "the cursor JSON has \(old): \(json)")
            json = json.replacingOccurrences(of: old, with: new)
        }
        return prefix + Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    @Test("a tampered cursor (record type, sort key, predicate key that are not identifiers) is refused, in the library and by `stratus query`")
    func tamperedCursorIsRefused() async throws {
        try await TemporaryStore.with(prefix: "stratus-cursor") { store in
            let path = store.path()
            let container = Container(identifier: "com.example.cursor", engine: try SQLiteEngine(path: path), userName: "tester")
            let database = container.publicCloudDatabase
            try await TestDatabase.save(makeRecords("Item", count: 5, prefix: "item") { i in ["rank": .int64(Int64(i))] }, in: database)
            let query = try Query(recordType: "Item", format: "rank >= %d", 0)
            query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
            let page = try await database.records(matching: query, resultsLimit: 2)
            let cursor = try #require(page.queryCursor)

            // The record type and field names become SQL text; the zone name is a bound value.
            let variants: [(what: String, replacements: [(String, String)], isSQLText: Bool)] = [
                ("record type", [("\"recordType\":\"Item\"", "\"recordType\":\"Item' OR '1'='1\"")], true),
                ("sort and predicate key", [("\"rank\"", "\"rank') OR 1=1 --\"")], true),
                ("zone name", [("\"zoneName\":\"_defaultZone\"", "\"zoneName\":\"x'; DROP TABLE records; --\"")], false),
            ]
            let stratus = try ChildProcess.builtExecutable("stratus")
            for (what, replacements, isSQLText) in variants {
                let text = try Self.tampered(cursor, replacements)
                do {
                    let decoded = try QueryOperation.Cursor(serialized: text)
                    if isSQLText {
                        // Running it would reach the SQL builder (and trap there); only report it.
                        Issue.record("a cursor with a tampered \(what) was accepted: \(decoded)")
                    } else {
                        // The query searches every zone (it names none): a zone its cursor names
                        // that the database does not have is one deleted since, and not read.
                        let error = stratusError(await caughtError { try await database.records(continuingMatchFrom: decoded) })
                        #expect(error == nil || error?.code == .zoneNotFound || error?.code == .invalidArguments, "\(what): \(String(describing: error))")
                    }
                } catch let error as StratusError {
                    #expect(error.code == .invalidArguments && !error.message.contains("older version"), "\(what): \(error)")
                }
                let status = try await ZoneTestProgram.run(stratus, ["query", "--store", path, "--container", "com.example.cursor", "--cursor", text], in: store)
                #expect(!status.killed && (status.exitCode == 64 || (!isSQLText && [0, 1].contains(status.exitCode))),
                        "stratus query with a cursor whose \(what) was tampered: exit \(status.exitCode)\(status.killed ? " (killed by a signal)" : ""), stderr: \(status.stderr.prefix(300))")
            }
            // The store is intact.
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == 5)
        }
    }

    @Test("a cursor edited to name the Users type is refused, as a query of Users is")
    func cursorEditedToListUsersIsRefused() async throws {
        try await TemporaryStore.with(prefix: "stratus-cursor-users") { store in
            let container = Container(identifier: "com.example.cursor", engine: try SQLiteEngine(path: store.path()), userName: "tester")
            let database = container.publicCloudDatabase
            try await TestDatabase.save(makeRecords("Item", count: 3, prefix: "item") { i in ["rank": .int64(Int64(i))] }, in: database)
            // The user's record exists once it was fetched.
            _ = try await database.record(for: try await container.userRecordID())
            let cursor = try #require(try await database.records(matching: Query(recordType: "Item"), resultsLimit: 1).queryCursor)
            let text = try Self.tampered(cursor, [("\"recordType\":\"Item\"", "\"recordType\":\"Users\"")])
            let error = stratusError(await caughtError { try await database.records(continuingMatchFrom: try QueryOperation.Cursor(serialized: text)) })
            #expect(error?.code == .invalidArguments && error?.message.contains("fetch a user's record by its ID") == true, "\(String(describing: error))")
        }
    }

    @Test("a cursor whose position holds a non-finite number, or values that do not fit its sort keys, is refused rather than ending the query early")
    func cursorWithImpossiblePositionIsRefused() async throws {
        try await TemporaryStore.with(prefix: "stratus-cursor-nan") { store in
            let path = store.path()
            let container = Container(identifier: "com.example.cursor", engine: try SQLiteEngine(path: path), userName: "tester")
            let database = container.publicCloudDatabase
            try await TestDatabase.save(makeRecords("Item", count: 5, prefix: "item") { i in ["score": .double(Double(i) + 0.5)] }, in: database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "score")]
            let zoneCursor = try #require(try await database.records(matching: query, inZoneWith: .default, resultsLimit: 2).queryCursor)
            let everyZoneCursor = try #require(try await database.records(matching: query, resultsLimit: 2).queryCursor)
            let stratus = try ChildProcess.builtExecutable("stratus")
            let variants: [(what: String, cursor: QueryOperation.Cursor, replacements: [(String, String)])] = [
                ("NaN", zoneCursor, [("1.5", "\"NaN\"")]),
                ("infinity", zoneCursor, [("1.5", "\"-Infinity\"")]),
                ("NaN in a zone's place", everyZoneCursor, [("1.5", "\"NaN\"")]),
                ("two values for one key", zoneCursor, [("[{\"double\"", "[null,{\"double\"")]),
            ]
            for (what, cursor, replacements) in variants {
                let text = try Self.tampered(cursor, replacements)
                let error = stratusError(await caughtError { _ = try QueryOperation.Cursor(serialized: text) })
                #expect(error?.code == .invalidArguments && error?.message.contains("position") == true, "\(what): \(String(describing: error))")
                let status = try await ZoneTestProgram.run(stratus, ["query", "--store", path, "--container", "com.example.cursor", "--cursor", text], in: store)
                #expect(status.exitCode == 64 && status.stderr.contains("position"), "stratus query with a cursor of \(what): exit \(status.exitCode), stderr: \(status.stderr.prefix(300))")
            }
            // The untouched cursors still go on.
            #expect(try await database.records(continuingMatchFrom: zoneCursor).matchResults.count == 3)
            #expect(try await database.records(continuingMatchFrom: everyZoneCursor).matchResults.count == 3)
        }
    }

    @Test("a query sorting by more keys than a query may have, or a cursor edited to, is refused before it runs (its cost grows without bound)")
    func tooManySortKeysAreRefused() async throws {
        try await TemporaryStore.with(prefix: "stratus-cursor-keys") { store in
            let container = Container(identifier: "com.example.cursor", engine: try SQLiteEngine(path: store.path()), userName: "tester")
            let database = container.publicCloudDatabase
            try await TestDatabase.save(makeRecords("Item", count: 5, prefix: "item") { i in ["rank": .int64(Int64(i))] }, in: database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = Array(repeating: RecordSortDescriptor(key: "rank"), count: Query.maximumSortDescriptors + 1)
            let direct = stratusError(await caughtError { _ = try await database.records(matching: query, resultsLimit: 2) })
            #expect(direct?.code == .invalidArguments && direct?.message.contains("sorts by 101 keys") == true, "\(String(describing: direct))")

            query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
            let cursor = try #require(try await database.records(matching: query, inZoneWith: .default, resultsLimit: 2).queryCursor)
            let prefix = String(cursor.serialized.prefix { $0 != "_" }) + "_"
            var base64 = String(cursor.serialized.dropFirst(prefix.count)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            let json = try #require(Data(base64Encoded: base64))
            var object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
            var edited = try #require(object["query"] as? [String: Any])
            let sortKey = try #require((edited["sortKeys"] as? [Any])?.first)
            edited["sortKeys"] = Array(repeating: sortKey, count: 101)
            object["query"] = edited
            var position = try #require(object["position"] as? [String: Any])
            let sortValue = try #require((position["sortValues"] as? [Any])?.first)
            position["sortValues"] = Array(repeating: sortValue, count: 101)
            object["position"] = position
            let text = prefix + (try JSONSerialization.data(withJSONObject: object)).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            let error = stratusError(await caughtError { _ = try QueryOperation.Cursor(serialized: text) })
            #expect(error?.code == .invalidArguments && error?.message.contains("sorts by 101 keys") == true, "\(String(describing: error))")
        }
    }

    @Test("`stratus` refuses an argument whose bytes are not UTF-8 (64), which Foundation would read as another name, and creates nothing")
    func argumentsThatAreNotUTF8AreRefused() async throws {
        try await TemporaryStore.with(prefix: "stratus-not-utf8") { store in
            let stratus = try ChildProcess.builtExecutable("stratus")
            // A shell makes the bytes: a Swift String cannot hold them.
            let script = "cd \"$1\" && exec \"$0\" zones create Z --store \"$(printf 'a\\377.sqlite')\""
            let status = try await ZoneTestProgram.run("/bin/sh", ["-c", script, stratus, store.path("")], in: store)
            #expect(status.exitCode == 64 && status.stderr.contains("is not UTF-8"), "exit \(status.exitCode): \(status.stderr.prefix(300))")
            let made = try FileManager.default.contentsOfDirectory(atPath: store.path("")).filter { $0.hasPrefix("a") }
            #expect(made.isEmpty, "no store was created: \(made)")
        }
    }

    @Test("`stratus` refuses hostile --type, --zone, --sort and CSV header names with a usage or data error")
    func cliRefusesHostileNames() async throws {
        try await TemporaryStore.with(prefix: "stratus-cli-names") { store in
            let stratus = try ChildProcess.builtExecutable("stratus")
            let path = store.path()
            let base = ["--store", path, "--container", "com.example.names"]
            let seed = try store.writeFile("seed.ndjson", Data(Array(#"{"recordName":"canary","recordType":"Item","fields":{"n":{"value":1,"type":"INT64"}}}"#.utf8) + [0x0A]))
            #expect(try await ZoneTestProgram.run(stratus, ["import", seed.path, "--quiet"] + base, in: store).exitCode == 0)
            var problems: [String] = []
            for name in ["Item'; DROP TABLE records; --", "a b", "$.n", "x) OR (1=1"] {
                let runs: [(String, [String])] = [
                    ("query --type", ["query", "--type", name] + base),
                    ("query --zone", ["query", "--type", "Item", "--zone", name] + base),
                    ("query --sort", ["query", "--type", "Item", "--sort", name] + base),
                    ("query --where %K", ["query", "--type", "Item", "--where", "\(name) == 1"] + base),
                    ("count --type", ["count", "--type", name] + base),
                    ("import --zone", ["import", seed.path, "--quiet", "--zone", name] + base),
                ]
                for (what, arguments) in runs {
                    let status = try await ZoneTestProgram.run(stratus, arguments, in: store)
                    if status.killed || ![1, 64, 65, 66].contains(status.exitCode) {
                        problems.append("\(what) \(name.debugDescription): exit \(status.exitCode)\(status.killed ? " (signal)" : ""): \(status.stderr.prefix(200))")
                    }
                }
            }
            // A CSV whose header names a hostile column: rejected as input, nothing written.
            let csv = try store.writeFile("bad.csv", Data("recordName,recordType,\"n'); DROP TABLE records; --:INT64\"\nx,Item,1\n".utf8))
            let status = try await ZoneTestProgram.run(stratus, ["import", csv.path, "--quiet"] + base, in: store)
            if status.killed || ![1, 64, 65].contains(status.exitCode) { problems.append("CSV header: exit \(status.exitCode): \(status.stderr.prefix(200))") }
            #expect(problems.isEmpty, "\(problems)")
            let count = try await ZoneTestProgram.run(stratus, ["count", "--type", "Item"] + base, in: store)
            #expect(count.exitCode == 0 && count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the store still holds the canary only: \(count.stdout) \(count.stderr)")
        }
    }
}
