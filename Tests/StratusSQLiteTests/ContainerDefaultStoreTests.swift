import Foundation
import StratusTestSupport
import Testing

// `Container.default()` reads the process environment and stops the program when its store does
// not open, so it is tried in a program of its own: the ported sample, which uses it.
@Suite("Container.default() with a store it cannot open", .timeLimit(.minutes(30)))
struct ContainerDefaultStoreTests {
    @Test("a PostgreSQL URL in STRATUS_STORE stops the program saying why, without its password")
    func postgresURLIsNotEchoed() async throws {
        try await TemporaryStore.with(prefix: "default-store") { store in
            let program = try ChildProcess.builtExecutable("cloudkit-port")
            // Backtraces print memory near the registers, which may hold any string: off, so
            // that only the program's own message is checked.
            let environment = ["STRATUS_STORE": "postgresql://app:s3cret-pw@db1.invalid/app", "SWIFT_BACKTRACE": "enable=no"]
            let status = await (try ChildProcess(program, ["list"], in: store.directory, environment: environment)).wait()
            #expect(status.exitCode != 0 || status.killed, "\(status.stderr)")
            #expect(status.stderr.contains("names no SQLite store"), "\(status.stderr)")
            #expect(status.stderr.contains("STRATUS_STORE"), "\(status.stderr)")
            #expect(!status.stderr.contains("s3cret-pw"), "\(status.stderr)")
        }
    }
}
