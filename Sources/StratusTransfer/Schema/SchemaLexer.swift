import Stratus

/// One token of the schema language, with where it starts and ends in the input's bytes.
struct SchemaToken {
    enum Kind: Equatable {
        /// A name or keyword: a letter or `_`, then letters, digits and `_`.
        case word
        /// A double-quoted name; ``SchemaToken/text`` is what the quotes enclose.
        case quoted
        /// `(`, `)`, `,`, `;`, `<` or `>`.
        case punctuation(UInt8)
        /// The end of the input.
        case end
    }

    let kind: Kind
    let start: Int
    let end: Int
    let text: String

    /// Whether this is the unquoted keyword `keyword` (given in upper case), in any case.
    func isKeyword(_ keyword: String) -> Bool {
        kind == .word && text.utf8.count == keyword.utf8.count
            && zip(text.utf8, keyword.utf8).allSatisfy { SchemaLexer.upper($0) == $1 }
    }

    func isPunctuation(_ character: Unicode.Scalar) -> Bool { kind == .punctuation(UInt8(ascii: character)) }

    /// The keyword in upper case, for an unquoted word.
    var upperText: String { String(decoding: text.utf8.map(SchemaLexer.upper), as: UTF8.self) }
}

/// Splits schema-language bytes into tokens, one at a time, so that the first problem in
/// reading order is the one reported. Skips white space and the three kinds of comment
/// (`// …`, `-- …` to the end of the line, `/* … */`, which do not nest).
struct SchemaLexer {
    let source: SchemaSource
    private var offset: Int

    init(source: SchemaSource) {
        self.source = source
        offset = source.textStart
    }

    static func upper(_ byte: UInt8) -> UInt8 { byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte }
    static func isLetter(_ byte: UInt8) -> Bool { (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) }
    static func isWordByte(_ byte: UInt8) -> Bool { isLetter(byte) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F }

    mutating func next() throws(StratusError) -> SchemaToken {
        let bytes = source.bytes
        try skipSpaceAndComments()
        guard offset < bytes.count else { return SchemaToken(kind: .end, start: bytes.count, end: bytes.count, text: "") }
        let start = offset
        let byte = bytes[offset]
        switch byte {
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "<"), UInt8(ascii: ">"):
            offset += 1
            return SchemaToken(kind: .punctuation(byte), start: start, end: offset, text: String(UnicodeScalar(byte)))
        case UInt8(ascii: "\""):
            offset += 1
            while offset < bytes.count, bytes[offset] != UInt8(ascii: "\""), bytes[offset] != 0x0A, bytes[offset] != 0x0D {
                offset += 1
            }
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else {
                throw source.error("this quoted name has no closing '\"' on its line", at: start)
            }
            let content = bytes[(start + 1)..<offset]
            guard let text = String(validating: content, as: UTF8.self) else {
                throw source.error("this quoted name is not valid UTF-8", at: start)
            }
            if text.isEmpty { throw source.error("a quoted name is empty", at: start) }
            offset += 1
            return SchemaToken(kind: .quoted, start: start, end: offset, text: text)
        case _ where Self.isLetter(byte) || byte == UInt8(ascii: "_"):
            while offset < bytes.count, Self.isWordByte(bytes[offset]) { offset += 1 }
            return SchemaToken(kind: .word, start: start, end: offset, text: String(decoding: bytes[start..<offset], as: UTF8.self))
        case 0xFF where start == 0 && bytes.starts(with: [0xFF, 0xFE]), 0xFE where start == 0 && bytes.starts(with: [0xFE, 0xFF]):
            throw source.error("this file is UTF-16 (it starts with a UTF-16 byte order mark); schema files are UTF-8: convert it, for example with iconv -f UTF-16 -t UTF-8", at: start)
        default:
            throw source.error("unexpected \(source.describeCharacter(at: start))\(hint(at: start))", at: start)
        }
    }

    /// A hint for characters that commonly stand where a name or keyword should.
    private func hint(at offset: Int) -> String {
        switch source.bytes[offset] {
        case UInt8(ascii: "'"), UInt8(ascii: "`"): return "; names are quoted with double quotes (\")"
        case 0x30...0x39: return "; names start with a letter"
        case UInt8(ascii: "."): return "; a name with '.' (CloudKit's \"cloudkit.share\") is written in double quotes"
        default: break
        }
        guard let scalar = source.scalar(at: offset) else { return "" }
        if (0x2018...0x201F).contains(scalar.value) { return "; names are quoted with straight double quotes (\")" }
        if [.spaceSeparator, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) {
            // A no-break space or a zero-width character, usually copied from a web page.
            return "; only ASCII white space (space, tab, line feed, carriage return, vertical tab, form feed) separates words"
        }
        return ""
    }

    private mutating func skipSpaceAndComments() throws(StratusError) {
        let bytes = source.bytes
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) {
                offset += 1
            } else if offset + 1 < bytes.count && ((byte == UInt8(ascii: "/") && bytes[offset + 1] == UInt8(ascii: "/")) || (byte == UInt8(ascii: "-") && bytes[offset + 1] == UInt8(ascii: "-"))) {
                // To the end of the line, which CR ends as LF does.
                while offset < bytes.count, !SchemaSource.isLineBreak(bytes[offset]) { offset += 1 }
            } else if offset + 1 < bytes.count && byte == UInt8(ascii: "/") && bytes[offset + 1] == UInt8(ascii: "*") {
                let start = offset
                offset += 2
                while offset + 1 < bytes.count, !(bytes[offset] == UInt8(ascii: "*") && bytes[offset + 1] == UInt8(ascii: "/")) { offset += 1 }
                guard offset + 1 < bytes.count else {
                    throw source.error("this comment has no closing '*/'", at: start)
                }
                offset += 2
            } else {
                return
            }
        }
    }
}
