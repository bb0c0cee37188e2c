import Foundation
import Stratus
import StratusTransfer
import Testing

/// Real `.ckdb` files published with CloudKit apps, kept next to the repository.
enum SchemaFixtures {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/ckdb")

    static var available: Bool { FileManager.default.fileExists(atPath: directory.path) }

    /// The files CloudKit accepts (the `bad-` ones are real files it refuses).
    static var goodNames: [String] { names.filter { !$0.hasPrefix("bad-") } }
    static var badNames: [String] { names.filter { $0.hasPrefix("bad-") } }

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".ckdb") }.sorted()
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try Data(contentsOf: directory.appendingPathComponent(name)), as: UTF8.self)
    }

    static func read(_ name: String) throws -> ContainerSchema {
        try SchemaReader().read(contentsOf: directory.appendingPathComponent(name))
    }

    /// Record type names declared by a file, found line by line outside the reader: the word
    /// after `RECORD TYPE` at the start of a line.
    static func declaredTypeNames(_ name: String) throws -> Set<String> {
        var names: Set<String> = []
        for line in try text(name).split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count >= 3, words[0] == "RECORD", words[1] == "TYPE" { names.insert(String(words[2])) }
        }
        return names
    }
}

@Suite("Schema language: real .ckdb files", .enabled(if: SchemaFixtures.available))
struct SchemaLanguageTests {
    @Test("every real file imports; writing it and reading that back gives an equal schema")
    func everyFileRoundTrips() throws {
        #expect(SchemaFixtures.goodNames.count >= 5)
        for name in SchemaFixtures.goodNames {
            let schema = try SchemaFixtures.read(name)
            let written = SchemaWriter().text(for: schema)
            let again = try SchemaReader().read(written)
            #expect(again == schema, "\(name)")
            // Equality ignores order; check the parts one by one too, so a failure says where.
            #expect(Set(again.recordTypes.map(\.recordType)) == Set(schema.recordTypes.map(\.recordType)), "\(name)")
            for type in schema.recordTypes {
                let other = try #require(again.recordType(type.recordType), "\(name): \(type.recordType)")
                #expect(Set(other.fields) == Set(type.fields), "\(name): fields, types and indexes of \(type.recordType)")
                #expect(other.grants == type.grants, "\(name): grants of \(type.recordType)")
            }
            #expect(again.roles == schema.roles, "\(name)")
            // The export layout is a fixed point: writing what was read from it changes nothing.
            #expect(SchemaWriter().text(for: again) == written, "\(name)")
        }
    }

    @Test("every real file declares the record types its RECORD TYPE lines name, plus Users")
    func recordTypesMatchTheFile() throws {
        for name in SchemaFixtures.goodNames {
            let schema = try SchemaFixtures.read(name)
            let declared = try SchemaFixtures.declaredTypeNames(name)
            #expect(!declared.isEmpty, "\(name)")
            #expect(Set(schema.recordTypes.map(\.recordType)) == declared.union(["Users"]), "\(name)")
        }
    }

    @Test("an export read and written back is the same file, byte for byte")
    func exportIsReproduced() throws {
        let original = try SchemaFixtures.text("01-Dispatch.ckdb")
        let written = SchemaWriter().text(for: try SchemaFixtures.read("01-Dispatch.ckdb"))
        #expect(written == original)
        if written != original {
            let pairs = zip(written.split(separator: "\n", omittingEmptySubsequences: false), original.split(separator: "\n", omittingEmptySubsequences: false))
            let firstDifference = pairs.enumerated().first { $0.element.0 != $0.element.1 }
            Issue.record("first different line: \(String(describing: firstDifference))")
        }
    }

    @Test("the export's types, fields, system field indexes, roles and grants")
    func dispatchContents() throws {
        let schema = try SchemaFixtures.read("01-Dispatch.ckdb")
        #expect(schema.roles == ["moderator"])
        #expect(schema.recordTypes.count == 10)
        let person = try #require(schema.recordType("CD_PersonEntity"))
        #expect(person.field("CD_alternateNames") == .init("CD_alternateNames", type: .bytes, indexes: [.queryable, .sortable]))
        #expect(person.field("CD_entityName")?.indexes == [.queryable, .searchable, .sortable])
        #expect(person.field("CD_usageCount")?.type == .int64)
        // System fields named without options are implicit and not kept.
        #expect(person.fields.count == 6 && person.fields.allSatisfy { $0.systemField == nil })
        #expect(person.effectiveGrants == RecordTypeSchema.publicDatabaseGrants)

        let flag = try #require(schema.recordType("QuestionFlag"))
        #expect(flag.field("creatorUserRecordID") == .init("creatorUserRecordID", type: .reference, indexes: [.queryable]))
        #expect(flag.field("recordName") == .init("recordName", type: .string, indexes: [.queryable]))
        #expect(flag.field("flaggedAt")?.indexes == [.sortable])
        #expect(flag.grants == [.creator: .read, .authenticated: .create, "moderator": [.read, .write]])

        let catalog = try #require(schema.recordType("CatalogQuestion"))
        #expect(catalog.field("tags")?.type == .stringList)
        #expect(catalog.grants == [.world: .read, "moderator": [.create, .write]])

        let users = try #require(schema.recordType("Users"))
        #expect(users.fields == [.init("roles", type: .int64List)])
        #expect(users.grants == [.creator: .write, .world: .read])
        try schema.validate()
    }

    @Test("hand-written files: comments, quoted names, merged grants, encrypted fields, roles")
    func handWrittenContents() throws {
        let celestra = try SchemaFixtures.read("13-CelestraCloud.ckdb")
        let feed = try #require(celestra.recordType("Feed"))
        #expect(feed.field("recordName")?.indexes == [.queryable])
        #expect(feed.field("title") == .init("title", type: .string, indexes: [.searchable]))
        #expect(feed.field("description")?.type == .string)
        #expect(feed.field("etag")?.type == .string, "a user field named etag is not the system ___etag")
        // GRANT CREATE TO "_icloud" and GRANT WRITE TO "_icloud" are one grant.
        #expect(feed.grants == [.world: .read, .creator: .create, .authenticated: [.create, .write]])
        #expect(celestra.recordType("Users") == ContainerSchema.defaultUsersRecordType, "added, as CloudKit's export would show it")

        let lorvex = try SchemaFixtures.read("06-lorvex.ckdb")
        let entity = try #require(lorvex.recordType("LorvexEntity"))
        #expect(entity.field("payload") == .init("payload", type: .string, isEncrypted: true))
        #expect(entity.grants == [.creator: [.read, .write], .authenticated: .create])
        #expect(lorvex.recordType("Users")?.grants == [.creator: [.read, .write]])

        let apple = try SchemaFixtures.read("20-apple-docs-example.ckdb")
        #expect(apple.roles == ["DeptManager"])
        let department = try #require(apple.recordType("Department"))
        #expect(department.field("creationDate")?.indexes == [.queryable, .sortable])
        #expect(department.field("employees")?.type == .referenceList)
        #expect(department.grants["DeptManager"] == [.read, .create, .write])

        let demo = try SchemaFixtures.read("15-MistKit-MistDemo.ckdb")
        #expect(demo.recordType("Note")?.field("image")?.type == .asset)
        #expect(demo.recordType("Note")?.field("index")?.indexes == [.queryable, .sortable])
    }

    @Test("the real malformed file is refused at its first problem, with line, column and a caret")
    func badFileRefused() throws {
        #expect(!SchemaFixtures.badNames.isEmpty)
        let name = "bad-06-real-mistkit-celestra-draft.ckdb"
        let error = try #require(schemaError { try SchemaFixtures.read(name) })
        #expect(error.code == .invalidArguments && error.line == 1 && error.column == 1)
        #expect(error.message.hasPrefix("1:1: expected DEFINE SCHEMA"), "\(error.message)")
        #expect(error.message.contains("\n    RECORD TYPE PublicFeed (\n    ^"), "\(error.message)")

        // With the header it lacks, the next problem is its "__recordID" (two underscores).
        let fixed = try #require(schemaError { try SchemaReader().read("DEFINE SCHEMA\n" + SchemaFixtures.text(name)) })
        #expect(fixed.line == 3 && fixed.column == 5, "\(fixed)")
        #expect(fixed.message.contains("\"__recordID\" is not a system field"), "\(fixed.message)")
    }
}

/// The error `body` throws, as a ``StratusError``; `nil` when it throws none.
func schemaError<T>(_ body: () throws -> T) -> StratusError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? StratusError
    }
}
