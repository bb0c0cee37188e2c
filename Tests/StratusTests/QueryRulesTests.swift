import Foundation
@_spi(StratusEngine) import Stratus
import SeededRandom
import Testing

@Suite("Stratus's comparison, equality and ordering rules")
struct QueryRulesTests {
    @Test("equality keys fold case fully; ASCII text folds by lowercasing A-Z and stores no copy")
    func equalityKeys() {
        #expect(QueryRules.equalityKey("Straße") == "strasse")
        #expect(QueryRules.equalityKey("STRAẞE") == "strasse")
        #expect(QueryRules.equalityKey("\u{FB01}sh") == "fish")
        #expect(QueryRules.equalityKey("ΟΔΟΣ") == QueryRules.equalityKey("οδος"))
        #expect(QueryRules.equalityKey("Milk") == "milk")
        #expect(QueryRules.foldedFormToStore("Milk") == nil, "ASCII text needs no stored copy")
        #expect(QueryRules.foldedFormToStore("école") == nil, "already folded")
        #expect(QueryRules.foldedFormToStore("ÉCOLE") == "école")
        #expect(QueryRules.foldedFormToStore("Straße") == "strasse")
        #expect(QueryRules.asciiLowercased("ÀB") == "Àb", "only A-Z are lowercased")
    }

    @Test("stored values are equal only when their bytes are: NFC/NFD, Ohm/Omega and ±0 differ, and hash apart")
    func exactValueEquality() {
        let pairs: [(FieldValue, FieldValue)] = [
            (.string("caf\u{E9}"), .string("cafe\u{301}")),
            (.string("\u{2126}"), .string("\u{3A9}")),
            (.double(0.0), .double(-0.0)),
            (.stringList(["caf\u{E9}"]), .stringList(["cafe\u{301}"])),
        ]
        for (a, b) in pairs {
            #expect(a != b)
            #expect(Set([a, b]).count == 2)
        }
        #expect(FieldValue.string("caf\u{E9}") == .string("caf\u{E9}"))
        #expect(FieldValue.date(Date(timeIntervalSinceReferenceDate: 0)) == .date(Date(timeIntervalSinceReferenceDate: -0.0)), "a date is an instant")
        #expect(Set([FieldValue.date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSinceReferenceDate: -0.0))]).count == 1)
        #expect(FieldValue.int64(2) != .double(2), "types never mix")
    }

    @Test("order: missing first, then numbers (exactly between INT64 and DOUBLE), timestamps, strings by scalar, references")
    func order() {
        let ascending: [FieldValue?] = [
            nil, .int64(-3), .double(-2.5), .int64(0), .double(0.5), .double(9_007_199_254_740_992), .int64(9_007_199_254_740_993),
            .date(Date(timeIntervalSinceReferenceDate: -5)), .date(Date(timeIntervalSinceReferenceDate: 5)),
            .string(""), .string("Z"), .string("a"), .string("é"), .string("😀"),
            .reference(Record.Reference(recordID: Record.ID(recordName: "a"), action: .none)),
        ]
        for (i, a) in ascending.enumerated() {
            for (j, b) in ascending.enumerated() {
                let expected: ComparisonResult = i == j ? .orderedSame : (i < j ? .orderedAscending : .orderedDescending)
                #expect(QueryRules.sortOrder(a, b) == expected, "\(String(describing: a)) vs \(String(describing: b))")
            }
        }
        #expect(QueryRules.sortOrder(.stringList(["a"]), nil) == .orderedSame, "a value without order sorts as missing")
        #expect(QueryRules.sortOrder(.double(-0.0), .int64(0)) == .orderedSame, "numbers compare by value")
        #expect(QueryRules.conditionOrder(.int64(1), .string("1")) == nil, "different families never compare")
    }

    @Test("ordered keys compare as bytes exactly as the values sort, integers and doubles exactly, and -0.0 as 0")
    func orderedKeys() {
        let big = Int64(1) << 53
        var values: [FieldValue] = [
            .int64(.min), .int64(.min + 1), .double(-0x1p63), .double(-1e300), .int64(-big - 1), .double(Double(-big)), .int64(-3), .double(-2.5),
            .double(-0.0), .int64(0), .double(0), .double(.leastNonzeroMagnitude), .double(0.5), .int64(1), .double(1),
            .int64(big - 1), .double(Double(big)), .int64(big), .int64(big + 1), .double(Double(big + 2)), .int64(big + 3),
            .int64(.max - 1), .int64(.max), .double(0x1p63), .double(1e300), .double(.infinity),
            .date(Date(timeIntervalSinceReferenceDate: -5)), .date(Date(timeIntervalSinceReferenceDate: -0.0)), .date(Date(timeIntervalSinceReferenceDate: 5)),
            .string(""), .string("Z"), .string("a"), .string("a\u{0}"), .string("ab"), .string("é"), .string("\u{FFFF}"), .string("😀"),
            .reference(Record.Reference(recordID: Record.ID(recordName: ""), action: .none)),
            .reference(Record.Reference(recordID: Record.ID(recordName: "a"), action: .deleteSelf)),
        ]
        var random = SeededGenerator(seed: 11)
        for _ in 0..<200 {
            values.append(.int64(Int64.random(in: .min ... .max, using: &random)))
            values.append(.double(Double.random(in: -1e20...1e20, using: &random)))
            values.append(.int64(big + Int64.random(in: -8...8, using: &random)))
        }
        for a in values {
            for b in values {
                guard let keyA = QueryRules.orderedKey(of: a), let keyB = QueryRules.orderedKey(of: b) else {
                    Issue.record("\(a) or \(b) has no key")
                    continue
                }
                let byKeys: ComparisonResult = keyA == keyB ? .orderedSame : (keyA.lexicographicallyPrecedes(keyB) ? .orderedAscending : .orderedDescending)
                #expect(byKeys == QueryRules.sortOrder(a, b), "\(a) vs \(b)")
            }
        }
        #expect(QueryRules.orderedKey(of: .bytes(Data([1]))) == nil, "a value without an order has no key")
        #expect(QueryRules.orderedKey(of: .stringList(["a"])) == nil)
    }

    @Test("a cursor printed by an older version fails with a clear error; a damaged one too")
    func olderCursors() throws {
        let older = "stc1_eyJjb250YWluZXJJZGVudGlmaWVyIjoiYSJ9"
        let error = #expect(throws: StratusError.self) { try QueryOperation.Cursor(serialized: older) }
        #expect(error?.code == .invalidArguments)
        #expect(error?.message.contains("older version") == true)
        #expect(throws: StratusError.self) { try QueryOperation.Cursor(serialized: "stc2_AAAA") }
    }
}
