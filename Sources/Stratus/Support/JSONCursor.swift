/// Scans JSON over a byte window without copying: the one JSON lexer, shared by the stored
/// field document (``FieldDocument``) and the transfer codecs' record readers.
///
/// Offsets are indices into `base`. Every value is checked as strictly as RFC 8259 asks
/// (UTF-8, escapes, surrogates, number grammar, nesting), but problems that leave the value's
/// end findable are only noted in ``problem`` so the caller can reject one record and go on.
/// A window that is not the whole input (`isComplete` false) answers ``Failure/needMore``
/// when a value runs into its end, so a streaming reader can read more and scan again.
///
/// ```swift
/// var cursor = JSONCursor(base: bytes.baseAddress!, limit: bytes.count, isComplete: true, pos: 0)
/// let token = try cursor.scanValue()        // a Token: kind, start, end
/// if cursor.problem == nil, token.kind == .string { print(cursor.string(token)) }
/// ```
///
/// The scanning is inlinable, because the record readers call it across the module boundary
/// for every byte of their input; the type and what inlined code touches are
/// `@usableFromInline`, without which Swift compiles a package type's inlinable members as
/// calls in other modules (``ByteOutput`` is marked so for the same reason).
@usableFromInline package struct JSONCursor {
    /// Why a scan stopped: the bytes ran out before the value ended (read more and start the
    /// item again), or the text is broken in a way that cannot be stepped over.
    @usableFromInline package enum Failure: Error {
        case needMore
        case syntax(offset: Int, message: String)
    }

    /// A problem inside a value that is still well delimited (a bad number, bad UTF-8, a
    /// duplicate key); scanning goes on so the item's end is found, and the item is rejected
    /// afterwards.
    @usableFromInline package struct Problem {
        @usableFromInline package var offset: Int
        @usableFromInline package var message: String

        @usableFromInline package init(offset: Int, message: String) {
            self.offset = offset
            self.message = message
        }
    }

    /// A scanned JSON value: where it is and what kind it is. Strings span their quotes.
    @usableFromInline package struct Token {
        @usableFromInline package enum Kind: UInt8 { case none, string, number, trueLiteral, falseLiteral, null, badLiteral, array, object }

        @usableFromInline package var kind: Kind
        @usableFromInline package var start: Int
        @usableFromInline package var end: Int
        @usableFromInline package var flags: UInt8

        @inlinable
        package init(kind: Kind, start: Int, end: Int, flags: UInt8) {
            self.kind = kind
            self.start = start
            self.end = end
            self.flags = flags
        }

        // Computed, so that code inlined into other modules sees the values.
        @inlinable package static var none: Token { Token(kind: .none, start: 0, end: 0, flags: 0) }
        /// Strings: the text has a backslash escape.
        @inlinable package static var hasEscape: UInt8 { 1 }
        /// Strings: the text has bytes above 0x7F.
        @inlinable package static var hasNonASCII: UInt8 { 2 }
        /// Numbers: no fraction and no exponent.
        @inlinable package static var isInteger: UInt8 { 1 }

        @inlinable package var isPresent: Bool { kind != .none }

        @usableFromInline package var kindName: String {
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

    @usableFromInline package let base: UnsafePointer<UInt8>
    /// One past the last byte that may be read.
    @usableFromInline package let limit: Int
    /// Whether `limit` is the real end (of the input, a line or a cell); otherwise running into
    /// it means more bytes must be read.
    @usableFromInline package let isComplete: Bool
    /// How the end is named in messages: "end of input", "end of the line".
    @usableFromInline package let endName: StaticString
    @usableFromInline package var pos: Int
    @usableFromInline package var depth: Int
    @usableFromInline package var problem: Problem?

    @inlinable package static var maximumDepth: Int { 64 }
    @inlinable package static var maximumNumberLength: Int { 1_000 }

    @inlinable
    package init(base: UnsafePointer<UInt8>, limit: Int, isComplete: Bool, endName: StaticString = "end of input", pos: Int, depth: Int = 0) {
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
    @usableFromInline package mutating func note(_ offset: Int, _ message: String) {
        if problem == nil { problem = Problem(offset: offset, message: message) }
    }

    @usableFromInline package func endReached(_ what: String? = nil) -> Failure {
        guard isComplete else { return .needMore }
        return .syntax(offset: limit, message: what ?? "unexpected \(endName)")
    }

    @usableFromInline package func syntax(_ offset: Int, _ message: String) -> Failure {
        .syntax(offset: offset, message: message)
    }

    @inlinable @inline(__always)
    package mutating func skipSpace() {
        while pos < limit {
            let b = base[pos]
            // Every byte that can start or continue a value lies above the space: one comparison.
            if b > 0x20 { return }
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            pos &+= 1
        }
    }

    /// The next byte after whitespace, not consumed.
    @inlinable @inline(__always)
    package mutating func peek() throws(Failure) -> UInt8 {
        skipSpace()
        if pos >= limit { throw endReached() }
        return base[pos]
    }

    /// Consumes `byte` after whitespace and answers true, or answers false and consumes nothing
    /// (but the whitespace).
    @inlinable @inline(__always)
    package mutating func consume(_ byte: UInt8) -> Bool {
        skipSpace()
        guard pos < limit && base[pos] == byte else { return false }
        pos &+= 1
        return true
    }

    /// Consumes `byte` after whitespace, or fails naming what was expected.
    @inlinable @inline(__always)
    package mutating func expect(_ byte: UInt8, _ what: @autoclosure () -> String) throws(Failure) {
        let b = try peek()
        guard b == byte else { throw syntax(pos, "expected \(what()), found \(Self.describe(b))") }
        pos &+= 1
    }

    @usableFromInline package static func describe(_ b: UInt8) -> String {
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
    @inlinable
    package mutating func scanValue() throws(Failure) -> Token {
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
    @inlinable @inline(__always)
    package mutating func scanKey() throws(Failure) -> Token {
        let b = try peek()
        guard b == UInt8(ascii: "\"") else { throw syntax(pos, "expected a key in quotes, found \(Self.describe(b))") }
        let key = try scanString()
        try expect(UInt8(ascii: ":"), "':' after a key")
        return key
    }

    /// After a member or element: consumes ',' and answers true, or consumes `close` and answers false.
    @inlinable @inline(__always)
    package mutating func nextMember(close: UInt8, in what: StaticString) throws(Failure) -> Bool {
        let b = try peek()
        pos &+= 1
        if b == UInt8(ascii: ",") { return true }
        if b == close { return false }
        pos &-= 1
        throw syntax(pos, "expected ',' or '\(Character(Unicode.Scalar(close)))' in \(what), found \(Self.describe(b))")
    }

    /// Consumes `{` and answers whether the object has members (false after consuming `}`).
    @inlinable
    package mutating func openObject() throws(Failure) -> Bool {
        pos &+= 1
        try enter()
        if try peek() == UInt8(ascii: "}") {
            pos &+= 1
            depth -= 1
            return false
        }
        return true
    }

    @inlinable @inline(__always)
    package mutating func enter() throws(Failure) {
        depth += 1
        if depth > Self.maximumDepth { throw syntax(pos - 1, "nesting is deeper than \(Self.maximumDepth) levels") }
    }

    // MARK: - Strings

    /// Scans a string starting at its opening quote, checking escapes and UTF-8.
    @inlinable @inline(__always)
    package mutating func scanString() throws(Failure) -> Token {
        let start = pos
        // Most strings (keys, tags, type names, names) are plain and end within sixteen bytes:
        // two words decide them here, and anything else is scanned out of line.
        var i = start &+ 1
        for _ in 0..<2 where i &+ 8 <= limit {
            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            let mask = JSONText.escapeMask(word) | (word & 0x8080_8080_8080_8080)
            if mask != 0 {
                let end = i &+ (mask.trailingZeroBitCount &>> 3)
                guard base[end] == UInt8(ascii: "\"") else { break }
                pos = end &+ 1
                return Token(kind: .string, start: start, end: pos, flags: 0)
            }
            i &+= 8
        }
        return try scanLongString(from: start)
    }

    /// ``scanString()`` for strings longer than sixteen bytes or holding escapes, non-ASCII or
    /// control bytes.
    @usableFromInline
    mutating func scanLongString(from start: Int) throws(Failure) -> Token {
        var i = start &+ 1
        var flags: UInt8 = 0
        while true {
            // Eight bytes at a time until one of them is a quote, backslash, control or non-ASCII byte.
            while i &+ 8 <= limit {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let mask = JSONText.escapeMask(word) | (word & 0x8080_8080_8080_8080)
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

    /// Checks one escape at `i` (a backslash); answers the index after it.
    @usableFromInline
    mutating func scanEscape(at i: Int, stringStart: Int) throws(Failure) -> Int {
        guard i &+ 1 < limit else { throw unclosed(stringStart) }
        let e = base[i &+ 1]
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return i &+ 2
        case UInt8(ascii: "u"):
            guard let unit = try hex4(at: i &+ 2) else {
                note(i, "a \\u escape needs four hex digits")
                return i &+ 2
            }
            if unit >= 0xD800 && unit <= 0xDBFF {
                if i &+ 12 > limit && !isComplete { throw .needMore }
                if i &+ 7 < limit && base[i &+ 6] == UInt8(ascii: "\\") && base[i &+ 7] == UInt8(ascii: "u"),
                   let low = try hex4(at: i &+ 8), low >= 0xDC00 && low <= 0xDFFF {
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

    private func unclosed(_ stringStart: Int) -> Failure {
        isComplete ? .syntax(offset: stringStart, message: "the string is not closed before the \(endName)") : .needMore
    }

    /// The four hex digits at `i`, nil when they are not hex digits or the input ends first.
    private func hex4(at i: Int) throws(Failure) -> UInt32? {
        guard i &+ 4 <= limit else {
            if !isComplete { throw .needMore }
            return nil
        }
        return JSONText.hexValue(base + i)
    }

    /// Checks one UTF-8 sequence at `i` (a byte above 0x7F); answers the index after it.
    @usableFromInline
    mutating func scanUTF8(at i: Int, stringStart: Int) throws(Failure) -> Int {
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

    /// Scans a number: JSON's grammar in one pass (``DecimalText/read(_:from:limit:)``) for the
    /// well-formed number a delimiter ends; anything else is taken as the longest run of
    /// number-like bytes and noted as malformed.
    @inlinable
    package mutating func scanNumber() throws(Failure) -> Token {
        let start = pos
        let reading = DecimalText.read(base, from: start, limit: limit)
        let i = reading.end
        guard reading.isWellFormed && (i < limit ? !Self.isNumberByte(base[i]) : isComplete) else { return try scanNumberRun(from: start) }
        pos = i
        if i &- start > Self.maximumNumberLength {
            note(start, "a number is longer than \(Self.maximumNumberLength) characters")
        }
        return Token(kind: .number, start: start, end: i, flags: reading.isInteger ? Token.isInteger : 0)
    }

    /// A number that JSON's grammar does not end at a delimiter (or that meets the window's
    /// end): the longest run of number-like bytes, checked and noted.
    @usableFromInline
    mutating func scanNumberRun(from start: Int) throws(Failure) -> Token {
        var i = start
        var isInteger = true
        while i < limit {
            let b = base[i]
            if Self.isDigit(b) || b == UInt8(ascii: "-") {
                i &+= 1
            } else if Self.isNumberByte(b) {
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

    @inlinable @inline(__always)
    package static func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }

    /// Whether `b` continues a number's run of bytes: a word byte, a sign or a point.
    @inlinable @inline(__always)
    static func isNumberByte(_ b: UInt8) -> Bool {
        isWordByte(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+") || b == UInt8(ascii: ".")
    }

    @inlinable @inline(__always)
    package static func isWordByte(_ b: UInt8) -> Bool {
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
        guard digit(i) else {
            let rest = String(decoding: UnsafeBufferPointer(start: base + i, count: min(end - i, 40)), as: UTF8.self)
            return bad(spellsNonFiniteNumber(rest) ? nonFiniteNumberReason : "digits must follow the sign")
        }
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
    @inlinable
    package mutating func scanLiteral() throws(Failure) -> Token {
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
            noteBadLiteral(start, length)
            kind = .badLiteral
        }
        return Token(kind: kind, start: start, end: i, flags: 0)
    }

    @usableFromInline
    mutating func noteBadLiteral(_ start: Int, _ length: Int) {
        let word = String(decoding: UnsafeBufferPointer(start: base + start, count: min(length, 40)), as: UTF8.self)
        note(start, "'\(word)' is not a JSON value" + (Self.spellsNonFiniteNumber(word) ? ": \(Self.nonFiniteNumberReason)" : ""))
    }

    /// Why `NaN`, `Infinity` and `-Infinity` (as Python's `json` writes them, bare or, from
    /// other writers, as strings) are refused, for the messages that meet them.
    package static let nonFiniteNumberReason = "NaN and infinities are no JSON numbers, and a store keeps finite numbers only"

    /// Whether `text` spells NaN or an infinity (`NaN`, `Infinity`, `-Infinity`, `inf`, any case).
    package static func spellsNonFiniteNumber(_ text: some StringProtocol) -> Bool {
        var word = Substring(text)
        if word.first == "-" || word.first == "+" { word = word.dropFirst() }
        return ["nan", "infinity", "inf"].contains(word.lowercased())
    }

    @inlinable @inline(__always)
    package func matches(_ offset: Int, _ text: StaticString) -> Bool {
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
    @usableFromInline package mutating func skipContainer() throws(Failure) {
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
    private mutating func scanScalar(_ b: UInt8) throws(Failure) -> Token {
        switch b {
        case UInt8(ascii: "\""): return try scanString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try scanNumber()
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): return try scanLiteral()
        default: throw syntax(pos, "expected a value, found \(Self.describe(b))")
        }
    }

    /// Whether the object token holds no member (only whitespace between its braces).
    @usableFromInline package func isEmptyContainer(_ token: Token) -> Bool {
        var i = token.start + 1
        while i < token.end - 1 {
            let b = base[i]
            if !(b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09) { return false }
            i += 1
        }
        return true
    }
}
