import Foundation
import Stratus
import StratusTestSupport
import Testing

@Suite("Model")
struct ModelTests {
    @Test("JSON extras are values: a changed copy leaves the original alone, emptied extras equal new ones")
    func jsonExtrasAreValues() {
        var original = Record.JSONExtras()
        #expect(original.isEmpty)
        original.members["pluginFields"] = "{}"
        original.absentKeys.insert("created")
        var copy = original
        copy.members["share"] = "null"
        copy.fields["title"] = #"{"value":"a","type":"STRING"}"#
        #expect(original.members == ["pluginFields": "{}"])
        #expect(original.fields.isEmpty)
        #expect(copy.members == ["pluginFields": "{}", "share": "null"])
        #expect(copy.absentKeys == ["created"])
        #expect(copy != original)
        #expect(Set([original, original]).count == 1)

        copy.members = [:]
        copy.fields.removeAll()
        copy.absentKeys.remove("created")
        #expect(copy.isEmpty)
        #expect(copy == Record.JSONExtras())
        #expect(copy.hashValue == Record.JSONExtras().hashValue)
        #expect(!original.isEmpty)

        var owner = Record.JSONExtras()
        owner.ownerRecordName = "_0123"
        #expect(owner.ownerRecordName == "_0123" && !owner.isEmpty)
        owner.ownerRecordName = nil
        #expect(owner.isEmpty)
    }

    @Test("Record.ID defaults to a UUID record name in the default zone")
    func recordIDDefaults() {
        let a = Record.ID()
        let b = Record.ID()
        #expect(UUID(uuidString: a.recordName) != nil)
        #expect(a.recordName != b.recordName)
        #expect(a.zoneID == .default)
        let named = Record.ID(recordName: "todo-1")
        #expect(named.recordName == "todo-1")
        #expect(named == Record.ID(recordName: "todo-1", zoneID: .default))
        let record = Record(recordType: "Todo")
        #expect(UUID(uuidString: record.recordID.recordName) != nil)
        #expect(record.recordID.zoneID == .default)
        let zoned = Record(recordType: "Photo", zoneID: RecordZone.ID(zoneName: "Photos"))
        #expect(zoned.recordID.zoneID.zoneName == "Photos")
    }

    @Test("RecordZone.ID.default is _defaultZone of the current user")
    func defaultZone() {
        #expect(RecordZone.ID.default.zoneName == "_defaultZone")
        #expect(RecordZone.ID.defaultZoneName == "_defaultZone")
        #expect(RecordZone.ID.default.ownerName == RecordZone.ID.currentUserDefaultOwner)
        #expect(RecordZone.ID.default.isDefault)
        #expect(!RecordZone.ID(zoneName: "Photos").isDefault)
        #expect(RecordZone.ID(zoneName: "Photos", ownerName: "bob") != RecordZone.ID(zoneName: "Photos"))
        #expect(RecordZone.default.zoneID == .default)
        #expect(RecordZone(zoneName: "Photos").zoneID == RecordZone.ID(zoneName: "Photos"))
    }

    @Test("subscript values: Int and Bool become Int64, nil removes, lists are typed")
    func subscriptValues() {
        let record = Record(recordType: "T", recordID: Record.ID(recordName: "r"))
        record["int"] = 5
        record["bool"] = true
        record["double"] = 2.0
        record["text"] = "hi"
        record["date"] = Date(timeIntervalSinceReferenceDate: 1.5)
        record["data"] = Data([1, 2])
        record["strings"] = ["a", "b"]
        record["ints"] = [1, 2]
        record["ref"] = Record.Reference(record: record, action: .deleteSelf)
        record["place"] = Location(latitude: 1, longitude: 2)
        #expect(record.fieldValue(forKey: "int") == .int64(5))
        #expect(record.fieldValue(forKey: "bool") == .int64(1))
        #expect(record.fieldValue(forKey: "double") == .double(2))
        #expect(record.fieldValue(forKey: "text") == .string("hi"))
        #expect(record.fieldValue(forKey: "date") == .date(Date(timeIntervalSinceReferenceDate: 1.5)))
        #expect(record.fieldValue(forKey: "data") == .bytes(Data([1, 2])))
        #expect(record.fieldValue(forKey: "strings") == .stringList(["a", "b"]))
        #expect(record.fieldValue(forKey: "ints") == .int64List([1, 2]))
        #expect(record.fieldValue(forKey: "ref") == .reference(Record.Reference(recordID: record.recordID, action: .deleteSelf)))
        #expect(record.fieldValue(forKey: "place")?.type == .location)
        #expect(record["int"] as? Int64 == 5)
        record["int"] = nil
        #expect(record["int"] == nil)
        #expect(!record.allKeys().contains("int"))
        #expect(record.changedKeys().first == "int")
        #expect(FieldType.int64.rawValue == "INT64")
        #expect(FieldType.timestampList.isList)
        #expect(!FieldType.string.isList)
    }

    @Test("StratusError codes are named and numbered as CKError.Code")
    func errorCodes() {
        let expected: [(StratusError.Code, String, Int)] = [
            (.internalError, "internalError", 1), (.partialFailure, "partialFailure", 2),
            (.networkUnavailable, "networkUnavailable", 3), (.networkFailure, "networkFailure", 4),
            (.badContainer, "badContainer", 5), (.serviceUnavailable, "serviceUnavailable", 6),
            (.requestRateLimited, "requestRateLimited", 7), (.notAuthenticated, "notAuthenticated", 9),
            (.permissionFailure, "permissionFailure", 10), (.unknownItem, "unknownItem", 11),
            (.invalidArguments, "invalidArguments", 12), (.serverRecordChanged, "serverRecordChanged", 14),
            (.serverRejectedRequest, "serverRejectedRequest", 15), (.assetFileNotFound, "assetFileNotFound", 16),
            (.assetFileModified, "assetFileModified", 17), (.constraintViolation, "constraintViolation", 19),
            (.operationCancelled, "operationCancelled", 20), (.changeTokenExpired, "changeTokenExpired", 21),
            (.batchRequestFailed, "batchRequestFailed", 22), (.zoneBusy, "zoneBusy", 23),
            (.badDatabase, "badDatabase", 24), (.quotaExceeded, "quotaExceeded", 25),
            (.zoneNotFound, "zoneNotFound", 26), (.limitExceeded, "limitExceeded", 27),
            (.userDeletedZone, "userDeletedZone", 28), (.referenceViolation, "referenceViolation", 31),
            (.assetNotAvailable, "assetNotAvailable", 35),
        ]
        for (code, name, number) in expected {
            #expect(code.description == name)
            #expect(code.rawValue == number, "\(name)")
        }
        #expect(Set(expected.map(\.0)).count == expected.count)

        let error = StratusError(.unknownItem, "record 'x' was not found", recordID: Record.ID(recordName: "x"))
        #expect(error.description.contains("unknownItem"))
        #expect(error.description.contains("record 'x' was not found"))
        #expect(StratusError.Code.unknownItem ~= error)
        #expect(!(StratusError.Code.zoneNotFound ~= error))
        switch error as any Error {
        case StratusError.unknownItem: break
        default: Issue.record("a code pattern matches the error")
        }
        #expect(StratusError(.zoneBusy, "busy", retryAfterSeconds: 1).isTransient)
        #expect(!error.isTransient)
        let partial = StratusError(.partialFailure, "1 of 2 failed", partialErrors: [Record.ID(recordName: "x"): error])
        #expect(partial.partialErrorsByRecordID[Record.ID(recordName: "x")]?.code == .unknownItem)
        #expect(partial.description.contains("x: unknownItem"))
    }

    @Test("queries: sort descriptors, format strings and their errors")
    func queries() throws {
        let query = try Query(recordType: "Todo", format: "checked == %@ AND title BEGINSWITH %@", 0, "Buy")
        #expect(query.recordType == "Todo")
        // As CKQuery's: nil until set, so appending to it does nothing.
        #expect(query.sortDescriptors == nil)
        query.sortDescriptors?.append(RecordSortDescriptor(key: "title"))
        #expect(query.sortDescriptors == nil)
        query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false), RecordSortDescriptor(key: "creationDate")]
        #expect(query.sortDescriptors?.map(\.key) == ["createdAt", "creationDate"])
        #expect(query.sortDescriptors?[1].queryKey == .creationDate)
        query.sortDescriptors = nil
        #expect(query.sortDescriptors == nil)
        #expect(Query(recordType: "Todo").predicate == .all)
        for bad in ["title ENDSWITH 'x'", "a == 1 OR b == 2", "title ==", "checked == %@"] {
            do {
                _ = try Query(recordType: "Todo", format: bad)
                Issue.record("'\(bad)' must be rejected")
            } catch let error as StratusError {
                #expect(error.code == .invalidArguments, "\(bad)")
            } catch {
                Issue.record("'\(bad)' threw a non-Stratus error")
            }
        }
    }
}
