import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Key-value coding over a whole record, as CloudKit apps write it: a record dumped to a
// dictionary (`record.dictionaryWithValues(forKeys: record.allKeys())`, to log it or to build a
// model from it), and a small importer that copies development records into production with
// `newRecord.setValuesForKeys(record.dictionaryWithValues(forKeys: record.allKeys()))`, as
// migration helpers do. The CloudKit original is in the comments.

/// A note built from a record's dictionary, as a tutorial's model type takes one.
struct NoteProfile {
    let title: String
    let pinned: Bool
    let tags: [String]
    let recordID: String

    init?(dictionary: [String: Any]) {
        guard let title = dictionary["title"] as? String, let recordID = dictionary["recordId"] as? String else { return nil }
        self.title = title
        pinned = dictionary["pinned"] as? Bool ?? false
        tags = dictionary["tags"] as? [String] ?? []
        self.recordID = recordID
    }
}

@Suite("A record's values as a dictionary (key-value coding), ported")
struct RecordDictionaryTests {
    // var dictionary = record.dictionaryWithValues(forKeys: record.allKeys())
    // dictionary["recordId"] = record.recordID.recordName
    // let newNote = NoteProfile(dictionary: dictionary)
    @Test("dictionaryWithValues(forKeys:) gives each key's value, NSNull for a missing one, system fields by name", arguments: TestEngine.all)
    func dictionaryOfARecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let record = Record(recordType: "Note")
            record["title"] = "Buy milk"
            record["pinned"] = true
            record["tags"] = ["shop", "home"]
            let saved = try await container.publicCloudDatabase.save(record)

            var dictionary = saved.dictionaryWithValues(forKeys: saved.allKeys())
            #expect(Set(dictionary.keys) == ["title", "pinned", "tags"])
            dictionary["recordId"] = saved.recordID.recordName
            let note = try #require(NoteProfile(dictionary: dictionary))
            #expect(note.title == "Buy milk" && note.pinned && note.tags == ["shop", "home"])
            #expect(note.recordID == saved.recordID.recordName)

            let some = saved.dictionaryWithValues(forKeys: ["title", "missing", "recordChangeTag", "creationDate"])
            #expect(some["missing"] is NSNull)
            #expect(some["recordChangeTag"] as? String == saved.recordChangeTag)
            #expect(some["creationDate"] as? Date == saved.creationDate)
        }
    }

    // for record in records {
    //     let newRecord = CKRecord(recordType: record.recordType)
    //     newRecord.setValuesForKeys(record.dictionaryWithValues(forKeys: record.allKeys()))
    //     self.productionDatabase.save(newRecord) { _, error in … }
    // }
    @Test("a development-to-production importer copies every field with setValuesForKeys(dictionaryWithValues(forKeys:))", arguments: TestEngine.all)
    func migrateToProduction(engine: TestEngine) async throws {
        try await withContainer(on: engine) { development in
            let place = Record(recordType: "Place")
            place["name"] = "Harbour"
            place["visits"] = 12
            place["rating"] = 4.5
            place["opened"] = Date(timeIntervalSince1970: 1_000_000)
            place["where"] = Location(latitude: 59.9, longitude: 10.7)
            place["codes"] = [7, 8, 9]
            place["logo"] = Data([1, 2, 3])
            _ = try await development.publicCloudDatabase.save(place)
            _ = try await development.deploySchema()

            let production = development.container(in: .production)
            let (matches, _) = try await development.publicCloudDatabase.records(matching: Query(recordType: "Place", predicate: QueryPredicate(value: true)))
            let records = try matches.map { try $0.1.get() }
            #expect(records.count == 1)
            var copied: [Record.ID] = []
            for record in records {
                let newRecord = Record(recordType: record.recordType)
                newRecord.setValuesForKeys(record.dictionaryWithValues(forKeys: record.allKeys()))
                copied.append(try await production.publicCloudDatabase.save(newRecord).recordID)
            }

            // Read back by ID: a TRUEPREDICATE query in production needs recordName QUERYABLE
            // there, as CloudKit's famous "Field 'recordName' is not marked queryable" says.
            let copy = try await production.publicCloudDatabase.record(for: try #require(copied.first))
            for key in place.allKeys() {
                #expect(copy.fieldValue(forKey: key) == place.fieldValue(forKey: key), "field \(key)")
            }
            #expect(copy.recordID != place.recordID)
        }
    }
}
