import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Values CloudKit code treats as NSObjects: containers as keys, record values as text")
struct ObjectLikeValuesTests {
    @Test("containers are Hashable by identity: dictionary keys, sets; two opened on one store are two")
    func containersAsKeys() throws {
        let store = try TemporaryStore(prefix: "container-keys")
        defer { store.remove() }
        let first = try Container(identifier: "iCloud.com.example.a", storePath: store.path(), userName: "alice")
        let second = try Container(identifier: "iCloud.com.example.a", storePath: store.path(), userName: "alice")
        var recordTypes: [Container: [String]] = [first: ["Note"]]
        recordTypes[second, default: []].append("Preference")
        #expect(recordTypes[first] == ["Note"])
        #expect(recordTypes[second] == ["Preference"])
        #expect(first == first)
        #expect(first != second)
        #expect(Set([first, first, second]).count == 2)
    }

    @Test("a record value read untyped prints as its NSObject would: strings, numbers, dates")
    func valuesPrint() {
        let record = Record(recordType: "Log")
        record["message"] = "Hello"
        record["count"] = 42
        record["ratio"] = 2.5
        record["at"] = Date(timeIntervalSince1970: 1_525_255_200)
        #expect(record["message"]?.description == "Hello")
        #expect(record["count"]?.description == "42")
        #expect(record["ratio"]?.description == "2.5")
        #expect(record["at"]?.description == "2018-05-02 10:00:00 +0000")
        #expect(record["missing"]?.description == nil)
    }
}
