import Foundation
import SeededRandom
import Stratus
import StratusTransfer
import Testing

/// Malformed schema files: each is refused with the line and column of its first problem, a
/// message saying what was expected or which rule it breaks, and the line with a caret.
@Suite("Schema language: malformed input")
struct SchemaLanguageErrorTests {
    struct Case: CustomStringConvertible, Sendable {
        let label: String
        let input: String
        let line: Int
        let column: Int
        let message: String
        var description: String { label }
    }

    static let header = "DEFINE SCHEMA\nRECORD TYPE Note (\n"

    /// `body` as the third line of a record type `Note`, followed by the rest of the statement.
    static func field(_ label: String, _ body: String, column: Int, _ message: String) -> Case {
        Case(label: label, input: header + "    " + body + "\n);\n", line: 3, column: column, message: message)
    }

    static let cases: [Case] = [
        Case(label: "empty file", input: "", line: 1, column: 1, message: "expected DEFINE SCHEMA at the start of the file, found the end of the file"),
        Case(label: "only comments", input: "-- nothing\n/* at all */\n", line: 3, column: 1, message: "expected DEFINE SCHEMA at the start of the file, found the end of the file"),
        Case(label: "no DEFINE SCHEMA", input: "RECORD TYPE Note (title STRING);", line: 1, column: 1, message: "expected DEFINE SCHEMA at the start of the file, found 'RECORD'"),
        Case(label: "DEFINE without SCHEMA", input: "DEFINE\nRECORD TYPE Note (title STRING);", line: 2, column: 1, message: "expected SCHEMA after DEFINE, found 'RECORD'"),
        Case(label: "unterminated comment", input: "DEFINE SCHEMA\n  /* never closed\nRECORD TYPE Note (title STRING);\n", line: 2, column: 3, message: "this comment has no closing '*/'"),
        Case(label: "unterminated quoted name", input: "DEFINE SCHEMA\nRECORD TYPE Note (\"title STRING);\n", line: 2, column: 19, message: "this quoted name has no closing '\"' on its line"),
        Case(label: "empty quoted name", input: "DEFINE SCHEMA\nRECORD TYPE \"\" (title STRING);\n", line: 2, column: 13, message: "a quoted name is empty"),
        field("an unknown option", "title STRING INDEXED", column: 18, "expected QUERYABLE, SORTABLE, SEARCHABLE, ',' or ')' after field title, found 'INDEXED'"),
        Case(label: "missing comma after a grant", input: header + "    GRANT READ TO \"_world\"\n    title STRING\n);\n", line: 4, column: 5, message: "expected ',' or ')' after the GRANT to \"_world\", found 'title'"),
        field("unknown type", "title TEXT", column: 11, "unknown type 'TEXT'; expected STRING, INT64"),
        field("RECORD ID as a type", "\"___recordID\" RECORD ID", column: 19, "unknown type 'RECORD'"),
        field("no type", "title,", column: 10, "expected a type after the field name, found ','"),
        Case(label: "missing opening parenthesis", input: "DEFINE SCHEMA\nRECORD TYPE Note\n    title STRING\n);\n", line: 3, column: 5, message: "expected '(' after the record type name, found 'title'"),
        Case(label: "missing closing parenthesis", input: header + "    title STRING\n;\n", line: 4, column: 1, message: "expected QUERYABLE, SORTABLE, SEARCHABLE, ',' or ')' after field title, found ';'"),
        Case(label: "missing comma", input: header + "    title STRING\n    body STRING\n);\n", line: 4, column: 5, message: "expected QUERYABLE, SORTABLE, SEARCHABLE, ',' or ')' after field title, found 'body'"),
        Case(label: "trailing comma", input: header + "    title STRING,\n);\n", line: 4, column: 1, message: "expected a field name or GRANT, found ')'"),
        Case(label: "missing semicolon", input: header + "    title STRING\n)\nRECORD TYPE Other (x STRING);", line: 5, column: 1, message: "expected ';' after the RECORD TYPE statement, found 'RECORD'"),
        Case(label: "missing semicolon at the end", input: header + "    title STRING\n)", line: 4, column: 2, message: "expected ';' after the RECORD TYPE statement, found the end of the file"),
        Case(label: "statement that is neither", input: "DEFINE SCHEMA\nDROP TYPE Note;", line: 2, column: 1, message: "expected CREATE ROLE, RECORD TYPE or the end of the file, found 'DROP'"),
        field("SEARCHABLE on a number", "count INT64 QUERYABLE SEARCHABLE", column: 27, "field count is INT64; only STRING and LIST<STRING> fields can be SEARCHABLE"),
        field("SEARCHABLE on a reference list", "refs LIST<REFERENCE> SEARCHABLE", column: 26, "field refs is LIST<REFERENCE>; only STRING"),
        field("SORTABLE on a list", "tags LIST<STRING> QUERYABLE SORTABLE", column: 33, "field tags is LIST<STRING>; a list cannot be SORTABLE"),
        field("an index on an encrypted field", "secret ENCRYPTED STRING QUERYABLE", column: 29, "field secret is ENCRYPTED, and CloudKit has no index on encrypted fields"),
        field("ENCRYPTED REFERENCE", "owner ENCRYPTED REFERENCE", column: 21, "REFERENCE cannot be ENCRYPTED"),
        field("ENCRYPTED ASSET", "photo ENCRYPTED ASSET", column: 21, "ASSET cannot be ENCRYPTED: CloudKit encrypts assets already"),
        field("ENCRYPTED outside a list", "tags ENCRYPTED LIST<STRING>", column: 20, "ENCRYPTED goes inside the list: write LIST<ENCRYPTED …>"),
        field("ENCRYPTED NUMBER", "n ENCRYPTED NUMBER PREFERRED AS INT64", column: 17, "NUMBER cannot be ENCRYPTED"),
        field("LIST of LIST", "grid LIST<LIST<INT64>>", column: 15, "a LIST cannot hold a LIST"),
        field("LIST of ENCRYPTED LIST", "grid LIST<ENCRYPTED LIST<INT64>>", column: 25, "a LIST cannot hold a LIST"),
        field("LIST without its element type", "tags LIST<>", column: 15, "expected the type of the list's elements, found '>'"),
        field("LIST without its closing bracket", "tags LIST<STRING,", column: 21, "expected '>' after the type of the list's elements, found ','"),
        field("NUMBER PREFERRED AS STRING", "amount NUMBER PREFERRED AS STRING", column: 32, "expected INT64 or DOUBLE after PREFERRED AS, found 'STRING'"),
        field("a system field's type changed", "\"___createTime\" STRING", column: 21, "the system field \"___createTime\" is TIMESTAMP; its type cannot change"),
        field("an encrypted system field", "\"___modTime\" ENCRYPTED TIMESTAMP", column: 18, "the system field \"___modTime\" is TIMESTAMP"),
        field("an index on the change tag", "\"___etag\" STRING QUERYABLE", column: 22, "the system field \"___etag\" cannot have an index"),
        field("an unknown system field", "\"___parent\" REFERENCE", column: 5, "\"___parent\" is not a system field a schema can declare"),
        field("a name with a leading underscore", "_private STRING", column: 5, "\"_private\" is not a system field"),
        field("a name Stratus keeps for a system field", "recordName STRING", column: 5, "field name 'recordName' is reserved for a system field"),
        field("a system field by its query name", "creationDate TIMESTAMP SORTABLE", column: 5,
              "field name 'creationDate' is reserved for a system field (the schema language names it \"___createTime\": write \"___createTime\" TIMESTAMP to declare its indexes)"),
        field("a name with a space", "\"my title\" STRING", column: 5, "field name 'my title' has a character other than a letter, digit or '_' at position 3"),
        field("a name starting with a digit", "1st STRING", column: 5, "unexpected character '1'; names start with a letter"),
        field("a reserved word as a field name", "queryable STRING", column: 5, "QUERYABLE is a reserved word; write \"queryable\" to use it as a field name"),
        field("GRANT as a field name", "grant STRING", column: 11, "expected READ, CREATE or WRITE after GRANT, found 'STRING'; GRANT is a reserved word: write \"grant\" to use it as a field name"),
        field("GRANT in capitals as a field name", "GRANT STRING", column: 11, "GRANT is a reserved word: write \"GRANT\" to use it as a field name"),
        field("a misspelt permission", "x STRING, GRANT REED TO \"_world\"", column: 21, "expected READ, CREATE or WRITE after GRANT, found 'REED'\n"),
        field("two roles in one GRANT", "x STRING, GRANT READ TO \"_world\", \"_icloud\"", column: 39, "\"_icloud\" is one of CloudKit's roles, not a field name (a GRANT names one role"),
        field("curly quotes from a web page", "“___createTime” TIMESTAMP", column: 5, "unexpected character '“'; names are quoted with straight double quotes"),
        field("single quotes", "'title' STRING", column: 5, "unexpected character '''; names are quoted with double quotes"),
        field("a no-break space from a web page", "title\u{A0}STRING", column: 10, "unexpected character U+00A0; only ASCII white space (space, tab, line feed, carriage return, vertical tab, form feed) separates words"),
        field("a zero-width space", "title\u{200B} STRING", column: 10, "unexpected character U+200B; only ASCII white space (space, tab, line feed, carriage return, vertical tab, form feed) separates words"),
        field("a byte order mark inside the file", "\u{FEFF}title STRING", column: 5, "unexpected character U+FEFF"),
        Case(label: "an unquoted dotted name", input: "DEFINE SCHEMA\nRECORD TYPE cloudkit.share (x STRING);\n", line: 2, column: 21, message: "unexpected character '.'; a name with '.' (CloudKit's \"cloudkit.share\") is written in double quotes"),
        Case(label: "an index on a field of CloudKit's own type", input: "DEFINE SCHEMA\nRECORD TYPE \"cloudkit.share\" (\n    \"cloudkit.title\" STRING QUERYABLE\n);\n", line: 3, column: 29, message: "field \"cloudkit.title\" is one of CloudKit's own (names with '.' are), and takes no index"),
        field("a dotted field name in an app's type", "\"cloudkit.title\" STRING", column: 5, "field name 'cloudkit.title' has a character other than a letter, digit or '_' at position 9"),
        Case(label: "a dotted record type name of an app", input: "DEFINE SCHEMA\nRECORD TYPE \"com.example.Note\" (x STRING);\n", line: 2, column: 13, message: "record type name 'com.example.Note' has a character other than a letter, digit or '_' at position 4"),
        Case(label: "a dotted record type name with an empty part", input: "DEFINE SCHEMA\nRECORD TYPE \"cloudkit..share\" (x STRING);\n", line: 2, column: 13, message: "record type name 'cloudkit..share' has a character other than a letter, digit or '_' at position 9"),
        Case(label: "duplicate field", input: header + "    title STRING,\n    body STRING,\n    title INT64\n);\n", line: 5, column: 5, message: "field title is declared twice in record type Note (first at 3:5)"),
        Case(label: "duplicate system field", input: header + "    \"___recordID\" REFERENCE QUERYABLE,\n    \"___recordID\" REFERENCE\n);\n", line: 4, column: 5, message: "field \"___recordID\" is declared twice"),
        Case(label: "duplicate record type", input: "DEFINE SCHEMA\nRECORD TYPE Note (a STRING);\nRECORD TYPE Note (b STRING);\n", line: 3, column: 13, message: "record type Note is declared twice (first at 2:13)"),
        Case(label: "duplicate role", input: "DEFINE SCHEMA\nCREATE ROLE editor;\nCREATE ROLE \"editor\";\n", line: 3, column: 13, message: "role editor is created twice (first at 2:13)"),
        Case(label: "creating a system role", input: "DEFINE SCHEMA\nCREATE ROLE \"_world\";\n", line: 2, column: 13, message: "role \"_world\" is CloudKit's own and always exists"),
        Case(label: "creating a role with a leading underscore", input: "DEFINE SCHEMA\nCREATE ROLE \"_admin\";\n", line: 2, column: 13, message: "role name '_admin' starts with '_'"),
        Case(label: "CREATE without ROLE", input: "DEFINE SCHEMA\nCREATE TABLE x;\n", line: 2, column: 8, message: "expected ROLE after CREATE, found 'TABLE'"),
        Case(label: "RECORD without TYPE", input: "DEFINE SCHEMA\nRECORD Note (x STRING);\n", line: 2, column: 8, message: "expected TYPE after RECORD, found 'Note'"),
        Case(label: "a bad record type name", input: "DEFINE SCHEMA\nRECORD TYPE \"Bad-Name\" (x STRING);\n", line: 2, column: 13, message: "record type name 'Bad-Name' has a character other than a letter, digit or '_' at position 4"),
        Case(label: "grant to a role never created", input: "DEFINE SCHEMA\nRECORD TYPE Note (\n    GRANT READ TO editor\n);\n", line: 3, column: 19, message: "role editor is not created by this schema"),
        Case(label: "grant to an unknown system role", input: "DEFINE SCHEMA\nRECORD TYPE Note (GRANT READ TO \"_everyone\");\n", line: 2, column: 33, message: "\"_everyone\" is not one of CloudKit's roles"),
        field("grant without permissions", "GRANT TO \"_world\"", column: 11, "expected READ, CREATE or WRITE after GRANT, found 'TO'"),
        field("grant of an unknown permission", "GRANT DELETE TO \"_world\"", column: 11, "expected READ, CREATE or WRITE after GRANT, found 'DELETE'"),
        field("grant without TO", "GRANT READ \"_world\"", column: 16, "expected ',' or TO after the permissions of GRANT, found '\"_world\"'"),
        Case(label: "grant without a role", input: header + "    GRANT READ TO\n);\n", line: 4, column: 1, message: "expected a role name after TO, found ')'"),
        field("grant with a trailing comma", "GRANT READ, TO \"_world\"", column: 17, "expected READ, CREATE or WRITE after ',', found 'TO'"),
        Case(label: "Users with another roles field", input: "DEFINE SCHEMA\nRECORD TYPE Users (\n    roles LIST<STRING>\n);\n", line: 3, column: 5, message: "the 'roles' field of Users is CloudKit's"),
        Case(label: "a second DEFINE SCHEMA", input: "DEFINE SCHEMA\nDEFINE SCHEMA\n", line: 2, column: 1, message: "expected CREATE ROLE, RECORD TYPE or the end of the file, found 'DEFINE'"),
        Case(label: "garbage bytes", input: "DEFINE SCHEMA\n\u{1}\u{2}", line: 2, column: 1, message: "unexpected character U+0001"),
        Case(label: "a character after a multi-byte one", input: "DEFINE SCHEMA\nRECORD TYPE Note (\n    GRANT READ TO \"café\" ? \n);", line: 3, column: 26, message: "unexpected character '?'"),
    ]

    @Test("each malformed file is refused with its line, column, message and caret", arguments: cases)
    func refused(_ test: Case) throws {
        let error = try #require(schemaError { try SchemaReader().read(test.input) }, "\(test.label) was accepted")
        #expect(error.code == .invalidArguments)
        #expect(error.line == test.line && error.column == test.column, "\(test.label): \(error)")
        #expect(error.message.hasPrefix("\(test.line):\(test.column): "), "\(test.label): \(error.message)")
        #expect(error.message.contains(test.message), "\(test.label): \(error.message)")
        // The second line of the message is the input line, the third a caret under the column.
        let parts = error.message.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(parts.count == 3, "\(test.label): \(error.message)")
        let lines = test.input.split(separator: "\n", omittingEmptySubsequences: false)
        if parts.count == 3, test.line <= lines.count {
            #expect(parts[1] == "    " + lines[test.line - 1].map { $0.unicodeScalars.first!.properties.generalCategory == .control && $0 != "\t" ? "·" : $0 }, "\(test.label)")
            #expect(parts[2] == "    " + String(repeating: " ", count: test.column - 1) + "^", "\(test.label): \(error.message)")
        }
        #expect(String(describing: error).contains("\(test.line):\(test.column): "))
    }

    @Test("a field of CloudKit's own share type declared with another type is refused at the field, not at the type (found by a schema tester)")
    func cloudKitFieldRefusedWhereItStands() throws {
        let text = "DEFINE SCHEMA\n    RECORD TYPE \"cloudkit.share\" (\n        \"cloudkit.title\" INT64,\n        \"cloudkit.type\" STRING\n    );\n"
        let error = try #require(schemaError { try SchemaReader().read(Data(text.utf8)) })
        #expect(error.line == 3 && error.column == 9 && error.message.contains("always STRING"), "\(error)")
        // A rule no one field breaks (a grant's role name) stays at the type.
        let grant = "DEFINE SCHEMA\n    RECORD TYPE Note (\n        a STRING,\n        GRANT READ TO \"x\ty\"\n    );\n"
        let grantError = try #require(schemaError { try SchemaReader().read(Data(grant.utf8)) })
        #expect(grantError.line != 3, "not at the first field: \(grantError)")
    }

    @Test("bytes that are not UTF-8 are refused where they stand, outside comments")
    func invalidUTF8() throws {
        var bytes = Array("DEFINE SCHEMA\nRECORD TYPE Note (".utf8)
        bytes += [0xFF, 0xFE]
        var error = try #require(schemaError { try SchemaReader().read(Data(bytes)) })
        #expect(error.line == 2 && error.column == 19 && error.message.contains("byte 0xFF, which is not UTF-8"), "\(error)")

        bytes = Array("DEFINE SCHEMA\nRECORD TYPE \"No".utf8) + [0xC3, 0x28] + Array("te\" (x STRING);".utf8)
        error = try #require(schemaError { try SchemaReader().read(Data(bytes)) })
        #expect(error.line == 2 && error.column == 13 && error.message.contains("this quoted name is not valid UTF-8"), "\(error)")

        // In a comment, any byte is allowed: comments are skipped unread.
        bytes = Array("-- ".utf8) + [0xFF, 0x00, 0xC3] + Array("\nDEFINE SCHEMA /* \u{7}".utf8) + [0xFE] + Array(" */ RECORD TYPE Note (x STRING);".utf8)
        #expect(try SchemaReader().read(Data(bytes)).recordType("Note") != nil)
    }

    @Test("a UTF-16 file is named as one; after a UTF-8 byte order mark, columns count from the first character")
    func encodings() throws {
        for littleEndian in [true, false] {
            let units = Array("DEFINE SCHEMA".utf16)
            let bytes: [UInt8] = (littleEndian ? [0xFF, 0xFE] : [0xFE, 0xFF])
                + units.flatMap { littleEndian ? [UInt8($0 & 0xFF), UInt8($0 >> 8)] : [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
            let error = try #require(schemaError { try SchemaReader().read(Data(bytes)) })
            #expect(error.line == 1 && error.column == 1 && error.message.contains("this file is UTF-16") && error.message.contains("iconv"), "\(error)")
        }
        // Without a mark: NUL bytes between ASCII characters.
        for littleEndian in [true, false] {
            let bytes: [UInt8] = Array("DEFINE SCHEMA".utf16).flatMap { littleEndian ? [UInt8($0 & 0xFF), UInt8($0 >> 8)] : [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
            let error = try #require(schemaError { try SchemaReader().read(Data(bytes)) })
            #expect(error.line == 1 && error.column == 1 && error.message.contains("looks like UTF-16") && error.message.contains(littleEndian ? "-f UTF-16LE" : "-f UTF-16BE"), "\(error)")
        }
        // The mark is not a character of the first line: the column is the one an editor shows,
        // and the caret stands under the word.
        let error = try #require(schemaError { try SchemaReader().read(Data([0xEF, 0xBB, 0xBF] + Array("DEFINE SCHEMA X".utf8))) })
        #expect(error.line == 1 && error.column == 15, "\(error)")
        #expect(error.message.hasSuffix("\n    DEFINE SCHEMA X\n                  ^"), "\(error.message)")
    }

    @Test("very deep and very long input is refused quickly, never overflowing the stack")
    func deepAndLongInput() throws {
        let deep = Self.header + "    grid " + String(repeating: "LIST<", count: 100_000) + "INT64" + String(repeating: ">", count: 100_000) + "\n);"
        var error = try #require(schemaError { try SchemaReader().read(deep) })
        #expect(error.line == 3 && error.column == 15 && error.message.contains("a LIST cannot hold a LIST"))

        let longName = String(repeating: "a", count: 100_000)
        error = try #require(schemaError { try SchemaReader().read(Self.header + "    \(longName) STRING\n);") })
        #expect(error.line == 3 && error.column == 5 && error.message.contains("is longer than 255 characters"))
        #expect(error.message.count < 400, "the message shows a window of the line, not all of it")

        let manyComments = "DEFINE SCHEMA\n" + String(repeating: "/* x */ -- y\n", count: 50_000) + "RECORD TYPE Note (x TEXT);"
        error = try #require(schemaError { try SchemaReader().read(manyComments) })
        #expect(error.line == 50_002 && error.column == 21)

        let fields = (0..<5_000).map { "f\($0) STRING QUERYABLE" }.joined(separator: ",\n")
        let wideText = "DEFINE SCHEMA RECORD TYPE Wide (\n\(fields)\n);"
        error = try #require(schemaError { try SchemaReader().read(wideText) })
        #expect(error.line == 1_002 && error.column == 1 && error.message.contains("1000 fields a record type may declare"), "\(error)")
        // Past the default limits, a reader told to take more still reads it at once.
        var generous = SchemaReader()
        generous.limits.fieldsPerRecordType = 5_000
        generous.limits.indexes = 5_000
        let wide = try generous.read(wideText)
        #expect(wide.recordType("Wide")?.fields.count == 5_000)
        // Grants are counted too: a role's permissions on a type, once however many GRANT lines say them.
        var fewGrants = SchemaReader()
        fewGrants.limits.grants = 3
        let granted = "DEFINE SCHEMA\nCREATE ROLE a;\nCREATE ROLE b;\nRECORD TYPE T (x STRING, GRANT READ TO a, GRANT WRITE TO a, GRANT READ TO b);\nRECORD TYPE U (x STRING, GRANT READ TO a, GRANT READ TO b);"
        error = try #require(schemaError { try fewGrants.read(granted) })
        #expect(error.line == 5 && error.column == 57 && error.message.contains("one more than the 3 grants"), "\(error)")
        fewGrants.limits.grants = 4
        #expect(try fewGrants.read(granted).recordType("U")?.grants.count == 2)
        let unterminated = "DEFINE SCHEMA\n/*" + String(repeating: "*", count: 200_000)
        error = try #require(schemaError { try SchemaReader().read(unterminated) })
        #expect(error.line == 2 && error.column == 1 && error.message.contains("no closing '*/'"))
    }

    @Test("a file larger than the limit is refused before it is read")
    func largeFile() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("large-\(UUID().uuidString).ckdb")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(("DEFINE SCHEMA\n" + String(repeating: "-- padding\n", count: 200)).utf8).write(to: url)
        var reader = SchemaReader()
        reader.maximumFileSize = 1_000
        let error = try #require(schemaError { try reader.read(contentsOf: url) })
        #expect(error.code == .invalidArguments && error.message.contains("larger than 1000 bytes"))
        reader.maximumFileSize = 10_000
        #expect(try reader.read(contentsOf: url).recordTypes.map(\.recordType) == ["Users"])
    }

    @Test("random damage to real files never crashes: each copy reads, or is refused at a position inside it")
    func mutatedFiles() throws {
        var random = SeededGenerator(seed: 2_026_11_25)
        let seeds: [[UInt8]] = SchemaFixtures.available
            ? try SchemaFixtures.goodNames.map { Array(try SchemaFixtures.text($0).utf8) }
            : [Array(Self.header.utf8) + Array("    title STRING QUERYABLE,\n    GRANT READ TO \"_world\"\n);\n".utf8)]
        let alphabet = Array("()<>,;\"'/*-_ \n\taZ09ÿ".utf8) + [0x00, 0xFF]
        var refused = 0
        for round in 0..<2_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                case 2: bytes[at] = alphabet.randomElement(using: &random)!
                default: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...40, using: &random)))
                }
            }
            do {
                let schema = try SchemaReader().read(Data(bytes))
                try schema.validate()
                #expect(try SchemaReader().read(SchemaWriter().text(for: schema)) == schema, "round \(round)")
            } catch let error as StratusError {
                refused += 1
                let lineCount = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).count
                #expect(error.code == .invalidArguments, "round \(round): \(error)")
                #expect((error.line ?? 0) >= 1 && (error.line ?? 0) <= lineCount && (error.column ?? 0) >= 1, "round \(round): \(error)")
                #expect(error.message.hasPrefix("\(error.line ?? 0):\(error.column ?? 0): "), "round \(round): \(error.message)")
            }
        }
        #expect(refused > 100, "most damage is refused")
    }
}
