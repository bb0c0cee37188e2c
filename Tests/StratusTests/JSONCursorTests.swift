import Foundation
import SeededRandom
import Stratus
import Testing

/// The one JSON lexer and the one escaper: what the escaper writes the cursor reads back, at
/// every length around the cursor's eight-byte steps, and the cursor's rules for strings,
/// numbers and windows that end before the value does.
@Suite("JSON cursor and escaper")
struct JSONCursorTests {
    /// Characters that take each path: plain ASCII, the escaped ones, non-ASCII of every length.
    static let alphabet: [Character] = ["a", "Z", "0", " ", "/", "\"", "\\", "\n", "\t", "\r", "\u{0}", "\u{1F}", "\u{7F}", "é", "日", "😀"]

    /// Scans the first value of `text` (followed by `,1]` so that nothing ends at the limit).
    static func scan(_ text: String, complete: Bool = true) -> (token: JSONCursor.Token?, failure: JSONCursor.Failure?, problem: String?, string: String?) {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { buffer in
            var cursor = JSONCursor(base: buffer.baseAddress!, limit: buffer.count, isComplete: complete, pos: 0)
            do throws(JSONCursor.Failure) {
                let token = try cursor.scanValue()
                return (token, nil, cursor.problem?.message, token.kind == .string ? cursor.string(token) : nil)
            } catch {
                return (nil, error, cursor.problem?.message, nil)
            }
        }
    }

    @Test("every string the escaper writes reads back through the cursor, at every length")
    func escaperRoundTrip() throws {
        var generator = SeededGenerator(seed: 11)
        for length in 0...40 {
            for _ in 0..<40 {
                let text = String((0..<length).map { _ in Self.alphabet[Int.random(in: 0..<Self.alphabet.count, using: &generator)] })
                var out = ByteOutput()
                out.appendString(text)
                let written = String(decoding: out.bytes, as: UTF8.self)
                var viaString = ""
                JSONText.appendString(text, to: &viaString)
                #expect(viaString == written)
                #expect(!written.utf8.contains { $0 < 0x20 }, "a raw control character in \(written.debugDescription)")
                let scanned = Self.scan(written + ",1]")
                #expect(scanned.problem == nil && scanned.failure == nil, "\(written)")
                #expect(scanned.string == text, "\(written)")
                #expect(scanned.token?.end == written.utf8.count)
                let escaped = text.unicodeScalars.contains { $0 == "\"" || $0 == "\\" || $0.value < 0x20 }
                #expect((scanned.token.map { $0.flags & JSONCursor.Token.hasEscape != 0 }) == escaped, "\(written)")
            }
        }
    }

    @Test("escapes read as JSON reads them; broken ones are noted and the string still ends")
    func escapes() {
        #expect(Self.scan(#""\u00e9\uD83D\uDE00\n\t\/\"\\\b\f""#).string == "é😀\n\t/\"\\\u{8}\u{C}")
        let broken: [(String, String)] = [
            (#""a\ud800b""#, "high surrogate without its low surrogate"),
            (#""a\udc00b""#, "low surrogate without a high surrogate"),
            (#""\u12""#, "four hex digits"),
            (#""\x""#, "is not a JSON escape"),
            ("\"a\u{1}b\"", "raw control character"),
        ]
        for (text, problem) in broken {
            let scanned = Self.scan(text + ",1]")
            #expect(scanned.token?.kind == .string, "\(text)")
            #expect(scanned.problem?.contains(problem) == true, "\(text): \(scanned.problem ?? "no problem")")
        }
        var bytes: [UInt8] = [0x22, 0x61, 0xFF, 0x22]
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = JSONCursor(base: UnsafePointer(buffer.baseAddress!), limit: buffer.count, isComplete: true, pos: 0)
            #expect((try? cursor.scanString())?.end == 4)
            #expect(cursor.problem?.message.contains("invalid UTF-8") == true)
        }
    }

    @Test("numbers: JSON's grammar decides the kind, and each fault is named")
    func numbers() {
        for (text, isInteger) in [("0", true), ("-0", true), ("12", true), ("1.5", false), ("1e5", false), ("1E+5", false), ("-0.0e-0", false)] {
            let scanned = Self.scan(text + "]")
            #expect(scanned.token?.kind == .number && scanned.problem == nil, "\(text)")
            #expect(scanned.token?.end == text.utf8.count, "\(text)")
            #expect((scanned.token.map { $0.flags & JSONCursor.Token.isInteger != 0 }) == isInteger, "\(text)")
        }
        let faults: [(String, String)] = [
            ("01", "leading zeros are not allowed"), ("1.", "digits must follow the decimal point"), ("-", "digits must follow the sign"),
            ("1e", "digits must follow the exponent"), ("1e+", "digits must follow the exponent"), ("1.5x", "unexpected 'x'"),
            ("--1", "digits must follow the sign"), ("1-2", "unexpected '-'"),
            (String(repeating: "9", count: 1_001), "longer than 1000 characters"),
        ]
        for (text, message) in faults {
            let scanned = Self.scan(text + "]")
            #expect(scanned.token?.kind == .number && scanned.token?.end == text.utf8.count, "\(text)")
            #expect(scanned.problem?.contains(message) == true, "\(text): \(scanned.problem ?? "no problem")")
        }
    }

    @Test("a window that ends inside a value asks for more; the whole input names its end")
    func windows() {
        for text in [#""abc"#, #""abcdefghijklmnop"#, "12", "1.5e", "tru", #""\u00"#, "\"\u{E6}\u{97}"] {
            let partial = Self.scan(text, complete: false)
            guard case .needMore? = partial.failure else {
                Issue.record("\(text) did not ask for more")
                continue
            }
            let whole = Self.scan(text, complete: true)
            if case .needMore? = whole.failure { Issue.record("\(text) asked for more at the end of the input") }
        }
        if case .syntax(_, let message)? = Self.scan(#""abc"#).failure {
            #expect(message == "the string is not closed before the end of input")
        } else {
            Issue.record("an unclosed string did not fail")
        }
    }
}
