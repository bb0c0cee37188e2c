import CloudKit
import Foundation
import Stratus
import StratusTestSupport
import Testing

// `CKContainer(identifier:)` and `CKContainer.default()` read the process environment
// ($STRATUS_STORE, $STRATUS_CONTAINER, $STRATUS_USER) and stop the program when the store does
// not open, so they are tried in a program of their own: the ported command-line sample, which
// keeps CloudKit's names and uses the one or the other.
@Suite("CKContainer(identifier:) and CKContainer.default() on the store STRATUS_STORE names", .timeLimit(.minutes(30)))
struct DefaultStoreContainerTests {
    @Test("the ported program saves, lists and reads its changes on either engine", arguments: TestEngine.all)
    func portedProgramOnEitherEngine(engine: TestEngine) async throws {
        try await TemporaryStore.with(prefix: "default-store") { folder in
            let stores = try await TestStoreLocations(engine: engine, folder: folder)
            let store = try await stores.newStore("notes")
            let program = try ChildProcess.builtExecutable("cloudkit-port")
            func run(_ arguments: [String], container: String? = nil) async throws -> ChildProcess.Status {
                var environment = ["STRATUS_STORE": store, "STRATUS_USER": "alice"]
                environment["STRATUS_CONTAINER"] = container
                let status = await (try ChildProcess(program, arguments, in: folder.directory, environment: environment)).wait()
                #expect(status.exitCode == 0, "\(arguments): \(status.stderr)")
                return status
            }
            // Without STRATUS_CONTAINER the program opens CKContainer(identifier: "iCloud.com.example.notes").
            _ = try await run(["add", "Buy milk"])
            _ = try await run(["add", "Call mum"])
            #expect(try await run(["list"]).stdoutLines.sorted() == ["- Buy milk", "- Call mum"])
            let tokenFile = folder.url("notes.token").path
            #expect(try await run(["changes", tokenFile]).stdoutLines.sorted() == ["changed Buy milk", "changed Call mum"])
            #expect(try await run(["changes", tokenFile]).stdoutLines.isEmpty, "the archived token continues after what was seen")

            // CKContainer.default() is the container STRATUS_CONTAINER names, in the same store;
            // `list` then runs its query on an OperationQueue of its own, with no database, which
            // is CKContainer.default()'s private database (found by a porting tester: it failed).
            _ = try await run(["add", "Water plants"], container: "iCloud.com.example.notes")
            #expect(try await run(["list"], container: "iCloud.com.example.notes").stdoutLines.count == 3)
            #expect(try await run(["list"], container: "iCloud.com.example.other").stdoutLines.isEmpty)

            // Both were the store STRATUS_STORE names, as the throwing initializer opens it.
            let container = try Container(identifier: "iCloud.com.example.notes", store: store, userName: "alice")
            let zoneID = CKRecordZone.ID(zoneName: "Notes")
            let notes = try await container.privateCloudDatabase.records(matching: CKQuery(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
            #expect(notes.matchResults.count == 3)
        }
    }

    @Test("a store that does not open stops the program saying which, without its password")
    func unopenableStoreIsNamedWithoutPassword() async throws {
        try await TemporaryStore.with(prefix: "default-store") { folder in
            let program = try ChildProcess.builtExecutable("cloudkit-port")
            // Backtraces print memory near the registers, which may hold any string: off, so
            // that only the program's own message is checked.
            for container in ["", "iCloud.com.example.notes"] {
                let environment = ["STRATUS_STORE": "postgresql://app:s3cret-pw@db1.invalid/app", "STRATUS_CONTAINER": container, "SWIFT_BACKTRACE": "enable=no"]
                let status = await (try ChildProcess(program, ["list"], in: folder.directory, environment: environment)).wait()
                let caller = container.isEmpty ? "CKContainer(identifier: \"iCloud.com.example.notes\")" : "CKContainer.default()"
                #expect(status.exitCode != 0 || status.killed, "\(status.stderr)")
                #expect(status.stderr.contains("\(caller) could not open the store postgresql://app:***@db1.invalid/app"), "\(status.stderr)")
                #expect(!status.stderr.contains("s3cret-pw"), "\(status.stderr)")
            }
            // A STRATUS_STORE that names no store at all says so, naming the variable.
            let status = await (try ChildProcess(program, ["list"], in: folder.directory, environment: ["STRATUS_STORE": "file:///tmp/x", "SWIFT_BACKTRACE": "enable=no"])).wait()
            #expect(status.exitCode != 0 || status.killed, "\(status.stderr)")
            #expect(status.stderr.contains("$STRATUS_STORE"), "\(status.stderr)")
        }
    }
}
