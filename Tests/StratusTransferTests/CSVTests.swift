import Foundation
import Stratus
import StratusTransfer
import Testing

@Suite("CSV: RFC 4180 with typed headers")
struct CSVTests {
    static func read(_ text: String, configure: (inout RecordReadOptions) -> Void = { _ in }) throws -> [RecordReadResult] {
        try readAll(text, format: .csv, configure: configure)
    }

    @Test("quoted cells, doubled quotes, CRLF and LF, embedded line breaks, typed headers")
    func rfc4180() throws {
        let text = "recordName,recordType,title:STRING,count:INT64,price:DOUBLE,tags:STRING_LIST,when:TIMESTAMP\r\n"
            + "a,Item,\"Milk, 2 \"\"litres\"\"\",3,1.25,\"[\"\"x\"\",\"\"y\"\"]\",1700000000000\r\n"
            + "b,Item,\"two\nlines\r\nhere\",-4,1e3,[],\n"
            + "c,Item,,,,,\n"
            + "d,Item,\"\",0,0,\"[]\",0"
        let items = try Self.read(text)
        #expect(items.count == 4)
        let a = try #require(items[0].record)
        #expect(a.fieldValue(forKey: "title") == .string("Milk, 2 \"litres\""))
        #expect(a.fieldValue(forKey: "count") == .int64(3))
        #expect(a.fieldValue(forKey: "price") == .double(1.25))
        #expect(a.fieldValue(forKey: "tags") == .stringList(["x", "y"]))
        #expect(a.fieldValue(forKey: "when") == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        let b = try #require(items[1].record)
        #expect(b.fieldValue(forKey: "title") == .string("two\nlines\r\nhere"))
        #expect(b.fieldValue(forKey: "price") == .double(1000))
        #expect(b.fieldValue(forKey: "tags") == .stringList([]))
        #expect(b.fieldValue(forKey: "when") == nil)
        // Empty cells are no value, and remove the field on save.
        let c = try #require(items[2].record)
        #expect(c.allKeys().isEmpty)
        #expect(c.changedKeys() == ["title", "count", "price", "tags", "when"])
        // A quoted empty STRING cell is the empty string.
        #expect(items[3].record?.fieldValue(forKey: "title") == .string(""))
        #expect(items.map(\.line) == [2, 3, 6, 7])
    }

    @Test("a system column holding a control character (a quoted line break in a change tag or a user's name) rejects its row")
    func controlCharactersInSystemColumns() throws {
        let text = "recordName,recordType,recordChangeTag,creatorUserRecordID\n"
            + "a,Item,\"t\n1\",_u\n"
            + "b,Item,t2,\"_u\nzz\"\n"
            + "c,Item,t3,_u\n"
        let items = try Self.read(text)
        #expect(items.compactMap(\.record).map(\.recordID.recordName) == ["c"])
        let messages = items.compactMap(\.rejection).map(\.message)
        #expect(messages.count == 2 && messages[0].contains("recordChangeTag column holds a control character")
                && messages[1].contains("creatorUserRecordID column holds a control character"), "\(messages)")
    }

    @Test("plain headers take csvTypes, then the schema, then the type inferred from the cell; recordType may be given instead of a column")
    func columnTypes() throws {
        var schema = RecordTypeSchema(recordType: "Note")
        schema.addField("due", type: .timestamp, indexes: [])
        let items = try Self.read("recordName,n,due,text,quoted\nx,5,86400000,5,\"5\"\n") {
            $0.csvRecordType = "Note"
            $0.csvTypes = ["n": .int64]
            $0.schemas = ["Note": schema]
        }
        let record = try #require(items.first?.record)
        #expect(record.recordType == "Note")
        #expect(record.fieldValue(forKey: "n") == .int64(5))
        #expect(record.fieldValue(forKey: "due") == .date(Date(timeIntervalSince1970: 86_400)))
        #expect(record.fieldValue(forKey: "text") == .int64(5), "an unquoted number in an untyped column is a number")
        #expect(record.fieldValue(forKey: "quoted") == .string("5"), "a quoted cell is text")
    }

    @Test("references, assets and locations as plain text or JSON; system columns")
    func specialCells() throws {
        let text = """
            recordName,recordType,recordChangeTag,creationDate,creatorUserRecordID,ref:REFERENCE,refs:REFERENCE_LIST,file:ASSETID,place:LOCATION
            a,T,tag-9,1000,_alice,target,"[{""recordName"":""x"",""action"":""DELETE_SELF""}]",/tmp/a.jpg,"52.5, 13.4"
            b,T,,,,"{""recordName"":""y"",""action"":""DELETE_SELF""}",[],file:///tmp/b%20c.jpg,"{""latitude"":1,""longitude"":2,""altitude"":3}"
            """
        // Paths of this machine are read only when the program says so (its own files).
        let items = try Self.read(text) { $0.assetPaths = .anywhere }
        let a = try #require(items[0].record)
        #expect(a.recordChangeTag == "tag-9")
        #expect(a.creationDate == Date(timeIntervalSince1970: 1))
        #expect(a.creatorUserRecordID == Record.ID(recordName: "_alice"))
        #expect(a.fieldValue(forKey: "ref") == .reference(Record.Reference(recordID: Record.ID(recordName: "target"), action: .none)))
        #expect(a.fieldValue(forKey: "refs") == .referenceList([Record.Reference(recordID: Record.ID(recordName: "x"), action: .deleteSelf)]))
        #expect(a.fieldValue(forKey: "file") == .asset(Asset(fileURL: URL(fileURLWithPath: "/tmp/a.jpg"))))
        #expect(a.fieldValue(forKey: "place") == .location(Location(latitude: 52.5, longitude: 13.4)))
        let b = try #require(items[1].record)
        #expect(b.recordChangeTag == nil && b.creationDate == nil)
        #expect(b.fieldValue(forKey: "ref") == .reference(Record.Reference(recordID: Record.ID(recordName: "y"), action: .deleteSelf)))
        #expect(b.fieldValue(forKey: "file") == .asset(Asset(fileURL: URL(fileURLWithPath: "/tmp/b c.jpg"))))
        let place = Location(latitude: 1, longitude: 2, altitude: 3)
        #expect(b.fieldValue(forKey: "place") == .location(place))
    }

    @Test("a stray quote that takes the lines after it into one cell is reported as such at the row it ends in")
    func strayQuoteSpanningLines() throws {
        let items = try Self.read("recordName,recordType,t\nr1,T,a\nr2,T,\"oops\nr3,T,b\nr4,T,\"c\"\nr5,T,d\n")
        #expect(items.map { $0.record?.recordID.recordName } == ["r1", nil, "r5"])
        let rejection = try #require(items[1].rejection)
        #expect(rejection.line == 5 && rejection.message.contains("began 2 lines earlier: if the quote there was a stray one, it took the lines between into this one row"), "\(rejection)")
    }

    @Test("a header whose names a spreadsheet separated with semicolons or tabs says so")
    func semicolonHeader() throws {
        for (text, said) in [("recordName;recordType;title\nr1;T;a\n", "this header has semicolons between its names: export the file with commas"),
                             ("recordName\trecordType\ttitle\nr1\tT\ta\n", "this header has tabs between its names")] {
            let failure = #expect(throws: StratusError.self) { _ = try Self.read(text) }
            #expect(failure?.message.contains(said) == true, "\(String(describing: failure))")
        }
    }

    @Test("a recordName or recordType cell that is not UTF-8 (a Latin-1 export) is named as such, not as missing")
    func latin1Identity() throws {
        var options = RecordReadOptions()
        options.format = .csv
        let data = Data("recordName,recordType,t\nr".utf8) + Data([0xE9]) + Data("1,T,x\nr2,T".utf8) + Data([0xE9]) + Data(",x\n".utf8)
        let items = try readAll(data, options)
        #expect(items.map { $0.rejection?.message } == ["the recordName cell is not valid UTF-8", "the recordType cell is not valid UTF-8"])
    }

    @Test("bad rows are rejected with line and column; reading goes on", arguments: [
        ("a,T,x", "the row has 3 cells, but the header has 4 columns", 1),
        (",T,1,x", "the row has no recordName", 1),
        ("_a,T,1,x", "starts with '_'", 1),
        ("a,,1,x", "the row has no recordType", 3),
        ("a,T,1.5,x", "field 'n': INT64 cell '1.5' is not a whole number", 5),
        ("a,T,12abc,x", "INT64 cell '12abc' is not a whole number", 5),
        ("a,T, 7 ,\"x\"y", "after a closing quote", 12),
        ("a,T,1,x\"y", "a quote inside an unquoted cell", 8),
        ("a,T,[1],x", "INT64 cell '[1]' is not a whole number", 5),
    ] as [(String, String, Int)])
    func badRows(row: String, message: String, column: Int) throws {
        let text = "recordName,recordType,n:INT64,s\nok1,T,1,x\n" + row + "\nok2,T,2,y\n"
        let items = try Self.read(text)
        #expect(items.count == 3)
        let rejection = try #require(items[1].rejection, "\(row)")
        #expect(rejection.line == 3)
        #expect(rejection.column == column, "\(row): \(rejection)")
        #expect(rejection.message.contains(message), "\(row): \(rejection)")
        #expect(items[2].record?.recordID.recordName == "ok2")
        #expect(items[2].line == 4)
    }

    @Test("an unclosed quote, which takes every later line into its cell, stops the read at its line and column (the rows before it were read)")
    func unclosedQuote() throws {
        let reader = try RecordReader(data: Data("recordName,recordType\na,T\n\"b,T\nc,T\n".utf8), options: { var o = RecordReadOptions(); o.format = .csv; return o }())
        #expect(try reader.next()?.record?.recordID.recordName == "a")
        do {
            _ = try reader.next()
            Issue.record("an unclosed quote did not stop the read")
        } catch let error as StratusError {
            #expect(error.message.contains("not closed") && error.message.contains("none of them was read"), "\(error)")
            #expect(error.line == 3 && error.column == 1, "\(error)")
        }
    }

    @Test("header problems throw", arguments: [
        ("title\nx\n", "no recordName column"),
        ("recordName\nx\n", "no recordType column"),
        ("recordName,recordType,a:FROB\n", "names the type 'FROB'"),
        ("recordName,recordType,a,a:STRING\n", "two columns"),
        ("recordName,recordType,recordName\n", "appears twice"),
        ("recordName,recordType,1a\n", "must start with a letter"),
        ("recordName,recordType,recordChangeTag:STRING\n", "reserved"),
        ("recordName,recordType,b:ENCRYPTED_FROB\n", "names the type 'ENCRYPTED_FROB'"),
    ] as [(String, String)])
    func badHeaders(text: String, message: String) throws {
        do {
            _ = try Self.read(text)
            Issue.record("no error for \(text)")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains(message), "\(error)")
            #expect(error.line == 1)
        }
    }

    @Test("the writer derives a typed header from the first record and refuses what would not read back")
    func writerHeader() throws {
        let first = storedRecord("T", "a", ["n": .int64(1), "s": .string("x")], tag: nil, created: nil, modified: nil)
        let data = try written([first], format: .csv) { $0.csvSystemColumns = false }
        #expect(String(decoding: data, as: UTF8.self) == "recordName,recordType,n:INT64,s:STRING\na,T,1,x\n")

        let extra = storedRecord("T", "b", ["n": .int64(1), "other": .string("y")], tag: nil, created: nil, modified: nil)
        #expect(throws: StratusError.self) { try written([first, extra], format: .csv) }
        let mismatch = storedRecord("T", "b", ["n": .string("one")], tag: nil, created: nil, modified: nil)
        #expect(throws: StratusError.self) { try written([first, mismatch], format: .csv) }
        // With explicit fields, other fields are left out (like desiredKeys).
        let projected = try written([first, extra], format: .csv, csvFields: ["n"]) { $0.csvSystemColumns = false }
        #expect(String(decoding: projected, as: UTF8.self) == "recordName,recordType,n:INT64\na,T,1\nb,T,1\n")
        // System names and repeats in the fields asked for do not make extra columns; `parent` is
        // a field (CloudKit allows the name), typed so that it does not read as the parent.
        let repeated = try written([first], format: .csv, csvFields: ["recordName", "n", "n", "parent"]) { $0.csvSystemColumns = false }
        #expect(String(decoding: repeated, as: UTF8.self) == "recordName,recordType,n:INT64,parent:STRING\na,T,1,\n")
        let named = storedRecord("T", "c", ["parent": .string("up")], tag: nil, created: nil, modified: nil, parent: "mother")
        let parentField = try written([named], format: .csv, csvFields: ["parent"]) { $0.csvSystemColumns = false }
        let back = try #require(try readAll(parentField, { var o = RecordReadOptions(); o.format = .csv; return o }()).first?.record)
        #expect(back.fieldValue(forKey: "parent") == .string("up") && back.parent == nil)
    }

    @Test("a reference or location whose JSON held more than its value goes through CSV as that JSON and back; encrypted columns can be named")
    func keptObjectsAndEncryptedColumns() throws {
        let fields: [(key: String, text: String)] = [
            ("loc", #"{"value":{"latitude":1.5,"longitude":2.5},"type":"LOCATION"}"#),
            ("locs", #"{"value":[{"latitude":1,"longitude":2,"speed":3}],"type":"LOCATION_LIST"}"#),
            ("ref", #"{"value":{"recordName":"x","action":"NONE","zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}},"type":"REFERENCE"}"#),
            ("refs", #"{"value":[{"recordName":"y","action":"VALIDATE"},{"recordName":"z"}],"type":"REFERENCE_LIST"}"#),
        ]
        let line = #"{"recordName":"a","recordType":"T","fields":{"# + fields.map { "\"\($0.key)\":\($0.text)" }.joined(separator: ",") + "}}"
        let record = try #require(try readAll(line).first?.record)
        let csv = try written([record], format: .csv) { $0.csvSystemColumns = false }
        #expect(!String(decoding: csv, as: UTF8.self).contains("978307200000"), "no default timestamp is made up")
        let back = try #require(try readAll(csv, { var o = RecordReadOptions(); o.format = .csv; return o }()).first?.record)
        expectSame(back, record, "csv")
        let json = RecordJSONWriter.json(for: back)
        for (key, text) in fields {
            #expect(json.contains("\"\(key)\":\(text)"), "\(key) came back otherwise: \(json)")
        }

        // A column for a field the first record lacks can be named encrypted.
        let plain = storedRecord("S", "p", ["label": .string("x")], tag: nil, created: nil, modified: nil)
        let secret = Record(recordType: "S", recordID: Record.ID(recordName: "s"), systemFields: Record.SystemFields(),
                            fields: ["data": .bytes(Data([1]))], encryptedKeys: ["data"])
        let refused = #expect(throws: StratusError.self) {
            try written([plain, secret], format: .csv, csvFields: ["label", "data"]) { $0.csvSystemColumns = false; $0.csvTypes = ["data": .bytes] }
        }
        #expect(refused?.message.contains("ENCRYPTED_BYTES") == true, "\(String(describing: refused))")
        let named = try written([plain, secret], format: .csv, csvFields: ["label", "data"]) {
            $0.csvSystemColumns = false
            $0.csvTypes = ["data": .bytes]
            $0.csvEncryptedFields = ["data"]
        }
        #expect(String(decoding: named, as: UTF8.self) == "recordName,recordType,label:STRING,data:ENCRYPTED_BYTES\np,S,x,\ns,S,,AQ==\n")

        // A reference given as a bare name (JSON text that is a string, not an object) is written
        // as its record name, and comes back as a reference to the same record.
        let bare = try #require(try readAll(#"{"recordName":"b","recordType":"T","fields":{"r":{"value":"someName","type":"REFERENCE"}}}"#).first?.record)
        let bareCSV = try written([bare], format: .csv) { $0.csvSystemColumns = false }
        #expect(String(decoding: bareCSV, as: UTF8.self) == "recordName,recordType,r:REFERENCE\nb,T,someName\n")
        let bareBack = try #require(try readAll(bareCSV, { var o = RecordReadOptions(); o.format = .csv; return o }()).first?.record)
        if case .reference(let reference)? = bareBack.fieldValue(forKey: "r") {
            #expect(reference.recordID.recordName == "someName")
        } else {
            Issue.record("no reference came back: \(String(describing: bareBack.fieldValue(forKey: "r")))")
        }
    }
}
