import Foundation
import Stratus
import StratusTestSupport
import Testing

// What Linux forces on ported error handling and archiving (README "Errors" and "Archiving"),
// checked as the README says it: CloudKit handlers often begin with `error as? NSError`, which
// is nil for a Swift error in swift-corelibs-foundation, but not for a `StratusError`, which
// casts as a `CKError` does; `as NSError` and `as? StratusError` work too. Record IDs are Codable values: JSONEncoder keeps them (NSKeyedArchiver traps).

@Suite("Linux bridging, as the porting guide describes it")
struct LinuxBridgingTests {
    @Test("error as? NSError, error as NSError and as? StratusError all work for a StratusError, also for partial errors", arguments: TestEngine.all)
    func errorBridging(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let existing = Record(recordType: "Task", recordID: Record.ID(recordName: "a"))
            _ = try await database.save(existing)
            var caught: Error?
            do {
                _ = try await database.save(Record(recordType: "Task", recordID: Record.ID(recordName: "a")))
            } catch {
                caught = error
            }
            let error = try #require(caught)
            #expect((error as Any as? NSError)?.code == StratusError.Code.serverRecordChanged.rawValue, "a StratusError casts as a CKError does")
            let nsError = error as NSError
            #expect(nsError.domain == ErrorDomain && nsError.code == StratusError.Code.serverRecordChanged.rawValue)
            #expect((error as? StratusError)?.code == .serverRecordChanged)

            let operation = ModifyRecordsOperation(recordsToSave: [Record(recordType: "Task", recordID: Record.ID(recordName: "a"))])
            let final = Collected<Error?>(nil)
            await run(database) { finish in
                operation.modifyRecordsResultBlock = { result in
                    if case .failure(let error) = result { final.value = error }
                    finish()
                }
                return operation
            }
            let partial = (final.value as? StratusError)?.partialErrorsByItemID?.values.first
            #expect((partial as? StratusError)?.code == .serverRecordChanged)
            #expect((partial.map { $0 as Any } as? NSError)?.domain == ErrorDomain)
            let userInfo = (try #require(final.value) as NSError).userInfo
            #expect((userInfo[PartialErrorsByItemIDKey] as? [Record.ID: Error])?[existing.recordID] is StratusError)
            #expect((userInfo[PartialErrorsByItemIDKey] as? NSDictionary)?.count == 1)
        }
    }

    @Test("a record ID kept with JSONEncoder, or through the record's system fields, instead of NSKeyedArchiver")
    func recordIDsWithoutKeyedArchiver() throws {
        let id = Record.ID(recordName: "note-1", zoneID: RecordZone.ID(zoneName: "Notes"))
        let data = try JSONEncoder().encode(id)
        #expect(try JSONDecoder().decode(Record.ID.self, from: data) == id)

        let record = Record(recordType: "Note", recordID: id)
        let coder = NSKeyedArchiver(requiringSecureCoding: true)
        record.encodeSystemFields(with: coder)
        coder.finishEncoding()
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: coder.encodedData)
        unarchiver.requiresSecureCoding = true
        #expect(Record(coder: unarchiver)?.recordID == id)
    }
}
