import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// `Container.default()` reads the process environment, so the ported sample that uses it runs
// as its own process, with STRATUS_STORE naming a fresh store.
@Suite("Container.default(): the ported command-line sample", .timeLimit(.minutes(30)))
struct ContainerDefaultTests {
    @Test("the sample saves, lists and fetches changes with an archived token on Container.default()", arguments: TestEngine.all)
    func portedSample(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let program = try ChildProcess.builtExecutable("cloudkit-port")
            let environment = ["STRATUS_STORE": location, "STRATUS_USER": "alice", "STRATUS_CONTAINER": "iCloud.com.example.notes"]
            func run(_ arguments: String...) async throws -> ChildProcess.Status {
                let status = await (try ChildProcess(program, arguments, in: store.directory, environment: environment)).wait()
                #expect(status.exitCode == 0, "\(arguments): \(status.stderr)")
                return status
            }
            let tokenFile = store.url("notes.token").path
            _ = try await run("add", "Buy milk")
            _ = try await run("add", "Call mum")
            #expect(try await run("list").stdoutLines.sorted() == ["- Buy milk", "- Call mum"])
            #expect(try await run("changes", tokenFile).stdoutLines.sorted() == ["changed Buy milk", "changed Call mum"])
            #expect(try await run("changes", tokenFile).stdoutLines.isEmpty, "the archived token continues after what was seen")
            _ = try await run("add", "Water plants")
            #expect(try await run("changes", tokenFile).stdoutLines == ["changed Water plants"])

            // The default container is the one STRATUS_CONTAINER names, in the STRATUS_STORE file.
            let container = try Container(identifier: "iCloud.com.example.notes", store: location, userName: "alice")
            let zoneID = RecordZone.ID(zoneName: "Notes")
            let notes = try await container.privateCloudDatabase.records(matching: Query(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
            #expect(notes.matchResults.count == 3)
        }
    }
}
