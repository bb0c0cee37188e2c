import Foundation

/// Why a scan stopped: the bytes ran out before the value ended (read more and start the
/// item again), or the text is broken in a way that cannot be stepped over.
enum ScanFailure: Error {
    case needMore
    case syntax(offset: Int, message: String)
}

/// A problem inside a value that is still well delimited (a bad number, bad UTF-8, a duplicate
/// key); scanning goes on so the item's end is found, and the item is rejected afterwards.
struct Problem {
    var offset: Int
    var message: String
}

/// A scanned JSON value: where it is and what kind it is. Strings span their quotes.
struct Token {
    enum Kind: UInt8 { case none, string, number, trueLiteral, falseLiteral, null, badLiteral, array, object }

    var kind: Kind
    var start: Int
    var end: Int
    var flags: UInt8

    static let none = Token(kind: .none, start: 0, end: 0, flags: 0)
    /// Strings: the text has a backslash escape.
    static let hasEscape: UInt8 = 1
    /// Strings: the text has bytes above 0x7F.
    static let hasNonASCII: UInt8 = 2
    /// Numbers: no fraction and no exponent.
    static let isInteger: UInt8 = 1

    var isPresent: Bool { kind != .none }

    var kindName: String {
        switch kind {
        case .none: "nothing"
        case .string: "a string"
        case .number: "a number"
        case .trueLiteral, .falseLiteral: "a boolean"
        case .null: "null"
        case .badLiteral: "an invalid literal"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// Scans JSON over a byte window without copying: the record reader's lexer.
///
/// Offsets are indices into `base`. Every value is checked as strictly as RFC 8259 asks
/// (UTF-8, escapes, surrogates, number grammar, nesting), but problems that leave the value's
/// end findable are only noted in ``problem`` so the caller can reject one record and go on.
struct JSONCursor {
    let base: UnsafePointer<UInt8>
    /// One past the last byte that may be read.
    let limit: Int
    /// Whether `limit` is the real end (of the input, a line or a cell); otherwise running into
    /// it means more bytes must be read.
    let isComplete: Bool
    /// How the end is named in messages: "end of input", "end of the line".
    let endName: StaticString
    var pos: Int
    var depth: Int
    var problem: Problem?

    static let maximumDepth = 64
    static let maximumNumberLength = 1_000

    init(base: UnsafePointer<UInt8>, limit: Int, isComplete: Bool, endName: StaticString = "end of input", pos: Int, depth: Int = 0) {
        self.base = base
        self.limit = limit
        self.isComplete = isComplete
        self.endName = endName
        self.pos = pos
        self.depth = depth
        self.problem = nil
    }

    // MARK: - Basics

    /// Keeps the first problem. Only called on the error path, so the message is built eagerly.
    mutating func note(_ offset: Int, _ message: String) {
        if problem == nil { problem = Problem(offset: offset, message: message) }
    }

    func endReached(_ what: String? = nil) -> ScanFailure {
        guard isComplete else { return .needMore }
        return .syntax(offset: limit, message: what ?? "unexpected \(endName)")
    }

    func syntax(_ offset: Int, _ message: String) -> ScanFailure {
        .syntax(offset: offset, message: message)
    }

    @inline(__always)
    mutating func skipSpace() {
        while pos < limit {
            let b = base[pos]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            pos &+= 1
        }
    }

    /// The next byte after whitespace, not consumed.
    @inline(__always)
    mutating func peek() throws(ScanFailure) -> UInt8 {
        skipSpace()
        if pos >= limit { throw endReached() }
        return base[pos]
    }

    /// Consumes `byte` after whitespace, or fails naming what was expected.
    @inline(__always)
    mutating func expect(_ byte: UInt8, _ what: @autoclosure () -> String) throws(ScanFailure) {
        let b = try peek()
        guard b == byte else { throw syntax(pos, "expected \(what()), found \(Self.describe(b))") }
        pos &+= 1
    }

    static func describe(_ b: UInt8) -> String {
        if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        switch b {
        case 0x20: return "a space"
        case 0x0A: return "a line break"
        default:
            let hex = String(b, radix: 16, uppercase: true)
            return "byte 0x" + (hex.count < 2 ? "0" : "") + hex
        }
    }

    // MARK: - Values

    /// Scans any value; arrays and objects are skipped (and checked) as a whole.
    mutating func scanValue() throws(ScanFailure) -> Token {
        let b = try peek()
        switch b {
        case UInt8(ascii: "\""): return try scanString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try scanNumber()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let start = pos
            try skipContainer()
            return Token(kind: b == UInt8(ascii: "{") ? .object : .array, start: start, end: pos, flags: 0)
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return try scanLiteral()
        default:
            throw syntax(pos, "expected a value, found \(Self.describe(b))")
        }
    }

    /// Scans the key of an object member and its colon.
    @inline(__always)
    mutating func scanKey() throws(ScanFailure) -> Token {
        let b = try peek()
        guard b == UInt8(ascii: "\"") else { throw syntax(pos, "expected a key in quotes, found \(Self.describe(b))") }
        let key = try scanString()
        try expect(UInt8(ascii: ":"), "':' after a key")
        return key
    }

    /// After a member or element: consumes ',' and answers true, or consumes `close` and answers false.
    @inline(__always)
    mutating func nextMember(close: UInt8, in what: StaticString) throws(ScanFailure) -> Bool {
        let b = try peek()
        pos &+= 1
        if b == UInt8(ascii: ",") { return true }
        if b == close { return false }
        pos &-= 1
        throw syntax(pos, "expected ',' or '\(Character(Unicode.Scalar(close)))' in \(what), found \(Self.describe(b))")
    }

    /// Consumes `{` and answers whether the object has members (false after consuming `}`).
    mutating func openObject() throws(ScanFailure) -> Bool {
        pos &+= 1
        try enter()
        if try peek() == UInt8(ascii: "}") {
            pos &+= 1
            depth -= 1
            return false
        }
        return true
    }

    @inline(__always)
    mutating func enter() throws(ScanFailure) {
        depth += 1
        if depth > Self.maximumDepth { throw syntax(pos - 1, "nesting is deeper than \(Self.maximumDepth) levels") }
    }

    // MARK: - Strings

    /// Scans a string starting at its opening quote, checking escapes and UTF-8.
    mutating func scanString() throws(ScanFailure) -> Token {
        let start = pos
        var i = pos &+ 1
        var flags: UInt8 = 0
        while true {
            // Eight bytes at a time until one of them is a quote, backslash, control or non-ASCII byte.
            while i &+ 8 <= limit {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let mask = Self.attentionMask(word)
                if mask != 0 {
                    // The lowest flagged byte is exact (borrows only disturb the bytes above it).
                    i &+= mask.trailingZeroBitCount &>> 3
                    break
                }
                i &+= 8
            }
            guard i < limit else {
                if isComplete { throw syntax(start, "the string is not closed before the \(endName)") }
                throw .needMore
            }
            let b = base[i]
            if b == UInt8(ascii: "\"") {
                pos = i &+ 1
                return Token(kind: .string, start: start, end: pos, flags: flags)
            } else if b == UInt8(ascii: "\\") {
                flags |= Token.hasEscape
                i = try scanEscape(at: i, stringStart: start)
            } else if b >= 0x80 {
                flags |= Token.hasNonASCII
                i = try scanUTF8(at: i, stringStart: start)
            } else if b < 0x20 {
                note(i, "a string holds a raw control character (\(Self.describe(b))); JSON needs it escaped")
                i &+= 1
            } else {
                i &+= 1
            }
        }
    }

    /// The high bit of each byte of `w` (little-endian) that is a quote, a backslash, a control
    /// character or above 0x7F; the lowest set bit marks the first such byte exactly.
    @inline(__always)
    static func attentionMask(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let quote = w ^ (ones &* 0x22)
        let slash = w ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote
        let hasSlash = (slash &- ones) & ~slash
        let hasControl = (w &- ones &* 0x20) & ~w
        return ((hasQuote | hasSlash | hasControl) & high) | (w & high)
    }

    /// Checks one escape at `i` (a backslash); answers the index after it.
    private mutating func scanEscape(at i: Int, stringStart: Int) throws(ScanFailure) -> Int {
        guard i &+ 1 < limit else { throw unclosed(stringStart) }
        let e = base[i &+ 1]
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return i &+ 2
        case UInt8(ascii: "u"):
            guard let unit = try hex4(at: i &+ 2, stringStart: stringStart) else {
                note(i, "a \\u escape needs four hex digits")
                return i &+ 2
            }
            if unit >= 0xD800 && unit <= 0xDBFF {
                if i &+ 12 > limit && !isComplete { throw .needMore }
                if i &+ 7 < limit && base[i &+ 6] == UInt8(ascii: "\\") && base[i &+ 7] == UInt8(ascii: "u"),
                   let low = try hex4(at: i &+ 8, stringStart: stringStart), low >= 0xDC00 && low <= 0xDFFF {
                    return i &+ 12
                }
                note(i, "a \\u escape holds a high surrogate without its low surrogate")
                return i &+ 6
            }
            if unit >= 0xDC00 && unit <= 0xDFFF {
                note(i, "a \\u escape holds a low surrogate without a high surrogate before it")
            }
            return i &+ 6
        default:
            note(i, "'\\\(e < 0x80 ? String(Character(Unicode.Scalar(e))) : "?")' is not a JSON escape")
            return e < 0x80 ? i &+ 2 : i &+ 1
        }
    }

    private func unclosed(_ stringStart: Int) -> ScanFailure {
        isComplete ? .syntax(offset: stringStart, message: "the string is not closed before the \(endName)") : .needMore
    }

    private func hex4(at i: Int, stringStart: Int) throws(ScanFailure) -> UInt32? {
        guard i &+ 4 <= limit else {
            if !isComplete { throw .needMore }
            return nil
        }
        var value: UInt32 = 0
        for k in 0..<4 {
            let c = base[i &+ k]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c &- UInt8(ascii: "A") &+ 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Checks one UTF-8 sequence at `i` (a byte above 0x7F); answers the index after it.
    private mutating func scanUTF8(at i: Int, stringStart: Int) throws(ScanFailure) -> Int {
        let b0 = base[i]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default:
            note(i, "a string holds invalid UTF-8 (\(Self.describe(b0)))")
            return i &+ 1
        }
        guard i &+ length <= limit else {
            if !isComplete { throw .needMore }
            note(i, "a string holds a truncated UTF-8 sequence")
            return i &+ 1
        }
        let b1 = base[i &+ 1]
        guard b1 >= low && b1 <= high else {
            note(i, "a string holds invalid UTF-8 (\(Self.describe(b0)) followed by \(Self.describe(b1)))")
            return i &+ 1
        }
        for k in 2..<length where base[i &+ k] & 0xC0 != 0x80 {
            note(i, "a string holds a truncated UTF-8 sequence")
            return i &+ 1
        }
        return i &+ length
    }

    // MARK: - Numbers and literals

    /// Scans a number: the longest run of number-like bytes, then checks it against JSON's grammar.
    mutating func scanNumber() throws(ScanFailure) -> Token {
        let start = pos
        var i = pos
        var isInteger = true
        while i < limit {
            let b = base[i]
            if (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "-") {
                i &+= 1
            } else if b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") || b == UInt8(ascii: "+") {
                isInteger = false
                i &+= 1
            } else if Self.isWordByte(b) {
                isInteger = false
                i &+= 1
            } else {
                break
            }
        }
        if i == limit && !isComplete { throw .needMore }
        pos = i
        if i - start > Self.maximumNumberLength {
            note(start, "a number is longer than \(Self.maximumNumberLength) characters")
        } else if let message = Self.checkNumberGrammar(base, start, i) {
            note(start, message)
        }
        return Token(kind: .number, start: start, end: i, flags: isInteger ? Token.isInteger : 0)
    }

    @inline(__always)
    static func isWordByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "_")
    }

    /// Checks JSON's number grammar; answers what is wrong, or nil.
    static func checkNumberGrammar(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> String? {
        var i = start
        func digit(_ j: Int) -> Bool { j < end && base[j] >= UInt8(ascii: "0") && base[j] <= UInt8(ascii: "9") }
        func bad(_ why: String) -> String {
            let text = String(decoding: UnsafeBufferPointer(start: base + start, count: min(end - start, 40)), as: UTF8.self)
            return "'\(text)\(end - start > 40 ? "…" : "")' is not a valid number: \(why)"
        }
        if i < end && base[i] == UInt8(ascii: "-") { i += 1 }
        guard digit(i) else { return bad("digits must follow the sign") }
        if base[i] == UInt8(ascii: "0") {
            i += 1
            if digit(i) { return bad("leading zeros are not allowed") }
        } else {
            while digit(i) { i += 1 }
        }
        if i < end && base[i] == UInt8(ascii: ".") {
            i += 1
            guard digit(i) else { return bad("digits must follow the decimal point") }
            while digit(i) { i += 1 }
        }
        if i < end && (base[i] == UInt8(ascii: "e") || base[i] == UInt8(ascii: "E")) {
            i += 1
            if i < end && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) { i += 1 }
            guard digit(i) else { return bad("digits must follow the exponent") }
            while digit(i) { i += 1 }
        }
        return i == end ? nil : bad("unexpected \(describe(base[i]))")
    }

    /// Scans `true`, `false`, `null`, or notes any other word (`NaN`, `Infinity`, `tru`).
    mutating func scanLiteral() throws(ScanFailure) -> Token {
        let start = pos
        var i = pos
        while i < limit && Self.isWordByte(base[i]) { i &+= 1 }
        if i == limit && !isComplete { throw .needMore }
        pos = i
        let length = i - start
        let kind: Token.Kind
        if length == 4 && matches(start, "true") {
            kind = .trueLiteral
        } else if length == 5 && matches(start, "false") {
            kind = .falseLiteral
        } else if length == 4 && matches(start, "null") {
            kind = .null
        } else {
            let word = String(decoding: UnsafeBufferPointer(start: base + start, count: min(length, 40)), as: UTF8.self)
            note(start, "'\(word)' is not a JSON value")
            kind = .badLiteral
        }
        return Token(kind: kind, start: start, end: i, flags: 0)
    }

    @inline(__always)
    func matches(_ offset: Int, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard offset + count <= limit else { return false }
        // Keys are short: a loop the optimizer unrolls beats a call to memcmp.
        let expected = text.utf8Start
        var i = 0
        while i < count {
            if base[offset + i] != expected[i] { return false }
            i += 1
        }
        return true
    }

    // MARK: - Containers

    /// Skips an object or array starting at `pos`, checking everything inside. Iterative, so
    /// hostile nesting costs no stack; nesting beyond ``maximumDepth`` is an error.
    mutating func skipContainer() throws(ScanFailure) {
        let baseDepth = depth
        var kinds: UInt64 = 0  // bit n set: level n is an object
        var level = 0
        while true {
            // A value is expected at `pos`.
            let b = try peek()
            if b == UInt8(ascii: "{") || b == UInt8(ascii: "[") {
                let isObject = b == UInt8(ascii: "{")
                pos &+= 1
                level += 1
                if baseDepth + level > Self.maximumDepth {
                    throw syntax(pos - 1, "nesting is deeper than \(Self.maximumDepth) levels")
                }
                if isObject { kinds |= 1 << UInt64(level - 1) } else { kinds &= ~(1 << UInt64(level - 1)) }
                let c = try peek()
                if c == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    pos &+= 1
                    level -= 1
                } else {
                    if isObject { _ = try scanKey() }
                    continue
                }
            } else {
                _ = try scanScalar(b)
            }
            // After a value: close containers or move to the next member.
            while true {
                if level == 0 { return }
                let isObject = kinds & (1 << UInt64(level - 1)) != 0
                let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                let c = try peek()
                if c == UInt8(ascii: ",") {
                    pos &+= 1
                    if isObject { _ = try scanKey() }
                    break
                } else if c == close {
                    pos &+= 1
                    level -= 1
                } else {
                    throw syntax(pos, "expected ',' or '\(Character(Unicode.Scalar(close)))' in \(isObject ? "an object" : "an array"), found \(Self.describe(c))")
                }
            }
        }
    }

    @inline(__always)
    private mutating func scanScalar(_ b: UInt8) throws(ScanFailure) -> Token {
        switch b {
        case UInt8(ascii: "\""): return try scanString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try scanNumber()
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): return try scanLiteral()
        default: throw syntax(pos, "expected a value, found \(Self.describe(b))")
        }
    }

    /// Whether the object token holds no member (only whitespace between its braces).
    func isEmptyContainer(_ token: Token) -> Bool {
        var i = token.start + 1
        while i < token.end - 1 {
            let b = base[i]
            if !(b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09) { return false }
            i += 1
        }
        return true
    }
}
