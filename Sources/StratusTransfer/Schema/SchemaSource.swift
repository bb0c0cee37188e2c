import Stratus

/// The bytes of a schema file, and errors that point into them.
struct SchemaSource {
    let bytes: [UInt8]
    /// Where the text starts: after a UTF-8 byte order mark, which is not part of it (nor of
    /// the first line's columns).
    let textStart: Int

    init(bytes: [UInt8]) {
        self.bytes = bytes
        textStart = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    }

    /// Whether a byte ends a line: LF, or CR (alone, or the first of CRLF). Files written on
    /// any system count their lines alike.
    static func isLineBreak(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }

    /// The 1-based line and column (counted in characters) of a byte offset. Lines end with
    /// LF, CR or CRLF (one line break).
    func position(of offset: Int) -> (line: Int, column: Int) {
        let offset = min(max(offset, 0), bytes.count)
        let start = lineStart(offset)
        var line = 1
        var index = 0
        while index < start {
            if bytes[index] == 0x0A || (bytes[index] == 0x0D && (index + 1 >= bytes.count || bytes[index + 1] != 0x0A)) { line += 1 }
            index += 1
        }
        return (line, String(decoding: bytes[start..<offset], as: UTF8.self).count + 1)
    }

    private func lineStart(_ offset: Int) -> Int {
        var start = offset
        // The LF of a CRLF belongs to the line break, not to the next line.
        if start > 0, start < bytes.count, bytes[start] == 0x0A, bytes[start - 1] == 0x0D { start -= 1 }
        while start > 0, !Self.isLineBreak(bytes[start - 1]) { start -= 1 }
        return start == 0 ? min(textStart, offset) : start
    }

    /// An `invalidArguments` error at a byte offset whose message reads `line:column: problem`,
    /// then the input line, then a caret under the column.
    func error(_ problem: String, at offset: Int) -> StratusError {
        let offset = min(max(offset, 0), bytes.count)
        let (line, column) = position(of: offset)
        let start = lineStart(offset)
        var end = offset
        while end < bytes.count, !Self.isLineBreak(bytes[end]) { end += 1 }
        let before = Array(String(decoding: bytes[start..<offset], as: UTF8.self))
        let after = Array(String(decoding: bytes[offset..<end], as: UTF8.self))
        // Long lines are cut to a window around the column so the message stays readable.
        let window = 60
        let shownBefore = before.count > window ? Array("…") + before.suffix(window) : before
        let shownAfter = after.count > window ? after.prefix(window) + Array("…") : after
        // Control characters would break the two-line layout; tabs are kept so the caret lines up.
        let excerpt = (shownBefore + shownAfter).map { character -> Character in
            character != "\t" && character.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) ? "·" : character
        }
        let caret = shownBefore.map { $0 == "\t" ? "\t" : " " }.joined()
        var error = StratusError(.invalidArguments, "\(line):\(column): \(problem)\n    \(String(excerpt))\n    \(caret)^")
        error.line = line
        error.column = column
        return error
    }

    /// The Unicode scalar whose UTF-8 encoding starts at `offset`, or `nil` where the bytes
    /// there are not UTF-8.
    func scalar(at offset: Int) -> Unicode.Scalar? {
        let lead = bytes[offset]
        let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
        guard length > 0, offset + length <= bytes.count else { return nil }
        return String(validating: bytes[offset..<(offset + length)], as: UTF8.self)?.unicodeScalars.first
    }

    /// The character at `offset` as a message shows it: `'x'`, `U+0000`, or `byte 0xFF` where
    /// the bytes are not UTF-8.
    func describeCharacter(at offset: Int) -> String {
        let lead = bytes[offset]
        if let scalar = scalar(at: offset) {
            let text = String(scalar)
            // Characters that show as nothing or as a plain space (a no-break space copied from a
            // web page, a byte order mark in the middle of a file) are named by their code point.
            let invisible: Set<Unicode.GeneralCategory> = [.control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator]
            if invisible.contains(scalar.properties.generalCategory) || scalar.value == 0x7F {
                return "character U+\(String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4))"
            }
            return "character '\(text)'"
        }
        return "byte 0x\(String(lead, radix: 16, uppercase: true).leftPadded(to: 2)), which is not UTF-8"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
