import Foundation
import Stratus
import StratusTransfer
import Testing

/// The schema language as CloudKit's documentation defines it, on files written for the tests.
@Suite("Schema language: syntax, types, system fields, roles, writer layout")
struct SchemaLanguageSyntaxTests {
    static func read(_ text: String, includesUsers: Bool = false) throws -> ContainerSchema {
        var reader = SchemaReader()
        reader.includesUsersRecordType = includesUsers
        return try reader.read(text)
    }

    /// Reads, writes and reads again, expecting the same schema.
    @discardableResult
    static func roundTrip(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> ContainerSchema {
        let schema = try read(text, includesUsers: true)
        let again = try read(SchemaWriter().text(for: schema), includesUsers: true)
        #expect(again == schema, sourceLocation: sourceLocation)
        return schema
    }

    @Test("every field type, in lists, encrypted and as NUMBER, with PREFERRED AS or without")
    func everyType() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
            RECORD TYPE Everything (
                s STRING, i INT64, d DOUBLE, t TIMESTAMP, b BYTES, r REFERENCE, a ASSET, l LOCATION,
                ls LIST<STRING>, li LIST<INT64>, ld LIST<DOUBLE>, lt LIST<TIMESTAMP>, lb LIST<BYTES>,
                lr LIST<REFERENCE>, la LIST<ASSET>, ll LIST<LOCATION>,
                es ENCRYPTED STRING, ei ENCRYPTED INT64, ed ENCRYPTED DOUBLE, et ENCRYPTED TIMESTAMP,
                eb ENCRYPTED BYTES, el ENCRYPTED LOCATION, els LIST<ENCRYPTED STRING>, eli LIST < ENCRYPTED INT64 >,
                ni NUMBER PREFERRED AS INT64, nd NUMBER PREFERRED AS DOUBLE, lni LIST<NUMBER PREFERRED AS INT64>,
                n NUMBER, ln LIST<NUMBER>
            );
            """)
        let type = try #require(schema.recordType("Everything"))
        let expected: [String: FieldType] = [
            "s": .string, "i": .int64, "d": .double, "t": .timestamp, "b": .bytes, "r": .reference, "a": .asset, "l": .location,
            "ls": .stringList, "li": .int64List, "ld": .doubleList, "lt": .timestampList, "lb": .bytesList,
            "lr": .referenceList, "la": .assetList, "ll": .locationList,
            "es": .string, "ei": .int64, "ed": .double, "et": .timestamp, "eb": .bytes, "el": .location, "els": .stringList, "eli": .int64List,
            "ni": .int64, "nd": .double, "lni": .int64List, "n": .int64, "ln": .int64List,
        ]
        #expect(Dictionary(uniqueKeysWithValues: type.fields.map { ($0.name, $0.type) }) == expected)
        #expect(Set(type.fields.filter(\.isEncrypted).map(\.name)) == ["es", "ei", "ed", "et", "eb", "el", "els", "eli"])
        #expect(Set(type.fields.filter(\.isNumber).map(\.name)) == ["ni", "nd", "lni", "n", "ln"])
        #expect(Set(type.fields.filter { !$0.namesPreferredType }.map(\.name)) == ["n", "ln"])
        let written = SchemaWriter().text(for: schema)
        for line in ["        eli             LIST<ENCRYPTED INT64>,", "        lni             LIST<NUMBER PREFERRED AS INT64>,",
                     "        el              ENCRYPTED LOCATION,", "        nd              NUMBER PREFERRED AS DOUBLE,",
                     "        a               ASSET,", "        la              LIST<ASSET>,",
                     "        n               NUMBER,", "        ln              LIST<NUMBER>,"] {
            #expect(written.contains(line + "\n"), "\(line)\n\(written)")
        }
    }

    @Test("every option on the types that take it; options are written QUERYABLE SEARCHABLE SORTABLE")
    func everyOption() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
            RECORD TYPE Indexed (
                title STRING SORTABLE SEARCHABLE QUERYABLE,
                count INT64 QUERYABLE SORTABLE, ratio DOUBLE SORTABLE, at TIMESTAMP QUERYABLE,
                blob BYTES QUERYABLE SORTABLE, owner REFERENCE QUERYABLE, place LOCATION QUERYABLE SORTABLE,
                tags LIST<STRING> QUERYABLE SEARCHABLE, refs LIST<REFERENCE> QUERYABLE, twice STRING QUERYABLE QUERYABLE
            );
            """)
        let type = try #require(schema.recordType("Indexed"))
        #expect(type.field("title")?.indexes == [.queryable, .searchable, .sortable])
        #expect(type.field("tags")?.indexes == [.queryable, .searchable])
        #expect(type.field("place")?.indexes == [.queryable, .sortable])
        #expect(type.field("twice")?.indexes == [.queryable])
        #expect(SchemaWriter().text(for: schema).contains("        title           STRING QUERYABLE SEARCHABLE SORTABLE,\n"))
    }

    @Test("comments of all three kinds, anywhere white space may be")
    func comments() throws {
        let schema = try Self.read("""
            -- leading comment
            // another
            /* a block
               over lines, with "quotes", ( and ; and -- inside */
            DEFINE/**/SCHEMA -- after the header
            RECORD TYPE /* between */ Note ( // after the paren
                title STRING--no space before the comment
                /* before the comma */ , body /* inside */ STRING QUERYABLE // trailing
                , GRANT READ /* in a grant */ TO "_world"
            ) ; /* at the end, without a newline */
            """)
        let note = try #require(schema.recordType("Note"))
        #expect(Set(note.fields.map(\.name)) == ["title", "body"])
        #expect(note.field("body")?.indexes == [.queryable])
        #expect(note.grants == [.world: .read])
    }

    @Test("keywords are case-insensitive; names are case-sensitive")
    func caseRules() throws {
        let schema = try Self.read("""
            define schema
                create role Moderator;
                Record Type note (name string Queryable, Name Int64 sortable, tags list<string>, GRANT read, Write TO Moderator);
                RECORD TYPE Note (name STRING);
            """)
        #expect(Set(schema.recordTypes.map(\.recordType)) == ["note", "Note"])
        let lower = try #require(schema.recordType("note"))
        #expect(lower.field("name") == .init("name", type: .string, indexes: [.queryable]))
        #expect(lower.field("Name") == .init("Name", type: .int64, indexes: [.sortable]))
        #expect(lower.field("tags")?.type == .stringList)
        #expect(lower.grants == ["Moderator": [.read, .write]])
        let error = try #require(schemaError { try Self.read("DEFINE SCHEMA CREATE ROLE moderator; RECORD TYPE A (GRANT READ TO Moderator);") })
        #expect(error.line == 1 && error.column == 67 && error.message.contains("role Moderator is not created"), "\(error)")
    }

    @Test("keywords stand as names where a name stands; reserved words only when quoted")
    func keywordsAsNames() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
                CREATE ROLE list;
                RECORD TYPE List (type STRING, order INT64, timestamp TIMESTAMP, LIST LIST<STRING>, string STRING,
                                  record REFERENCE, define STRING, schema STRING, encrypted BYTES, number DOUBLE, "grant" STRING,
                                  "Queryable" INT64, "sortable" INT64, "SEARCHABLE" STRING, "preferred" STRING, as STRING, to STRING,
                                  GRANT READ TO list);
                RECORD TYPE "Record" (read STRING, "create" STRING, write STRING);
            """)
        let list = try #require(schema.recordType("List"))
        #expect(list.fields.count == 17)
        #expect(list.field("timestamp")?.type == .timestamp && list.field("LIST")?.type == .stringList && list.field("grant")?.type == .string)
        #expect(list.grants == ["list": .read])
        #expect(schema.recordType("Record")?.fields.count == 3)
        let written = SchemaWriter().text(for: schema)
        for line in ["        \"Queryable\"     INT64,", "        \"SEARCHABLE\"    STRING,", "        \"grant\"         STRING,",
                     "        timestamp       TIMESTAMP,", "        LIST            LIST<STRING>,", "    CREATE ROLE list;", "    RECORD TYPE List (",
                     "    RECORD TYPE Record (", "        create          STRING,"] {
            #expect(written.contains(line + "\n"), "\(line)\n\(written)")
        }
    }

    @Test("fields named parent and share, as a CloudKit Console export declares them, are fields with their indexes")
    func parentAndShareFields() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
                RECORD TYPE Folder (
                    "___createTime" TIMESTAMP,
                    "___recordID"   REFERENCE QUERYABLE,
                    name            STRING QUERYABLE SORTABLE,
                    parent          STRING QUERYABLE,
                    share           REFERENCE QUERYABLE,
                    GRANT WRITE TO "_creator",
                    GRANT READ TO "_world"
                );
            """)
        let folder = try #require(schema.recordType("Folder"))
        #expect(folder.field("parent")?.type == .string && folder.field("parent")?.indexes == [.queryable])
        #expect(folder.field("share")?.type == .reference && folder.field("share")?.indexes == [.queryable])
    }

    @Test("quoted names: identifiers, system fields, and role names with spaces")
    func quotedNames() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
                CREATE ROLE "test role";
                CREATE ROLE "café crew";
                RECORD TYPE "Quoted" ("title" STRING, "CD_x" INT64, GRANT READ TO "test role", GRANT WRITE TO "café crew");
            """)
        #expect(schema.roles == ["test role", "café crew"])
        let type = try #require(schema.recordType("Quoted"))
        #expect(Set(type.fields.map(\.name)) == ["title", "CD_x"])
        let written = SchemaWriter().text(for: schema)
        #expect(written.contains("    CREATE ROLE \"café crew\";\n\n    CREATE ROLE \"test role\";\n\n"), "\(written)")
        #expect(written.contains("    RECORD TYPE Quoted (\n"))
        #expect(written.contains("        GRANT WRITE TO \"café crew\",\n        GRANT READ TO \"test role\"\n    );"), "\(written)")
    }

    @Test("CloudKit's system fields map onto Stratus's, keep their indexes and are written back under CloudKit's names")
    func systemFields() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA RECORD TYPE Item (
                "___createTime" TIMESTAMP QUERYABLE SORTABLE, "___modTime" TIMESTAMP SORTABLE,
                "___recordID" REFERENCE QUERYABLE, "___createdBy" REFERENCE QUERYABLE, "___modifiedBy" REFERENCE SORTABLE,
                "___etag" STRING, name STRING
            );
            """)
        let item = try #require(schema.recordType("Item"))
        #expect(Set(item.fields) == [
            .init("creationDate", type: .timestamp, indexes: [.queryable, .sortable]),
            .init("modificationDate", type: .timestamp, indexes: [.sortable]),
            .init("recordName", type: .string, indexes: [.queryable]),
            .init("creatorUserRecordID", type: .reference, indexes: [.queryable]),
            .init("lastModifiedUserRecordID", type: .reference, indexes: [.sortable]),
            .init("name", type: .string),
        ])
        try item.validate()
        #expect(SchemaWriter().text(for: ContainerSchema(recordTypes: [item])).hasPrefix("""
            DEFINE SCHEMA

                RECORD TYPE Item (
                    "___createTime" TIMESTAMP QUERYABLE SORTABLE,
                    "___createdBy"  REFERENCE QUERYABLE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP SORTABLE,
                    "___modifiedBy" REFERENCE SORTABLE,
                    "___recordID"   REFERENCE QUERYABLE,
                    name            STRING
                );

            """), "a type declared without GRANT lines grants nothing, and is written without them")
        for system in SystemField.allCases {
            #expect(SystemField(cloudKitName: system.cloudKitName) == system)
        }
        // Named without options, a system field says nothing: every type has them all.
        let bare = try Self.read(#"DEFINE SCHEMA RECORD TYPE Bare ("___createTime" TIMESTAMP, "___recordID" REFERENCE, "___etag" STRING);"#)
        #expect(bare.recordType("Bare")?.fields.isEmpty == true)
    }

    @Test("roles and grants: merged per role, created after use, written one GRANT per role sorted by name")
    func rolesAndGrants() throws {
        let schema = try Self.roundTrip("""
            DEFINE SCHEMA
                RECORD TYPE Post (
                    title STRING,
                    GRANT WRITE TO editor, GRANT READ TO "_world", GRANT CREATE TO "_icloud", GRANT CREATE TO editor,
                    GRANT WRITE, READ TO "_creator", GRANT READ, READ TO Admin
                );
                CREATE ROLE editor;
                CREATE ROLE Admin;
            """)
        let post = try #require(schema.recordType("Post"))
        #expect(post.grants == ["editor": [.create, .write], .world: .read, .authenticated: .create, .creator: [.read, .write], "Admin": .read])
        #expect(SchemaWriter().text(for: schema).contains("""
                    title           STRING,
                    GRANT READ TO Admin,
                    GRANT READ, WRITE TO "_creator",
                    GRANT CREATE TO "_icloud",
                    GRANT READ TO "_world",
                    GRANT CREATE, WRITE TO editor
                );
            """))
        #expect(SchemaWriter().text(for: schema).hasPrefix("DEFINE SCHEMA\n\n    CREATE ROLE Admin;\n\n    CREATE ROLE editor;\n\n    RECORD TYPE Post (\n"))
    }

    @Test("the Users type CloudKit always has is added when missing and written by default")
    func usersType() throws {
        let without = try SchemaReader().read("DEFINE SCHEMA RECORD TYPE Note (title STRING);")
        #expect(without.recordType("Users") == ContainerSchema.defaultUsersRecordType)
        var reader = SchemaReader()
        reader.includesUsersRecordType = false
        #expect(try reader.read("DEFINE SCHEMA RECORD TYPE Note (title STRING);").recordType("Users") == nil)

        // A declared Users keeps its own fields and grants; its roles field is added.
        let declared = try SchemaReader().read(#"DEFINE SCHEMA RECORD TYPE Users (nickname STRING QUERYABLE, GRANT READ TO "_creator");"#)
        let users = try #require(declared.recordType("Users"))
        #expect(Set(users.fields) == [.init("nickname", type: .string, indexes: [.queryable]), ContainerSchema.usersRolesField])
        #expect(users.grants == [.creator: .read])
        #expect(declared.recordTypes.count == 1)
        // Its roles field may be indexed, not retyped (see the malformed inputs).
        let indexed = try SchemaReader().read("DEFINE SCHEMA RECORD TYPE Users (roles LIST<INT64> QUERYABLE);")
        #expect(indexed.recordType("Users")?.fields == [.init("roles", type: .int64List, indexes: .queryable)])
        try indexed.validate()

        #expect(SchemaWriter().text(for: ContainerSchema()) == """
            DEFINE SCHEMA

                RECORD TYPE Users (
                    "___createTime" TIMESTAMP,
                    "___createdBy"  REFERENCE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP,
                    "___modifiedBy" REFERENCE,
                    "___recordID"   REFERENCE,
                    roles           LIST<INT64>,
                    GRANT WRITE TO "_creator",
                    GRANT READ TO "_world"
                );


            """)
        var writer = SchemaWriter()
        writer.includesUsersRecordType = false
        #expect(writer.text(for: ContainerSchema()) == "DEFINE SCHEMA\n\n")
        #expect(try reader.read("DEFINE SCHEMA") == ContainerSchema())
    }

    @Test("a schema built in Swift is written in the export layout and reads back equal")
    func swiftBuiltSchema() throws {
        var post = RecordTypeSchema(recordType: "Post", grants: RecordTypeSchema.publicDatabaseGrants)
        post.addField("title", type: .string, indexes: [.queryable, .searchable, .sortable])
        post.addField("body", type: .string, isEncrypted: true)
        post.addField("modificationDate", type: .timestamp, indexes: [.sortable])
        post.grant([.create, .write], to: "moderator")
        var schema = ContainerSchema(roles: ["moderator"], recordTypes: [post])
        schema.includeUsersRecordType()
        try schema.validate()
        let text = SchemaWriter().text(for: schema)
        #expect(text.hasPrefix("""
            DEFINE SCHEMA

                CREATE ROLE moderator;

                RECORD TYPE Post (
                    "___createTime" TIMESTAMP,
                    "___createdBy"  REFERENCE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP SORTABLE,
                    "___modifiedBy" REFERENCE,
                    "___recordID"   REFERENCE,
                    body            ENCRYPTED STRING,
                    title           STRING QUERYABLE SEARCHABLE SORTABLE,
                    GRANT WRITE TO "_creator",
                    GRANT CREATE TO "_icloud",
                    GRANT READ TO "_world",
                    GRANT CREATE, WRITE TO moderator
                );

                RECORD TYPE Users (
            """), "\(text)")
        #expect(try SchemaReader().read(text) == schema)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString).ckdb")
        defer { try? FileManager.default.removeItem(at: url) }
        try SchemaWriter().write(schema, to: url)
        #expect(try SchemaReader().read(contentsOf: url) == schema)
        #expect(try Data(contentsOf: url) == SchemaWriter().data(for: schema))
    }

    @Test("CloudKit's own cloudkit.share type, as the export of a container that shares records has it, reads and is written back")
    func shareType() throws {
        let text = """
            DEFINE SCHEMA

                RECORD TYPE "cloudkit.share" (
                    "___createTime"               TIMESTAMP,
                    "___createdBy"                REFERENCE,
                    "___etag"                     STRING,
                    "___modTime"                  TIMESTAMP,
                    "___modifiedBy"               REFERENCE,
                    "___recordID"                 REFERENCE QUERYABLE,
                    "cloudkit.thumbnailImageData" BYTES,
                    "cloudkit.title"              STRING,
                    "cloudkit.type"               STRING,
                    GRANT WRITE TO "_creator",
                    GRANT CREATE TO "_icloud",
                    GRANT READ TO "_world"
                );

            """
        let schema = try Self.roundTrip(text)
        let share = try #require(schema.recordType(Record.SystemType.share))
        #expect(Set(share.fields) == [
            .init("recordName", type: .string, indexes: [.queryable]), .init("cloudkit.thumbnailImageData", type: .bytes),
            .init("cloudkit.title", type: .string), .init("cloudkit.type", type: .string),
        ])
        #expect(share.effectiveGrants == RecordTypeSchema.publicDatabaseGrants)
        try schema.validate()
        let written = SchemaWriter().text(for: schema)
        #expect(written.contains(text.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2).joined(separator: "\n")), "the export's layout:\n\(written)")
    }

    @Test("white space: tabs, CRLF line ends and a byte order mark")
    func whiteSpace() throws {
        let schema = try Self.read("\u{FEFF}DEFINE SCHEMA\r\n\tRECORD TYPE\tNote\t(\r\n\t\ttitle\tSTRING\tQUERYABLE\r\n\t);\r\n")
        #expect(schema.recordType("Note")?.field("title")?.indexes == [.queryable])
        let error = try #require(schemaError { try Self.read("DEFINE SCHEMA\r\n\tRECORD TYPE Note (\r\n\t\ttitle\tTEXT\r\n\t);\r\n") })
        #expect(error.line == 3 && error.column == 9, "\(error)")
        #expect(error.message.contains("\n    \t\ttitle\tTEXT\n    \t\t     \t^"), "tabs kept so the caret lines up: \(error.message)")
    }

    @Test("lines end with LF, CR or CRLF alike: errors name the same line and column, comments end at the line's end", arguments: ["\n", "\r", "\r\n"])
    func lineEnds(newline: String) throws {
        let lines = ["DEFINE SCHEMA", "  // a comment", "  RECORD TYPE Note (", "    title STRING, -- another", "    body TEXT", "  );"]
        let error = try #require(schemaError { try Self.read(lines.joined(separator: newline) + newline) })
        #expect(error.line == 5 && error.column == 10, "\(error)")
        #expect(error.message.contains("\n        body TEXT\n             ^"), "the line alone, with its caret: \(error.message)")
        // A comment does not run on past its line: the type after it is read.
        var good = lines
        good[4] = "    body STRING"
        let schema = try Self.read(good.joined(separator: newline) + newline)
        #expect(schema.recordType("Note")?.fields.map(\.name).sorted() == ["body", "title"], "\(schema)")
    }
}

@Suite("Schema model: equality, stored JSON, validation")
struct SchemaModelTests {
    @Test("equality ignores the order of fields, compound indexes, record types and grants")
    func orderFreeEquality() {
        let a = RecordTypeSchema(recordType: "T", fields: [.init("a", type: .string), .init("b", type: .int64, indexes: .sortable)],
                                 compoundIndexes: [.init(equalityFields: ["a"]), .init(equalityFields: ["b"])], grants: [.world: .read, .creator: .write])
        let b = RecordTypeSchema(recordType: "T", fields: [.init("b", type: .int64, indexes: .sortable), .init("a", type: .string)],
                                 compoundIndexes: [.init(equalityFields: ["b"]), .init(equalityFields: ["a"])], grants: [.creator: .write, .world: .read])
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(ContainerSchema(roles: ["x"], recordTypes: [a, RecordTypeSchema(recordType: "U")]) == ContainerSchema(roles: ["x"], recordTypes: [RecordTypeSchema(recordType: "U"), b]))
        var c = b
        c.fields[0].indexes = .queryable
        #expect(a != c)
        #expect(a != RecordTypeSchema(recordType: "T", fields: a.fields, compoundIndexes: a.compoundIndexes, grants: [.world: .read]))
        #expect(RecordTypeSchema.Field("e", type: .string, isEncrypted: true) != RecordTypeSchema.Field("e", type: .string))
    }

    @Test("a schema stored before grants, encryption and NUMBER decodes, and a plain schema encodes as before")
    func storedJSON() throws {
        let old = #"{"compoundIndexes":[{"equalityFields":["list"],"sortField":"createdAt"}],"fields":[{"indexes":3,"name":"createdAt","type":"TIMESTAMP"}],"recordType":"Todo"}"#
        let decoded = try JSONDecoder().decode(RecordTypeSchema.self, from: Data(old.utf8))
        #expect(decoded.fields == [.init("createdAt", type: .timestamp, indexes: [.queryable, .sortable])])
        #expect(decoded.grants == RecordTypeSchema.publicDatabaseGrants && decoded.compoundIndexes.count == 1, "stored without grants: CloudKit's defaults")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(String(decoding: try encoder.encode(decoded), as: UTF8.self) == old)

        var grantingNothing = decoded
        grantingNothing.grants = [:]
        let grantingNothingJSON = String(decoding: try encoder.encode(grantingNothing), as: UTF8.self)
        #expect(grantingNothingJSON.contains(#""grants":{}"#), "\(grantingNothingJSON)")
        #expect(try JSONDecoder().decode(RecordTypeSchema.self, from: Data(grantingNothingJSON.utf8)).grants.isEmpty)

        var full = decoded
        full.grants = [:]
        full.addField("secret", type: .bytes, isEncrypted: true)
        full.fields.append(.init("amount", type: .double, isNumber: true))
        full.grant([.read, .write], to: "editor")
        full.grant(.read, to: .world)
        let json = String(decoding: try encoder.encode(full), as: UTF8.self)
        #expect(json.contains(#""grants":{"_world":1,"editor":5}"#) && json.contains(#""isEncrypted":true"#) && json.contains(#""isNumber":true"#), "\(json)")
        #expect(try JSONDecoder().decode(RecordTypeSchema.self, from: Data(json.utf8)) == full)

        var container = ContainerSchema(roles: ["b", "a"], recordTypes: [full])
        container.includeUsersRecordType()
        let containerJSON = try encoder.encode(container)
        #expect(String(decoding: containerJSON, as: UTF8.self).hasPrefix(#"{"recordTypes":["#) && String(decoding: containerJSON, as: UTF8.self).contains(#""roles":["a","b"]"#))
        #expect(try JSONDecoder().decode(ContainerSchema.self, from: containerJSON) == container)
    }

    @Test("validation: encryption, NUMBER, system field declarations, roles and grants")
    func validation() throws {
        func invalid(_ fields: [RecordTypeSchema.Field], _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(throws: StratusError.self, "\(label)", sourceLocation: sourceLocation) { try RecordTypeSchema(recordType: "T", fields: fields).validate() }
        }
        invalid([.init("e", type: .string, indexes: .queryable, isEncrypted: true)], "encrypted with an index")
        invalid([.init("e", type: .reference, isEncrypted: true)], "encrypted reference")
        invalid([.init("e", type: .assetList, isEncrypted: true)], "encrypted asset list")
        invalid([.init("n", type: .string, isNumber: true)], "NUMBER preferred as STRING")
        // What the schema language cannot write is refused, so that every schema exports to a file that reads back.
        invalid([.init("n", type: .int64, isEncrypted: true, isNumber: true)], "an encrypted NUMBER")
        invalid([.init("n", type: .doubleList, isEncrypted: true, isNumber: true, namesPreferredType: false)], "an encrypted bare NUMBER list")
        // Grants that permit nothing are no grants: written without GRANT lines, read back equal.
        let permitsNothing = RecordTypeSchema(recordType: "T", grants: [SecurityRole("editor"): [], .world: []])
        try permitsNothing.validate()
        #expect(permitsNothing == RecordTypeSchema(recordType: "T", grants: [:]))
        #expect(try SchemaReader().read(SchemaWriter().text(for: ContainerSchema(roles: ["editor"], recordTypes: [permitsNothing]))).recordType("T") == permitsNothing)
        try RecordTypeSchema(recordType: "T", grants: [SecurityRole("editor"): [], .world: .read]).validate()
        // A bare NUMBER has one form, whatever placeholder type it is given.
        #expect(RecordTypeSchema.Field("n", type: .double, isNumber: true, namesPreferredType: false)
                == RecordTypeSchema.Field("n", type: .int64, isNumber: true, namesPreferredType: false))
        #expect(RecordTypeSchema.Field("l", type: .doubleList, isNumber: true, namesPreferredType: false).type == .int64List)
        #expect(RecordTypeSchema.Field("d", type: .double, isNumber: true).type == .double, "a named preference stays")
        invalid([.init("creatorUserRecordID", type: .string, indexes: .queryable)], "creator as a STRING")
        invalid([.init("lastModifiedUserRecordID", type: .reference, indexes: .searchable)], "modifier searchable")
        invalid([.init("recordChangeTag", type: .string)], "the change tag")
        try RecordTypeSchema(recordType: "T", fields: [.init("creatorUserRecordID", type: .reference, indexes: [.queryable, .sortable]),
                                                       .init("n", type: .doubleList, isNumber: true), .init("e", type: .locationList, isEncrypted: true)]).validate()

        #expect(throws: StratusError.self) { try ContainerSchema(recordTypes: [RecordTypeSchema(recordType: "T", grants: ["ghost": .read])]).validate() }
        #expect(throws: StratusError.self) { try ContainerSchema(roles: [.world]).validate() }
        #expect(throws: StratusError.self) { try ContainerSchema(roles: ["_admin"]).validate() }
        #expect(throws: StratusError.self) { try ContainerSchema(roles: ["a\"b"]).validate() }
        #expect(throws: StratusError.self) { try ContainerSchema(recordTypes: [RecordTypeSchema(recordType: "T"), RecordTypeSchema(recordType: "T")]).validate() }
        #expect(throws: StratusError.self) {
            try ContainerSchema(recordTypes: [RecordTypeSchema(recordType: "Users", fields: [.init("roles", type: .stringList)])]).validate()
        }
        try ContainerSchema(roles: ["ghost", "test role"], recordTypes: [RecordTypeSchema(recordType: "T", grants: ["ghost": .read, .world: .read])]).validate()
        // CloudKit's own dotted types and their dotted fields, which take no index (engines index plain names only).
        try RecordTypeSchema(recordType: "cloudkit.share", fields: [.init("cloudkit.title", type: .string), .init("recordName", type: .string, indexes: .queryable)]).validate()
        #expect(throws: StratusError.self) { try RecordTypeSchema(recordType: "cloudkit.share", fields: [.init("cloudkit.title", type: .string, indexes: .queryable)]).validate() }
        #expect(throws: StratusError.self) { try RecordTypeSchema(recordType: "T", fields: [.init("cloudkit.title", type: .string)]).validate() }
        #expect(throws: StratusError.self) {
            try RecordTypeSchema(recordType: "cloudkit.share", fields: [.init("cloudkit.title", type: .string)], compoundIndexes: [.init(equalityFields: ["cloudkit.title"])]).validate()
        }
        #expect(throws: StratusError.self) { try RecordTypeSchema(recordType: "cloudkit..share").validate() }
        #expect(throws: StratusError.self, "only CloudKit's own types are dotted") { try RecordTypeSchema(recordType: "com.example.Note").validate() }
        #expect(SecurityRole.systemRoles.allSatisfy(\.isSystem) && !SecurityRole("moderator").isSystem)
        #expect(RecordPermissions([.write, .read, .create]).description == "READ, CREATE, WRITE")
    }
}
