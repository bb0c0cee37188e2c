import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// An app that gives CloudKit's errors its own user-facing text, as sync libraries do:
// `extension CKError: LocalizedError { public var errorDescription: String? { switch code { … } } }`
// (CKError conforms to CustomNSError, not LocalizedError, so the app may). Ported, the extension
// is on StratusError; the app reads its text with `errorDescription`, and `localizedDescription`
// stays the store's message, as a CKError's stays CloudKit's. (Were StratusError a LocalizedError
// already, the app's extension would only warn, and code reading the error as a LocalizedError
// would get Stratus's text, not the app's.)

extension StratusError: LocalizedError {
    public var errorDescription: String? {
        switch code {
        case .zoneNotFound:
            return "Zone Not Found: the record zone does not exist on the server."
        case .unknownItem:
            return "Unknown Item: the record does not exist."
        case .serverRecordChanged:
            return "Server Record Changed: the version on the server is different."
        default:
            return "Unhandled Error."
        }
    }
}

@Suite("An app's own LocalizedError text for CloudKit's errors")
struct AppErrorDescriptionTests {
    @Test("extension CKError: LocalizedError ports; errorDescription is the app's, localizedDescription the store's", arguments: TestEngine.all)
    func appErrorDescription(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            do {
                _ = try await database.record(for: RecordID(recordName: "missing"))
                Issue.record("a missing record was found")
            } catch let error as StratusError {
                #expect(error.errorDescription == "Unknown Item: the record does not exist.")
                // What alerts and generic error views read: the conformance is the app's.
                #expect((error as Error as? LocalizedError)?.errorDescription == "Unknown Item: the record does not exist.")
                #expect(error.localizedDescription == error.message)
                #expect((error as NSError).localizedDescription == error.message)
            }
            do {
                _ = try await database.recordZone(for: RecordZoneID(zoneName: "Nowhere"))
                Issue.record("a missing zone was found")
            } catch {
                let ckError = try #require(error as? StratusError)
                #expect(ckError.errorDescription == "Zone Not Found: the record zone does not exist on the server.")
            }
        }
    }
}
