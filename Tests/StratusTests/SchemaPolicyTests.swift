import Foundation
import Stratus
import Testing

/// The schema and identity rules that need no store: user record names, directory entries,
/// schema differences and what deploying allows.
@Suite("Schema, environment and identity rules")
struct SchemaPolicyTests {
    @Test("SHA-256 gives the standard digests (FIPS 180-4 examples, empty and multi-block input)")
    func sha256Vectors() {
        #expect(SHA256Hasher.digest(Array("abc".utf8)).hexadecimal == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Hasher.digest([]).hexadecimal == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Hasher.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)).hexadecimal == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256Hasher.digest([UInt8](repeating: UInt8(ascii: "a"), count: 1_000)).hexadecimal == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test("a login's user record name is _ and the first 128 bits of SHA-256 of container, NUL, login")
    func derivedRecordNames() {
        let alice = UserDirectoryEntry.derivedRecordName(containerIdentifier: "com.example.todo", login: "alice")
        #expect(alice == "_36e7614dafc1691e500e6e80e862dc9b")
        #expect(UserDirectoryEntry.isUserRecordName(alice))
        #expect(UserDirectoryEntry.derivedRecordName(containerIdentifier: "com.example.todo", login: "bob") != alice)
        #expect(UserDirectoryEntry.derivedRecordName(containerIdentifier: "com.example.other", login: "alice") != alice)
        // The separator keeps "a" + "bc" and "ab" + "c" apart.
        #expect(UserDirectoryEntry.derivedRecordName(containerIdentifier: "a", login: "bc") != UserDirectoryEntry.derivedRecordName(containerIdentifier: "ab", login: "c"))
        for name in ["_36E7614DAFC1691E500E6E80E862DC9B", "36e7614dafc1691e500e6e80e862dc9b", "_36e7614dafc1691e500e6e80e862dc9", "__defaultOwner__", "alice"] {
            #expect(!UserDirectoryEntry.isUserRecordName(name), "\(name)")
        }
    }

    @Test("directory entries: logins, record names and roles are checked")
    func directoryEntries() throws {
        try UserDirectoryEntry(login: "carol", userRecordName: "_0123456789abcdef0123456789abcdef", roles: ["moderator"]).validate()
        try UserDirectoryEntry(login: "a user@example.com", userRecordName: "_imported").validate()
        let bad: [(UserDirectoryEntry, String)] = [
            (UserDirectoryEntry(login: "", userRecordName: "_x"), "empty"),
            (UserDirectoryEntry(login: "tab\there", userRecordName: "_x"), "control character"),
            (UserDirectoryEntry(login: "carol", userRecordName: "plain"), "'_'"),
            (UserDirectoryEntry(login: "carol", userRecordName: "_b\u{E4}d"), "record name"),
            (UserDirectoryEntry(login: "carol", userRecordName: "_x", roles: [.authenticated]), "_icloud"),
            (UserDirectoryEntry(login: "carol", userRecordName: "_x", roles: ["_mine"]), "_mine"),
        ]
        for (entry, words) in bad {
            do {
                try entry.validate()
                Issue.record("\(entry) was accepted")
            } catch {
                #expect(error.code == .invalidArguments)
                #expect(error.message.localizedCaseInsensitiveContains(words) || error.message.contains("record name"), "\(error.message)")
            }
        }
        #expect(throws: StratusError.self) { try Container.checkIdentifier("com.example\u{1F}production") }
        #expect(throws: StratusError.self) { try Container.checkIdentifier("") }
        try Container.checkIdentifier("iCloud.com.example.app")
    }

    static func item(_ fields: [RecordTypeSchema.Field], grants: [SecurityRole: RecordPermissions]? = nil) -> RecordTypeSchema {
        RecordTypeSchema(recordType: "Item", fields: fields, grants: grants)
    }

    @Test("changes between schemas: roles, types, fields added, removed, retyped or reindexed, grants")
    func schemaChanges() {
        let before = ContainerSchema(roles: ["editor"], recordTypes: [
            Self.item([.init("title", type: .string, indexes: [.queryable]), .init("rank", type: .int64), .init("old", type: .bytes)]),
            RecordTypeSchema(recordType: "Gone"),
        ])
        let after = ContainerSchema(roles: ["moderator"], recordTypes: [
            Self.item([.init("title", type: .string, indexes: [.queryable, .sortable]), .init("rank", type: .string), .init("new", type: .double)],
                      grants: [.world: .read]),
            RecordTypeSchema(recordType: "Fresh", fields: [.init("n", type: .int64)]),
        ])
        let changes = before.changes(to: after)
        #expect(changes.map(\.description) == [
            "+ ROLE moderator",
            "- ROLE editor",
            "+ RECORD TYPE Fresh",
            "+ Fresh.n INT64",
            "+ Fresh grants _creator: WRITE; _icloud: CREATE; _world: READ",
            "- RECORD TYPE Gone",
            "+ Item.new DOUBLE",
            "- Item.old BYTES",
            "~ Item.rank INT64 -> rank STRING",
            "~ Item.title STRING QUERYABLE -> title STRING QUERYABLE SORTABLE",
            "~ Item grants _creator: WRITE; _icloud: CREATE; _world: READ -> _world: READ",
        ])
        #expect(changes.filter(\.isDestructive).map(\.description) == ["- RECORD TYPE Gone", "- Item.old BYTES", "~ Item.rank INT64 -> rank STRING"])
        #expect(after.changes(to: after).isEmpty)
        // Names that are no plain identifier are quoted, as a schema file must write them.
        #expect(SchemaChange.recordTypeRemoved("cloudkit.share").description == #"- RECORD TYPE "cloudkit.share""#)
        #expect(SchemaChange.roleAdded("test role").description == #"+ ROLE "test role""#)
        #expect(SchemaChange.fieldAdded(recordType: "Grant", RecordTypeSchema.Field("queryable", type: .string)).description == #"+ "Grant"."queryable" STRING"#)

        // Types are written as the schema language writes them, not as record JSON names them.
        let typed = ContainerSchema(recordTypes: [Self.item([
            .init("tags", type: .stringList), .init("photo", type: .asset), .init("photos", type: .assetList),
            .init("secrets", type: .stringList, isEncrypted: true), .init("scores", type: .int64List, isNumber: true),
            .init("counts", type: .int64List, isNumber: true, namesPreferredType: false),
        ])])
        #expect(ContainerSchema(recordTypes: [Self.item([])]).changes(to: typed).map(\.description) == [
            "+ Item.counts LIST<NUMBER>", "+ Item.photo ASSET", "+ Item.photos LIST<ASSET>",
            "+ Item.scores LIST<NUMBER PREFERRED AS INT64>", "+ Item.secrets LIST<ENCRYPTED STRING>", "+ Item.tags LIST<STRING>",
        ])

        // Grants spelled as CloudKit's defaults are the defaults: no change; granting nothing is one.
        #expect(ContainerSchema(recordTypes: [Self.item([])]).changes(to: ContainerSchema(recordTypes: [Self.item([], grants: [:])])).map(\.description)
                == ["~ Item grants _creator: WRITE; _icloud: CREATE; _world: READ -> (none: not usable in the public database)"])
        let spelled = ContainerSchema(recordTypes: [Self.item([], grants: RecordTypeSchema.publicDatabaseGrants)])
        #expect(ContainerSchema(recordTypes: [Self.item([])]).changes(to: spelled).isEmpty)
        #expect(spelled.changes(to: ContainerSchema(recordTypes: [Self.item([])])).isEmpty)
        #expect(ContainerSchema(recordTypes: [Self.item([])]).changes(to: ContainerSchema(recordTypes: [Self.item([], grants: [.world: .read])])).count == 1)

        // System fields are named and typed as a schema file declares them.
        let indexed = ContainerSchema(recordTypes: [
            Self.item([.init("recordName", type: .string, indexes: [.queryable]), .init("creationDate", type: .timestamp, indexes: [.sortable])]),
        ])
        // Every record has them: declaring one, or leaving it out, only changes its indexes.
        #expect(ContainerSchema(recordTypes: [Self.item([])]).changes(to: indexed).map(\.description) == [
            "~ Item.\"___createTime\" TIMESTAMP -> \"___createTime\" TIMESTAMP SORTABLE",
            "~ Item.\"___recordID\" REFERENCE -> \"___recordID\" REFERENCE QUERYABLE",
        ])
        #expect(indexed.changes(to: ContainerSchema(recordTypes: [Self.item([])])).map(\.description) == [
            "~ Item.\"___createTime\" TIMESTAMP SORTABLE -> \"___createTime\" TIMESTAMP",
            "~ Item.\"___recordID\" REFERENCE QUERYABLE -> \"___recordID\" REFERENCE",
        ])
        #expect(!indexed.changes(to: ContainerSchema(recordTypes: [Self.item([])])).contains { $0.isDestructive })
    }

    @Test("deploying keeps every production type and field with its type; indexes, grants and roles may change")
    func deployRules() throws {
        let production = ContainerSchema(roles: ["editor"], recordTypes: [Self.item([.init("title", type: .string, indexes: [.queryable]), .init("n", type: .int64)])])
        // Additions, new indexes, other grants and roles deploy.
        let grown = ContainerSchema(roles: ["moderator"], recordTypes: [
            Self.item([.init("title", type: .string, indexes: [.sortable]), .init("n", type: .int64), .init("more", type: .string)], grants: [.world: .read]),
            RecordTypeSchema(recordType: "Other"),
        ])
        try grown.checkKeeps(production, for: "deploy")
        // A NUMBER's preferred type may be named once, and then stays named (CloudKit: "future
        // definitions must not change that type").
        let bare = ContainerSchema(recordTypes: [Self.item([.init("n", type: .int64, isNumber: true, namesPreferredType: false)])])
        let preferred = ContainerSchema(recordTypes: [Self.item([.init("n", type: .int64, isNumber: true, namesPreferredType: true)])])
        try preferred.checkKeeps(bare, for: "deploy")
        #expect(throws: StratusError.self) { try bare.checkKeeps(preferred, for: "deploy") }
        // A system field's indexes are indexes: a development schema without them keeps what production has.
        var indexedSystem = production
        indexedSystem.recordTypes[0].fields.append(.init("creationDate", type: .timestamp, indexes: [.queryable, .sortable]))
        try production.checkKeeps(indexedSystem, for: "import the schema")
        #expect(indexedSystem.changes(to: production).contains { $0.isDestructive } == false)
        // Removing or retyping does not, and every problem is named.
        let shrunk = ContainerSchema(recordTypes: [Self.item([.init("title", type: .string, isEncrypted: true)])])
        do {
            try shrunk.checkKeeps(production, for: "deploy")
            Issue.record("a destructive deploy was allowed")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains("cannot deploy"))
            #expect(error.message.contains("field 'n' of Item is in production but not in development"), "\(error.message)")
            #expect(error.message.contains("field 'title' of Item is STRING QUERYABLE in production and ENCRYPTED STRING in development"), "\(error.message)")
        }
        #expect(throws: StratusError.self) { try ContainerSchema().checkKeeps(production, for: "deploy") }
        #expect(RecordTypeSchema(recordType: "Item").grants == RecordTypeSchema.publicDatabaseGrants, "a type made without naming grants has CloudKit's public defaults")
        #expect(RecordTypeSchema(recordType: "Users").grants == ContainerSchema.defaultUsersRecordType.grants)
    }
}
