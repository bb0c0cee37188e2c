import Foundation
import Stratus
import Testing

extension EngineConformance {
    static let roundTripCases: [TestCase] = [
        TestCase("every field kind round-trips exactly", everyFieldKindRoundTrips),
        TestCase("Int64 2 and Double 2.0 stay distinct; Int and Bool are stored as Int64", numbersKeepTheirType),
        TestCase("dates keep sub-second precision", datesKeepPrecision),
        TestCase("strings keep Unicode and escapes", stringsRoundTrip),
        TestCase("large bytes round-trip", largeBytesRoundTrip),
        TestCase("references keep their actions", referencesKeepActions),
        TestCase("locations keep every property", locationsKeepEveryProperty),
        TestCase("assets are copied into the store", assetsAreCopiedIntoTheStore),
    ]

    /// Checks that `actual` holds exactly `expected` (same keys, same values, same bits).
    static func expectSameFields(_ actual: Record, _ expected: [String: FieldValue], _ context: String) {
        #expect(actual.allKeys() == expected.keys.sorted(), "\(context): keys")
        for (key, value) in expected {
            let got = actual.fieldValue(forKey: key)
            #expect(got == value, "\(context): field '\(key)'")
            switch (got, value) {
            case (.double(let a)?, .double(let b)):
                #expect(a.bitPattern == b.bitPattern, "\(context): field '\(key)' bits")
            case (.doubleList(let a)?, .doubleList(let b)):
                #expect(a.map(\.bitPattern) == b.map(\.bitPattern), "\(context): field '\(key)' bits")
            case (.string(let a)?, .string(let b)):
                #expect(Array(a.unicodeScalars) == Array(b.unicodeScalars), "\(context): field '\(key)' scalars")
            case (.stringList(let a)?, .stringList(let b)):
                #expect(a.map { Array($0.unicodeScalars) } == b.map { Array($0.unicodeScalars) }, "\(context): field '\(key)' scalars")
            case (.date(let a)?, .date(let b)):
                #expect(a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern, "\(context): field '\(key)' date bits")
            default: break
            }
        }
    }

    /// Saves `fields` in a new record, then checks the saved and the fetched record hold them exactly.
    static func roundTrip(_ env: Environment, _ name: String, _ fields: [String: FieldValue]) async throws {
        let database = env.container().publicCloudDatabase
        let record = makeRecord("Kinds", name, fields)
        let saved = try await database.save(record)
        expectSameFields(saved, fields, "saved \(name)")
        let fetched = try await database.record(for: record.recordID)
        expectSameFields(fetched, fields, "fetched \(name)")
        #expect(fetched.recordType == "Kinds")
        #expect(fetched.recordID == record.recordID)
    }

    static func everyFieldKindRoundTrips(_ env: Environment) async throws {
        let fields = everyNonAssetFieldValue()
        // Every non-asset type and every list type must be present.
        let types = Set(fields.values.map(\.type))
        #expect(types == Set(FieldType.allCases).subtracting([.asset]))
        try await roundTrip(env, "every-kind", fields)
        // Each value alone too, so that one value cannot hide another's problem.
        for (index, key) in fields.keys.sorted().enumerated() {
            try await roundTrip(env, "single-\(index)", [key: fields[key]!])
        }
    }

    static func numbersKeepTheirType(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let record = Record(recordType: "Numbers", recordID: Record.ID(recordName: "numbers"))
        record["integer"] = Int64(2)
        record["double"] = 2.0
        record["fromInt"] = 7
        record["fromBool"] = true
        record["fromFalse"] = false
        record["fromInt32"] = Int32(-3)
        record["intList"] = [2, 3]
        record["boolList"] = [true, false]
        record["doubleList"] = [2.0, 3.0]
        record["wholeDouble"] = 1e15
        #expect(record.fieldValue(forKey: "fromInt") == .int64(7))
        #expect(record.fieldValue(forKey: "fromBool") == .int64(1))
        try await database.save(record)
        let fetched = try await database.record(for: record.recordID)
        #expect(fetched.fieldValue(forKey: "integer") == .int64(2))
        #expect(fetched.fieldValue(forKey: "double") == .double(2.0))
        #expect(fetched["integer"] is Int64)
        #expect(fetched["double"] is Double)
        // Read untyped, numbers convert as CloudKit's NSNumbers do; the stored types stay exact (above).
        #expect(fetched["integer"] as? Double == 2.0)
        #expect(fetched["double"] as? Int64 == 2)
        #expect(fetched.fieldValue(forKey: "fromInt") == .int64(7))
        #expect(fetched.fieldValue(forKey: "fromBool") == .int64(1))
        #expect(fetched.fieldValue(forKey: "fromFalse") == .int64(0))
        #expect(fetched.fieldValue(forKey: "fromInt32") == .int64(-3))
        #expect(fetched["fromBool"] as? Int64 == 1)
        #expect(fetched.fieldValue(forKey: "intList") == .int64List([2, 3]))
        #expect(fetched.fieldValue(forKey: "boolList") == .int64List([1, 0]))
        #expect(fetched.fieldValue(forKey: "doubleList") == .doubleList([2.0, 3.0]))
        #expect(fetched.fieldValue(forKey: "wholeDouble") == .double(1e15))
        #expect(fetched.fieldValue(forKey: "wholeDouble")?.type == .double)
    }

    static func datesKeepPrecision(_ env: Environment) async throws {
        var fields: [String: FieldValue] = [:]
        for (index, date) in preciseDates.enumerated() { fields["date\(index)"] = .date(date) }
        fields["now"] = .date(Date())
        fields["dates"] = .dateList(preciseDates + [Date()])
        try await roundTrip(env, "dates", fields)
        let fetched = try await env.container().publicCloudDatabase.record(for: Record.ID(recordName: "dates"))
        // Never a number instead of a date.
        #expect(fetched["date0"] is Date)
        #expect(fetched.fieldValue(forKey: "date0")?.type == .timestamp)
    }

    static func stringsRoundTrip(_ env: Environment) async throws {
        var fields: [String: FieldValue] = [:]
        for (index, text) in trickyStrings.enumerated() { fields["s\(index)"] = .string(text) }
        fields["all"] = .stringList(trickyStrings)
        fields["long"] = .string(String(repeating: "long text ü ", count: 20_000))
        // Many U+0000 and U+0001, which PostgreSQL's documents write otherwise, in one value.
        fields["controls"] = .string(String(repeating: "\u{0}\u{1}a", count: 100_000))
        try await roundTrip(env, "strings", fields)
    }

    static func largeBytesRoundTrip(_ env: Environment) async throws {
        let big = patternBytes(count: 700_000, seed: 7)
        try await roundTrip(env, "bytes", [
            "big": .bytes(big),
            "parts": .bytesList([patternBytes(count: 100_000, seed: 1), Data(), patternBytes(count: 3, seed: 2)]),
        ])
    }

    static func referencesKeepActions(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Target", "t1"), makeRecord("Target", "t2")], in: database)
        try await roundTrip(env, "refs", [
            "none": .reference(reference("t1", .none)),
            "cascade": .reference(reference("t2", .deleteSelf)),
            "dangling": .reference(reference("never-saved", .none)),
            "list": .referenceList([reference("t1", .deleteSelf), reference("t2", .none), reference("t1", .none)]),
        ])
        let fetched = try await database.record(for: Record.ID(recordName: "refs"))
        let none = fetched["none"] as? Record.Reference
        let cascade = fetched["cascade"] as? Record.Reference
        #expect(none?.action == Record.ReferenceAction.none)
        #expect(cascade?.action == .deleteSelf)
        #expect(cascade?.recordID == Record.ID(recordName: "t2"))
        #expect((fetched["list"] as? [Record.Reference])?.map(\.action) == [.deleteSelf, .none, .none])
    }

    static func locationsKeepEveryProperty(_ env: Environment) async throws {
        let odd = Location(
            latitude: -89.999_999_9, longitude: 179.999_999_9, altitude: -412.5, horizontalAccuracy: -1,
            verticalAccuracy: 0.001, course: 0, speed: 0.000_1, timestamp: preciseDates[2])
        try await roundTrip(env, "places", [
            "place": .location(fullLocation()),
            "odd": .location(odd),
            "defaults": .location(Location(latitude: 1, longitude: 2)),
            "trail": .locationList([fullLocation(0.25), odd, fullLocation(3)]),
        ])
        let fetched = try await env.container().publicCloudDatabase.record(for: Record.ID(recordName: "places"))
        let place = fetched["place"] as? Location
        let expected = fullLocation()
        #expect(place?.latitude == expected.latitude)
        #expect(place?.longitude == expected.longitude)
        #expect(place?.altitude == expected.altitude)
        #expect(place?.horizontalAccuracy == expected.horizontalAccuracy)
        #expect(place?.verticalAccuracy == expected.verticalAccuracy)
        #expect(place?.course == expected.course)
        #expect(place?.speed == expected.speed)
        #expect(place?.timestamp == expected.timestamp)
    }

    static func assetsAreCopiedIntoTheStore(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let photo = patternBytes(count: 300_000, seed: 3)
        let small = patternBytes(count: 10, seed: 4)
        let empty = Data()
        let photoURL = try env.store.writeFile("sources/photo.jpg", photo)
        let smallURL = try env.store.writeFile("sources/small.bin", small)
        let emptyURL = try env.store.writeFile("sources/empty.bin", empty)

        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "note-1"))
        record["title"] = "with pictures"
        record["image"] = Asset(fileURL: photoURL)
        record["attachments"] = [Asset(fileURL: smallURL), Asset(fileURL: emptyURL)]
        let saved = try await database.save(record)

        func expectContent(_ asset: Asset?, _ bytes: Data, _ context: String) {
            guard let url = asset?.fileURL else {
                Issue.record("\(context): the asset has no file URL")
                return
            }
            #expect(url.standardizedFileURL.path != photoURL.standardizedFileURL.path, "\(context): the asset must point into the store, not at the source file")
            #expect(url.standardizedFileURL.path != smallURL.standardizedFileURL.path, "\(context): the asset must point into the store")
            #expect(FileManager.default.contents(atPath: url.path) == bytes, "\(context): asset bytes")
            if let size = asset?.size { #expect(size == Int64(bytes.count), "\(context): asset size") }
        }
        expectContent(saved["image"] as? Asset, photo, "saved image")
        expectContent((saved["attachments"] as? [Asset])?.first, small, "saved attachment 0")

        // The originals go away; the store still has the bytes.
        for url in [photoURL, smallURL, emptyURL] { try FileManager.default.removeItem(at: url) }
        let fetched = try await database.record(for: record.recordID)
        expectContent(fetched["image"] as? Asset, photo, "fetched image")
        let attachments = fetched["attachments"] as? [Asset]
        #expect(attachments?.count == 2)
        expectContent(attachments?.first, small, "fetched attachment 0")
        expectContent(attachments?.last, empty, "fetched attachment 1")
        #expect(fetched["title"] as? String == "with pictures")

        // Saving the fetched record again (another field changed) keeps the assets readable.
        fetched["title"] = "renamed"
        let resaved = try await database.save(fetched)
        expectContent(resaved["image"] as? Asset, photo, "re-saved image")
        let refetched = try await database.record(for: record.recordID)
        expectContent(refetched["image"] as? Asset, photo, "re-fetched image")
        #expect(refetched["title"] as? String == "renamed")

        // An asset whose file does not exist fails that record alone, with assetFileNotFound.
        let missing = Record(recordType: "Note", recordID: Record.ID(recordName: "note-missing-file"))
        missing["image"] = Asset(fileURL: env.store.url("sources/does-not-exist.jpg"))
        let results = try await database.modifyRecords(saving: [missing], deleting: [])
        #expect(errorCode(results.saveResults[missing.recordID]) == .assetFileNotFound)
        #expect(try await TestDatabase.exists("note-missing-file", in: database) == false)
    }
}
