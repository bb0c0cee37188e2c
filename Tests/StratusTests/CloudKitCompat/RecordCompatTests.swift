import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Records as CloudKit's: untyped values, key-value coding, identity")
struct RecordCompatTests {
    @Test("integers read as CloudKit's NSNumbers: as? Int, Int64, Int32, Double, Float; Bool only for 0 and 1")
    func integerBridging() {
        let record = Record(recordType: "Item")
        record["count"] = 2
        record["one"] = Int64(1)
        record["zero"] = 0
        record["largest"] = Int64.max
        #expect(record["count"] as? Int == 2)
        #expect(record["count"] as? Int64 == 2)
        #expect(record["count"] as? Int32 == 2)
        #expect(record["count"] as? Double == 2.0)
        #expect(record["count"] as? Float == 2.0)
        #expect(record["count"] as? Bool == nil, "an INT64 2 is no Bool, as with NSNumber")
        #expect(record["count"] as? String == nil)
        #expect(record["one"] as? Bool == true)
        #expect(record["zero"] as? Bool == false)
        #expect(record["largest"] as? Int64 == .max)
        #expect(record["largest"] as? Double == nil, "Int64.max has no exact Double")
        #expect(record["count"] is NSNumber)
        #expect(record.fieldValue(forKey: "count") == .int64(2), "stored exactly as INT64")
    }

    @Test("a value read by type reads as the cast of its NSNumber does, for every pairing of stored and asked type")
    func typedReadsAgreeWithCasts() {
        let record = Record(recordType: "Item")
        let values: [String: any RecordValueProtocol] = ["int": Int64(2), "big": Int64.max, "double": 2.5, "whole": 2.0, "negativeZero": -0.0, "text": "hi", "bool": true]
        for (key, value) in values { record[key] = value }
        for key in values.keys {
            let asDouble: Double? = record[key], asInt64: Int64? = record[key], asString: String? = record[key], asInt: Int? = record[key]
            #expect(asDouble?.bitPattern == (record[key] as? Double)?.bitPattern, "\(key) as Double")
            #expect(asInt64 == record[key] as? Int64, "\(key) as Int64")
            #expect(asString == record[key] as? String, "\(key) as String")
            #expect(asInt == record[key] as? Int, "\(key) as Int")
        }
        let negativeZero: Double? = record["negativeZero"]
        #expect(negativeZero?.sign == .minus)
    }

    @Test("doubles read as NSNumbers: as? Double, Float; as? Int only when whole")
    func doubleBridging() {
        let record = Record(recordType: "Item")
        record["price"] = 2.5
        record["whole"] = 2.0
        #expect(record["price"] as? Double == 2.5)
        #expect(record["price"] as? Float == 2.5)
        #expect(record["price"] as? Int == nil)
        #expect(record["price"] as? Bool == nil)
        #expect(record["whole"] as? Int == 2)
        #expect(record["whole"] as? Int64 == 2)
        #expect(record.fieldValue(forKey: "whole") == .double(2.0), "stored exactly as DOUBLE")
    }

    @Test("Bool is stored as INT64 and reads back as true or false")
    func booleans() {
        let record = Record(recordType: "Todo")
        record["checked"] = true
        record["archived"] = false
        #expect(record.fieldValue(forKey: "checked") == .int64(1))
        #expect(record["checked"] as? Bool == true)
        #expect(record["archived"] as? Bool == false)
        #expect(record["checked"] as? Int == 1)
    }

    @Test("lists of numbers read as [NSNumber]: as? [Int], [Int64], [Double]")
    func numberLists() {
        let record = Record(recordType: "Item")
        record["counts"] = [1, 2, 3]
        record["ratios"] = [0.5, 1.5]
        #expect(record["counts"] as? [Int] == [1, 2, 3])
        #expect(record["counts"] as? [Int64] == [1, 2, 3])
        #expect(record["counts"] as? [Double] == [1.0, 2.0, 3.0])
        #expect(record["ratios"] as? [Double] == [0.5, 1.5])
        #expect(record["ratios"] as? [Int] == nil)
        #expect(record.fieldValue(forKey: "counts") == .int64List([1, 2, 3]))
        #expect(record.fieldValue(forKey: "ratios") == .doubleList([0.5, 1.5]))
    }

    @Test("a value read untyped and stored again keeps its exact type")
    func copyingValuesKeepsTypes() {
        let source = Record(recordType: "Item")
        source["integer"] = Int64(2)
        source["double"] = 2.0
        source["integers"] = [Int64(1), 2]
        let target = Record(recordType: "Item")
        for key in source.allKeys() { target[key] = source[key] }
        #expect(target.fieldValue(forKey: "integer") == .int64(2))
        #expect(target.fieldValue(forKey: "double") == .double(2.0))
        #expect(target.fieldValue(forKey: "integers") == .int64List([1, 2]))
        target["fromNumber"] = NSNumber(value: 2.0)
        target["fromBoolNumber"] = NSNumber(value: true)
        #expect(target.fieldValue(forKey: "fromNumber") == .double(2.0))
        #expect(target.fieldValue(forKey: "fromBoolNumber") == .int64(1))
    }

    @Test("numbers round-trip through a store exactly and read back as NSNumbers")
    func storedNumbers() async throws {
        try await SQLiteFixture.with { fixture in
            let record = Record(recordType: "Item", recordID: Record.ID(recordName: "numbers"))
            record["count"] = 2
            record["price"] = 2.0
            record["done"] = true
            try await fixture.database.save(record)
            let fetched = try await fixture.database.record(for: record.recordID)
            #expect(fetched.fieldValue(forKey: "count") == .int64(2))
            #expect(fetched.fieldValue(forKey: "price") == .double(2.0))
            #expect(fetched["count"] as? Int == 2)
            #expect(fetched["price"] as? Double == 2.0)
            #expect(fetched["done"] as? Bool == true)
        }
    }

    @Test("the typed subscript converts as as? does")
    func typedSubscript() {
        let record = Record(recordType: "Note")
        record["title"] = "Milk"
        record["count"] = 3
        let title: String? = record["title"]
        let count: Int? = record["count"]
        let ratio: Double? = record["count"]
        let wrong: String? = record["count"]
        let missing: Date? = record["missing"]
        #expect(title == "Milk")
        #expect(count == 3)
        #expect(ratio == 3.0)
        #expect(wrong == nil)
        #expect(missing == nil)
        let date = Date(timeIntervalSinceReferenceDate: 1000)
        record["when"] = date
        let when: Date? = record["when"]
        #expect(when == date)
    }

    @Test("object(forKey:), setObject(_:forKey:), value(forKey:) and setValue(_:forKey:) take and give plain values")
    func keyValueCoding() {
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1"))
        record.setObject("Milk" as RecordValue, forKey: "title")
        #expect(record.object(forKey: "title") as? String == "Milk")
        record.setValue("Bread", forKey: "title")
        #expect(record.value(forKey: "title") as! String == "Bread")
        record.setValue(3, forKey: "count")
        #expect(record.value(forKey: "count") as? Int == 3)
        record.setValue(NSString(string: "ns"), forKey: "nsString")
        #expect(record["nsString"] as? String == "ns")
        record.setValue(["a", "b"], forKey: "tags")
        #expect(record.fieldValue(forKey: "tags") == .stringList(["a", "b"]))
        record.setValue([NSNumber(value: 1), NSNumber(value: 2)], forKey: "numbers")
        #expect(record.fieldValue(forKey: "numbers") == .int64List([1, 2]))
        record.setValuesForKeys(["a": 1, "b": "two", "c": 3.5])
        #expect(record.fieldValue(forKey: "a") == .int64(1))
        #expect(record.fieldValue(forKey: "b") == .string("two"))
        #expect(record.fieldValue(forKey: "c") == .double(3.5))
        record.setValue(nil, forKey: "a")
        record.setValue(NSNull(), forKey: "b")
        #expect(record["a"] == nil && record["b"] == nil)
        #expect(record.value(forKey: "recordID") as? Record.ID == record.recordID)
        #expect(record.value(forKey: "recordType") as? String == "Note")
        #expect(record.changedKeys().contains("title"))
    }

    @Test("optionals held in Any, as a dictionary built from optional properties holds them: a value is stored, an empty one removes the field")
    func keyValueCodingOfOptionalsInAny() {
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1"))
        record["note"] = "old"
        let note: String? = nil
        let title: String? = "Milk"
        let count: Int?? = 2
        let tags: [String]? = ["a", "b"]
        record.setValuesForKeys(["note": note as Any, "title": title as Any, "count": count as Any, "tags": tags as Any])
        #expect(record["note"] == nil)
        #expect(record.fieldValue(forKey: "title") == .string("Milk"))
        #expect(record.fieldValue(forKey: "count") == .int64(2))
        #expect(record.fieldValue(forKey: "tags") == .stringList(["a", "b"]))
        let elements: [Any] = [Optional("x") as Any, "y"]
        record.setValue(elements, forKey: "letters")
        #expect(record.fieldValue(forKey: "letters") == .stringList(["x", "y"]))
        // `parent` given a reference is the record's parent, as CKRecord's key-value coding finds
        // the property; given another value, it is the field a schema may declare.
        let folder = Record.Reference(recordID: Record.ID(recordName: "folder"), action: .none)
        record.setValue(folder, forKey: "parent")
        #expect(record.parent == folder && record.fieldValue(forKey: "parent") == nil)
        record.setValue("Project X", forKey: "parent")
        #expect(record.fieldValue(forKey: "parent") == .string("Project X") && record.parent == folder)
        record.setValue(NSNull(), forKey: Record.SystemFieldKey.parent)
        #expect(record.parent == nil && record.fieldValue(forKey: "parent") == .string("Project X"))
    }

    @Test("equality is identity, as NSObject's; copy() gives an equal-valued, distinct record")
    func identityAndCopy() {
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "same"))
        record["title"] = "Milk"
        let twin = Record(recordType: "Note", recordID: Record.ID(recordName: "same"))
        twin["title"] = "Milk"
        #expect(record == record)
        #expect(record != twin, "two records with the same ID and values are different objects")
        #expect(Set([record, twin, record]).count == 2)
        let copy = record.copy() as! Record
        #expect(copy !== record)
        #expect(copy.recordID == record.recordID)
        #expect(copy["title"] as? String == "Milk")
        #expect(copy.changedKeys() == record.changedKeys())
        copy["title"] = "Bread"
        #expect(record["title"] as? String == "Milk")
    }

    @Test("setParent with a record or an ID sets the parent reference; Reference.Action names the actions")
    func parents() {
        let book = Record(recordType: "Book", recordID: Record.ID(recordName: "book"))
        let page = Record(recordType: "Page")
        page.setParent(book)
        #expect(page.parent?.recordID == book.recordID)
        #expect(page.parent?.action == Record.Reference.Action.none)
        page.setParent(nil as Record.ID?)
        #expect(page.parent == nil)
        page.setParent(book.recordID)
        #expect(page.parent?.recordID.recordName == "book")
        let reference = Record.Reference(recordID: book.recordID, action: .deleteSelf)
        #expect(reference.action == Record.Reference.Action.deleteSelf)
    }

    @Test("small names: RecordZone.default(), QueryPredicate(value:), CurrentUserDefaultName, Location.coordinate")
    func smallNames() throws {
        #expect(RecordZone.default().zoneID == RecordZone.ID.default)
        #expect(RecordZone.default().capabilities == [.fetchChanges], "no atomic capability, as CloudKit's default zone")
        #expect(QueryPredicate(value: true) == (try QueryPredicate(format: "TRUEPREDICATE")))
        #expect(QueryPredicate(value: false) == (try QueryPredicate(format: "FALSEPREDICATE")))
        #expect(RecordZone.ID(zoneName: "Z", ownerName: CurrentUserDefaultName) == RecordZone.ID(zoneName: "Z"))
        #expect(RecordZoneDefaultName == "_defaultZone")
        let place = Location(coordinate: LocationCoordinate2D(latitude: 52.52, longitude: 13.405), altitude: 34,
                             horizontalAccuracy: 5, verticalAccuracy: 10, timestamp: Date(timeIntervalSinceReferenceDate: 0))
        #expect(place.coordinate.latitude == 52.52 && place.coordinate.longitude == 13.405)
        #expect(place.altitude == 34)
        #expect(LocationCoordinate2DIsValid(LocationCoordinate2DMake(52.52, 13.405)))
        #expect(!LocationCoordinate2DIsValid(LocationCoordinate2DMake(91, 0)))
    }

    @Test("numbers read from records, and NSNumbers, work as predicate arguments")
    func numbersAsArguments() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(4), in: fixture.database)
            let two = try await fixture.database.record(for: Record.ID(recordName: "item-00002"))
            let threshold = try #require(two["n"])
            let fromRecord = try await fixture.database.records(matching: Query(recordType: "Item", predicate: try QueryPredicate(format: "n >= %@", threshold)))
            #expect(fromRecord.matchResults.map(\.0.recordName).sorted() == ["item-00002", "item-00003"])
            let fromNumber = try await fixture.database.records(matching: Query(recordType: "Item", predicate: try QueryPredicate(format: "n < %@", NSNumber(value: 1.5))))
            #expect(fromNumber.matchResults.map(\.0.recordName).sorted() == ["item-00000", "item-00001"])
        }
    }

    @Test("the pre-Swift 4.2 CloudKit names, with the prefix dropped, name Stratus's types")
    func olderNames() {
        let id: RecordID = RecordID(recordName: "a", zoneID: RecordZoneID(zoneName: "Z"))
        let reference = Reference(recordID: id, action: ReferenceAction.deleteSelf)
        let policy: RecordSavePolicy = .changedKeys
        #expect(reference.recordID == Record.ID(recordName: "a", zoneID: RecordZone.ID(zoneName: "Z")))
        #expect(policy == ModifyRecordsOperation.RecordSavePolicy.changedKeys)
        #expect(RecordZone.default().zoneID == RecordZone.default.zoneID)
    }

    @Test("QueryPredicate(value:) queries every record or none")
    func valuePredicates() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(3), in: fixture.database)
            let all = try await fixture.database.records(matching: Query(recordType: "Item", predicate: QueryPredicate(value: true)))
            let none = try await fixture.database.records(matching: Query(recordType: "Item", predicate: QueryPredicate(value: false)))
            #expect(all.matchResults.count == 3)
            #expect(none.matchResults.isEmpty)
        }
    }
}
