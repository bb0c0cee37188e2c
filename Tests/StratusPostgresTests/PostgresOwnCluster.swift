import Foundation
import StratusPostgres
import StratusTestSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL cluster of one test's own (through `scripts/pg-test-cluster`), for tests that
/// stop, crash or replicate a server, which the shared test server must not be: stopped and
/// removed when the value goes away (and by the script's watcher if the test process dies).
final class PostgresOwnCluster: @unchecked Sendable {
    // @unchecked: the directory is written once in init, the URL only behind its lock; the
    // methods only run the script.
    let directory: String
    private let currentURL: Mutex<String>

    /// The cluster's URL. It names the port, which a restart may have to change.
    var url: String { currentURL.withLock { $0 } }

    /// Starts a new cluster. Unlike the shared test server, it commits durably
    /// (`synchronous_commit`): a crash test must find every commit that was answered.
    init() throws {
        let (directory, url) = try Self.run(["start", "--watch-pid", String(getpid())])
        self.directory = directory
        currentURL = Mutex(url)
        let connection = try PostgresConnection(url: url)
        try connection.executeScript("ALTER SYSTEM SET synchronous_commit = on")
        _ = try connection.query("SELECT pg_reload_conf()")
    }

    private init(directory: String, url: String) {
        self.directory = directory
        currentURL = Mutex(url)
    }

    deinit { _ = try? Self.run(["stop", directory]) }

    /// A streaming hot standby of this cluster, replaying what it commits.
    func standby() throws -> PostgresOwnCluster {
        let (directory, url) = try Self.run(["standby", self.directory, "--watch-pid", String(getpid())])
        return PostgresOwnCluster(directory: directory, url: url)
    }

    /// Stops the server at once, as a crash would (`pg_ctl stop -m immediate`).
    func crash() throws { _ = try Self.run(["crash", directory], settings: false) }

    /// Starts the server again (it recovers from its log), on the same port while it is free:
    /// another test's cluster, started in parallel, may have taken it since the crash, and
    /// the script then picks another, which ``url`` follows.
    func restart() throws {
        let (_, url) = try Self.run(["start", directory])
        currentURL.withLock { $0 = url }
    }

    /// Runs the script with `arguments` and answers the folder and URL it prints.
    @discardableResult
    private static func run(_ arguments: [String], settings: Bool = true) throws -> (String, String) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-own-pg-\(UUID().uuidString)").path
        defer {
            try? FileManager.default.removeItem(atPath: scratch + ".out")
            try? FileManager.default.removeItem(atPath: scratch + ".err")
        }
        // system(), not Process: see PostgresTestServer.
        let command = ([PostgresTestServer.scriptPath] + arguments).map(quoted).joined(separator: " ")
        let status = system("\(command) </dev/null >\(quoted(scratch + ".out")) 2>\(quoted(scratch + ".err"))")
        let output = (try? String(contentsOfFile: scratch + ".out", encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw PostgresTestServerError(message: "pg-test-cluster \(arguments.joined(separator: " ")) failed: \((try? String(contentsOfFile: scratch + ".err", encoding: .utf8)) ?? "")")
        }
        guard settings else { return ("", "") }
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard let directory = values["STRATUS_TEST_POSTGRES_DIR"], let url = values["STRATUS_TEST_POSTGRES_URL"] else {
            throw PostgresTestServerError(message: "pg-test-cluster printed no settings: \(output)")
        }
        return (directory, url)
    }

    private static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
