import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Synchronization
import Testing

@Suite("PostgreSQL errors: codes, SQLSTATEs, no passwords or values in messages", .requiresPostgres)
struct PostgresErrorTests {
    @Test func anUnreachableServerIsATemporaryFailureNamingHostAndPort() throws {
        // Port 1 on the loopback address: nothing listens there, the connection is refused.
        let url = "postgresql://stratus:s3cret-pw@127.0.0.1:1/stratus"
        let error = try #require(throws: StratusError.self) { try PostgresConnection(url: url) }
        #expect(error.code == .serviceUnavailable)
        #expect(error.isTransient)
        #expect(error.retryAfterSeconds != nil)
        #expect(error.message.contains("127.0.0.1:1"))
        #expect(error.message.contains("postgresql://stratus:***@127.0.0.1:1/stratus"))
        #expect(!error.message.contains("s3cret-pw"))
        #expect(!String(describing: error).contains("s3cret-pw"))
        // Key-value strings too.
        let other = try #require(throws: StratusError.self) {
            try PostgresConnection(url: "host=127.0.0.1 port=1 user=stratus password='s3cret pw'")
        }
        #expect(other.code == .serviceUnavailable)
        #expect(!other.message.contains("s3cret"))
        // An IPv6 address is named in brackets, as a URL writes it.
        let six = try #require(throws: StratusError.self) { try PostgresConnection(url: "postgresql://stratus:s3cret-pw@[::1]:1/stratus") }
        #expect(six.message.contains("server at [::1]:1"), "\(six.message)")
        #expect(!six.message.contains("s3cret-pw"))
        let pool = try PostgresConnectionPool(url: url)
        let pooled = try #require(throws: StratusError.self) { try pool.withConnection { _ in } }
        #expect(pooled.code == .serviceUnavailable)
        #expect(!pooled.message.contains("s3cret-pw"))
        #expect(pool.openConnectionCount == 0)
    }

    @Test func aMalformedURLIsRefusedWithoutShowingItsPassword() throws {
        let error = try #require(throws: StratusError.self) {
            try PostgresConnection(url: "postgresql://stratus:s3cret-pw@db1/stratus?nonsense=1")
        }
        #expect(error.code == .invalidArguments)
        #expect(!error.message.contains("s3cret-pw"))
        #expect(error.message.contains("stratus:***@db1"))
        #expect(throws: StratusError.self) { try PostgresConnectionPool(url: "postgresql://a:b@h/d?nonsense=1") }
        #expect(throws: StratusError.self) { try PostgresConnectionPool(url: "postgresql://h/d", maximumConnections: 0) }
    }

    @Test(.enabled(if: PostgresTestServer.passwordCheckingAddress != nil, "needs an address where the server checks passwords (STRATUS_TEST_POSTGRES_TCP)"))
    func aWrongPasswordIsAnAuthenticationFailure() throws {
        let address = try #require(PostgresTestServer.passwordCheckingAddress)
        let database = try PostgresTestServer.makeDatabase()
        let admin = try PostgresConnection(url: database.url)
        let role = "stratus_login_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        let quotedRole = try PostgresConnection.quoteIdentifier(role)
        try admin.executeScript("CREATE ROLE \(quotedRole) LOGIN PASSWORD 'right-password'")
        defer { try? admin.executeScript("DROP ROLE IF EXISTS \(quotedRole)") }
        func url(password: String?) -> String {
            "postgresql://\(role)\(password.map { ":\($0)" } ?? "")@\(address.host):\(address.port)/\(database.name)"
        }
        let wrong = try #require(throws: StratusError.self) { try PostgresConnection(url: url(password: "wrong-password")) }
        #expect(wrong.code == .notAuthenticated)
        #expect(wrong.message.contains("\(address.host):\(address.port)"))
        #expect(!wrong.message.contains("wrong-password"))
        #expect(wrong.message.contains(":***@"))
        let missing = try #require(throws: StratusError.self) {
            try PostgresConnection(url: url(password: nil), settings: ["passfile": "/nonexistent"])
        }
        #expect(missing.code == .notAuthenticated)
        #expect(missing.message.contains("the password file /nonexistent, which does not exist"), "\(missing)")
        // A file without the line: the message names what the line must match.
        let passfile = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        _ = FileManager.default.createFile(atPath: passfile.path, contents: Data("otherhost:5432:*:*:secret\n".utf8), attributes: [.posixPermissions: 0o600])
        defer { try? FileManager.default.removeItem(at: passfile) }
        let unmatched = try #require(throws: StratusError.self) {
            try PostgresConnection(url: url(password: nil), settings: ["passfile": passfile.path])
        }
        #expect(unmatched.code == .notAuthenticated)
        #expect(unmatched.message.contains("which has no line for host \(address.host), port \(address.port), database \(database.name) and user \(role)"), "\(unmatched)")
        let right = try PostgresConnection(url: url(password: "right-password"))
        #expect(try right.query("SELECT current_user")[0].text(0) == role)
        // A server without SSL (as the throwaway cluster is) cannot meet sslmode=require: a
        // setting to change, which a cron job retrying later (75) would never see mended.
        do {
            _ = try PostgresConnection(url: url(password: "right-password") + "?sslmode=require")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments && error.message.contains("does not offer SSL") && !error.message.contains("right-password"), "\(error)")
        }
    }

    @Test("SSL files missing or unreadable on this machine are a setting to mend (invalidArguments, exit 64), not a login the server refused nor a server away")
    func localSSLFilesAreSettings() throws {
        // libpq checks its files once the server agrees to SSL, before any handshake: a
        // listener that answers the SSL request with 'S' is server enough.
        let server = try ScriptedPostgresServer(.agreeToSSL)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-ssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let garbage = folder.appendingPathComponent("client.crt").path
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: garbage))
        let base = "postgresql://stratus:s3cret-pw@127.0.0.1:\(server.port)/app?gssencmode=disable&connect_timeout=5"
        for (settings, names) in [("&sslmode=verify-full&sslrootcert=\(folder.path)/missing-root.crt", "missing-root.crt"), ("&sslmode=require&sslcert=\(garbage)", "client.crt")] {
            let error = try #require(throws: StratusError.self) { try PostgresConnection(url: base + settings) }
            #expect(error.code == .invalidArguments, "\(error)")
            #expect(error.message.contains("the SSL files the PostgreSQL connection settings name cannot be used") && error.message.contains(names), "\(error)")
            #expect(!error.message.contains("s3cret-pw") && !error.message.contains("refused the login"), "\(error)")
        }
    }

    @Test("a login pg_hba.conf's peer authentication refuses says what peer means and what to do instead")
    func peerAuthenticationIsExplained() throws {
        let server = try ScriptedPostgresServer(.refuseLogin(message: "Peer authentication failed for user \"stratus\""))
        let error = try #require(throws: StratusError.self) {
            try PostgresConnection(url: "postgresql://stratus@127.0.0.1:\(server.port)/app?sslmode=disable&gssencmode=disable&connect_timeout=5")
        }
        #expect(error.code == .notAuthenticated, "\(error)")
        #expect(error.message.contains("Peer authentication failed") && error.message.contains("only the operating-system user of the same name") && error.message.contains("host=localhost"), "\(error)")
    }

    @Test("a connection to a server (or role) with no free connection slot waits for one to be freed")
    func aFullServerIsWaitedFor() throws {
        let database = try PostgresTestServer.makeDatabase()
        let admin = try PostgresConnection(url: database.url)
        let role = "stratus_full_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        try admin.executeScript("CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1")
        defer { try? admin.executeScript("DROP ROLE IF EXISTS \(role)") }
        let url = try PostgresConnectionString.replacing(["user": role], in: database.url)
        let holder = Mutex<PostgresConnection?>(try PostgresConnection(url: url))
        // The only slot is freed a moment later, while the second connection waits.
        Thread.detachNewThread {
            usleep(300_000)
            holder.withLock { $0 = nil }
        }
        let waited = try PostgresConnection(url: url)
        #expect(try waited.query("SELECT current_user")[0].text(0) == role)
        #expect(holder.withLock { $0 == nil }, "the second connection got the slot the first freed")
    }

    @Test("the default asset cache is a folder of the user's own; a link or another user's folder in its place is refused, naming it")
    func assetCacheFolderIsTheUsersOwn() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let cache = try PostgresEngine(url: database.url).assetCacheDirectory
        defer { try? FileManager.default.removeItem(at: cache) }
        #expect(cache.lastPathComponent.hasPrefix("stratus-assets-\(geteuid())-"), "one cache per user of the machine: \(cache.path)")
        var info = stat()
        #expect(lstat(cache.path, &info) == 0 && info.st_uid == geteuid() && info.st_mode & 0o7777 == 0o700)

        // Another user of the machine knows the path (the store's identity is readable to every
        // role): a link in its place would send the cache elsewhere.
        try FileManager.default.removeItem(at: cache)
        try await TemporaryStore.with { elsewhere in
            try FileManager.default.createSymbolicLink(at: cache, withDestinationURL: elsewhere.directory)
            let linked = try #require(throws: StratusError.self) { try PostgresEngine(url: database.url) }
            #expect(linked.code == .permissionFailure && linked.message.contains(cache.path) && linked.message.contains("assetCacheDirectory"), "\(linked)")
            try FileManager.default.removeItem(at: cache)
        }
        // A folder another user made first, open to everyone, would let them read the cache or
        // plant content records hand out. (Only root can make a folder another user owns.)
        #expect(mkdir(cache.path, 0o777) == 0)
        if geteuid() == 0 {
            #expect(chown(cache.path, 4242, 4242) == 0)
            let foreign = try #require(throws: StratusError.self) { try PostgresEngine(url: database.url) }
            #expect(foreign.code == .permissionFailure && foreign.message.contains("another user (uid 4242)"), "\(foreign)")
            #expect(chown(cache.path, geteuid(), getegid()) == 0)
        }
        // The user's own folder, open to others, is made private again.
        #expect(chmod(cache.path, 0o777) == 0)
        _ = try PostgresEngine(url: database.url)
        #expect(lstat(cache.path, &info) == 0 && info.st_mode & 0o7777 == 0o700)
    }

    @Test func aMissingDatabaseIsAMissingContainer() throws {
        let database = try PostgresTestServer.makeDatabase()
        let url = try PostgresConnectionString.replacing(["dbname": database.name + "_missing"], in: database.url)
        let error = try #require(throws: StratusError.self) { try PostgresConnection(url: url) }
        #expect(error.code == .badContainer)
        #expect(error.message.contains("has no database \(database.name)_missing") && error.message.contains("createdb -O"), "\(error)")
        // A password as the URL's last parameter is hidden, and the pass that hides the passwords
        // of every URL in what the stratus tool prints leaves the words after the URL alone.
        let withPassword = url + (url.contains("?") ? "&" : "?") + "password=Sekr3tPass"
        let hidden = try #require(throws: StratusError.self) { try PostgresConnection(url: withPassword) }
        let printed = PostgresConnectionString.redactingURLs(in: hidden.message)
        #expect(!printed.contains("Sekr3tPass") && printed.contains("password=***'): a role that may create databases"), "\(printed)")
        // A database without Stratus's tables is another thing: it exists, and says where the tables would be.
        let empty = try #require(throws: StratusError.self) { try PostgresEngine(url: database.url, create: false) }
        #expect(empty.code == .badContainer && empty.message.contains("holds no Stratus store in schema public") && empty.message.contains("the database exists"), "\(empty)")
        #expect(!empty.message.contains("holds one"), "\(empty)")
    }

    @Test("a database whose store is in another schema than the connection's says which, and how to name it")
    func aStoreInAnotherSchemaIsNamed() throws {
        let database = try PostgresTestServer.makeDatabase()
        let admin = try PostgresConnection(url: database.url)
        try admin.executeScript("CREATE SCHEMA app_store")
        // As a store in a schema named after its owner role is found by that role alone.
        let elsewhere = try PostgresConnectionString.replacing(["options": "-c search_path=app_store"], in: database.url)
        _ = try PostgresEngine(url: elsewhere)
        let missing = try #require(throws: StratusError.self) { try PostgresEngine(url: database.url, create: false) }
        #expect(missing.code == .badContainer && missing.message.contains("holds no Stratus store in schema public"), "\(missing)")
        #expect(missing.message.contains("schema app_store holds one") && missing.message.contains("?options=-c%20search_path%3Dapp_store"), "\(missing)")
        // The hint's URL finds it.
        let hinted = database.url + (database.url.contains("?") ? "&" : "?") + "options=-c%20search_path%3Dapp_store"
        #expect(try PostgresEngine(url: hinted, create: false).createdStore == false)
    }

    @Test("a service that is not defined, and options the server cannot take, are usage errors, not a server away")
    func serviceAndOptionMistakes() throws {
        let database = try PostgresTestServer.makeDatabase()
        let service = try #require(throws: StratusError.self) { try PostgresConnection(url: "postgresql://?service=stratus_no_such_service_\(UInt32.random(in: 0...UInt32.max))") }
        #expect(service.code == .invalidArguments && service.message.contains("definition of service"), "\(service)")
        let option = try PostgresConnectionString.replacing(["options": "-c statement_timeout=soon"], in: database.url)
        let refused = try #require(throws: StratusError.self) { try PostgresConnection(url: option) }
        #expect(refused.code == .invalidArguments && refused.message.contains("statement_timeout"), "\(refused)")
    }

    @Test("a primary whose sessions start read-only (default_transaction_read_only) fails the write check naming the setting")
    func readOnlyByDefault() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let container = try Container(identifier: "com.example.readonly", postgresURL: database.url, userName: "alice")
        try await container.publicCloudDatabase.checkWriteAccess()
        let admin = try PostgresConnection(url: database.url)
        try admin.executeScript("ALTER DATABASE \(try PostgresConnection.quoteIdentifier(database.name)) SET default_transaction_read_only = on")
        defer { try? admin.executeScript("ALTER DATABASE \(try PostgresConnection.quoteIdentifier(database.name)) RESET default_transaction_read_only") }
        // An engine of its own: the shared one's sessions began before the setting.
        let later = Container(identifier: "com.example.readonly", engine: try PostgresEngine(url: database.url), userName: "alice")
        let refusal = stratusError(await caughtError { try await later.publicCloudDatabase.checkWriteAccess() })
        #expect(refusal?.code == .permissionFailure && refusal?.message.contains("default_transaction_read_only") == true, "\(String(describing: refusal))")
        // The real write fails the same way at once, not after the retries a standby gets.
        let write = stratusError(await caughtError { try await later.publicCloudDatabase.save(makeRecord("Note", "n1")) })
        #expect(write?.code == .permissionFailure && write?.message.contains("default_transaction_read_only") == true, "\(String(describing: write))")
    }

    @Test("mistakes in the settings are usage errors with libpq's reason, never a password; a role that may not create tables or read them is told what it lacks")
    func settingMistakes() throws {
        let database = try PostgresTestServer.makeDatabase()
        let settings = try PostgresConnectionString.settings(in: database.url)
        let socket = try #require(settings["host"]), port = settings["port"] ?? "5432"
        let base = "postgresql://someone:s3cretPW@\(socket.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? socket)"
        for (url, reason) in [("\(base):notaport/\(database.name)", "notaport"), ("\(base):\(port)/\(database.name)?sslmode=bogus", "bogus"),
                              ("\(base):\(port)/\(database.name)?bogus=1", "bogus")] {
            let error = try #require(throws: StratusError.self) { try PostgresConnection(url: url) }
            #expect(error.code == .invalidArguments && error.message.contains(reason) && !error.message.contains("s3cretPW"), "\(error)")
        }
        for url in ["postgresql://someone:s3cret%zzPW@db1/app", "postgresql://someone@db1/app?password=s3cret%zzPW"] {
            let error = try #require(throws: StratusError.self) { try PostgresConnection(url: url) }
            #expect(error.code == .invalidArguments && !error.message.contains("s3cret") && !error.message.contains("zzPW"), "\(error)")
        }

        let admin = try PostgresConnection(url: database.url)
        let role = "stratus_plain_\(UInt32.random(in: 0...UInt32.max))"
        try admin.executeScript("CREATE ROLE \(role) LOGIN")
        defer { try? admin.executeScript("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
        let asRole = try PostgresConnectionString.replacing(["user": role], in: database.url)
        let create = try #require(throws: StratusError.self) { try PostgresEngine(url: asRole) }
        #expect(create.code == .permissionFailure && create.message.contains("createdb -O \(role)") && create.message.contains("GRANT CREATE ON SCHEMA public TO \(role)"), "\(create)")
        _ = try PostgresEngine(url: database.url)
        let read = try #require(throws: StratusError.self) { try PostgresEngine(url: asRole) }
        #expect(read.code == .permissionFailure && read.message.contains("may not read the Stratus store") && read.message.contains("connect as"), "\(read)")
    }

    @Test(arguments: [
        ("40001", StratusError.Code.zoneBusy, true),
        ("40P01", .zoneBusy, true),
        ("55P03", .zoneBusy, true),
        ("57P03", .serviceUnavailable, true),
        ("53300", .serviceUnavailable, true),
        ("08006", .serviceUnavailable, true),
        ("25006", .serviceUnavailable, true),
        ("23505", .constraintViolation, false),
        ("23503", .constraintViolation, false),
        ("42501", .permissionFailure, false),
        ("28P01", .notAuthenticated, false),
        ("22P02", .invalidArguments, false),
        ("53100", .quotaExceeded, false),
        ("54000", .limitExceeded, false),
        ("XX001", .badDatabase, false),
        ("42P01", .internalError, false),
    ])
    func sqlStatesMapToCodes(sqlState: String, code: StratusError.Code, transient: Bool) throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let error = try #require(throws: StratusError.self) {
            try connection.executeScript("DO $$ BEGIN RAISE EXCEPTION 'raised on purpose' USING ERRCODE = '\(sqlState)'; END $$")
        }
        #expect(error.code == code)
        #expect(error.sqlState == sqlState)
        #expect(error.isTransient == transient)
        #expect((error.retryAfterSeconds != nil) == transient)
        #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
    }

    @Test("a hot standby's recovery conflict (SQLSTATE 40001, as the standby words it) is zoneBusy, retryable, and says what happened and what gives reads room")
    func aRecoveryConflictSaysSo() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        // A buffer-pin deadlock with recovery comes as 40P01, in the same words.
        for sqlState in ["40001", "40P01"] {
            let error = try #require(throws: StratusError.self) {
                try connection.executeScript("DO $$ BEGIN RAISE EXCEPTION 'canceling statement due to conflict with recovery' USING ERRCODE = '\(sqlState)'; END $$")
            }
            #expect(error.code == .zoneBusy && error.isTransient && error.retryAfterSeconds != nil)
            #expect(error.message.contains("standby") && error.message.contains("hot_standby_feedback") && !error.message.contains("conflicted with another"), "\(error)")
        }
    }

    @Test func aSerializationFailureIsTransient() throws {
        let database = try PostgresTestServer.makeSchema()
        let first = try PostgresConnection(url: database.url)
        let second = try PostgresConnection(url: database.url)
        try first.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, n int8); INSERT INTO t VALUES (1, 0)")
        try first.begin(isolation: .repeatableRead)
        #expect(try first.query("SELECT n FROM t WHERE id = 1")[0].int64(0) == 0)
        try second.execute("UPDATE t SET n = n + 1 WHERE id = 1")
        let error = try #require(throws: StratusError.self) { try first.execute("UPDATE t SET n = n + 10 WHERE id = 1") }
        #expect(error.code == .zoneBusy)
        #expect(error.sqlState == "40001")
        #expect(error.isTransient)
        #expect(error.retryAfterSeconds != nil)
        try first.rollback()
        #expect(try first.query("SELECT n FROM t")[0].int64(0) == 1)
    }

    @Test func messagesDoNotQuoteValues() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (name text PRIMARY KEY, n int4)")
        try connection.execute("INSERT INTO t VALUES ($1, 1)", [.text("secret-key-value")])
        let duplicate = try #require(throws: StratusError.self) {
            try connection.execute("INSERT INTO t VALUES ($1, 2)", [.text("secret-key-value")])
        }
        #expect(duplicate.code == .constraintViolation)
        #expect(duplicate.message.contains("t_pkey"))
        #expect(!duplicate.message.contains("secret-key-value"))
        let badNumber = try #require(throws: StratusError.self) {
            try connection.execute("INSERT INTO t VALUES ('x', $1)", [.text("secret-not-a-number")])
        }
        #expect(badNumber.code == .invalidArguments)
        #expect(badNumber.sqlState == "22P02")
        #expect(!badNumber.message.contains("secret"))
        let outOfRange = try #require(throws: StratusError.self) {
            try connection.execute("INSERT INTO t VALUES ('y', $1)", [.int64(98_765_432_101)])
        }
        #expect(outOfRange.code == .invalidArguments)
        #expect(!outOfRange.message.contains("98765432101"))
    }

    @Test func aConnectionLostMidTransactionIsTransientAndAppliesNothing() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let observer = try PostgresConnection(url: database.url)
        try observer.executeScript("CREATE TABLE t (id int8)")
        try connection.begin()
        try connection.execute("INSERT INTO t VALUES (1)")
        #expect(try observer.query("SELECT pg_terminate_backend($1::int4)", [.int64(Int64(connection.backendProcessID))])[0].bool(0) == true)
        let error = try #require(throws: StratusError.self) { try connection.execute("INSERT INTO t VALUES (2)") }
        #expect(error.code == .serviceUnavailable)
        #expect(error.isTransient)
        #expect(error.message.contains("rolled back"))
        #expect(!connection.isOpen)
        #expect(!connection.isUsable())
        #expect(try observer.query("SELECT count(*) FROM t")[0].int64(0) == 0)
    }
}

@Suite("PostgreSQL connection strings")
struct PostgresConnectionStringTests {
    @Test(arguments: [
        ("postgresql://app:secret@db1:5432/stratus", "postgresql://app:***@db1:5432/stratus"),
        ("postgres://app:p%40ss@db1/stratus?sslmode=require", "postgres://app:***@db1/stratus?sslmode=require"),
        ("postgresql://app:se@cret@db1/x", "postgresql://app:***@db1/x"),
        // libpq reads a user part on past a '?' (to the first '@' before any '/').
        ("postgresql://app:se?cret@db1/x", "postgresql://app:***@db1/x"),
        ("postgresql://db1?password=secret@h", "postgresql://db1?***@h"),
        // An unencoded '/' in the password (refused when used): hidden all the same.
        ("postgresql://app:se/cret@db1/x", "postgresql://app:***@db1/x"),
        ("postgresql://app@db1/x?application_name=a@b", "postgresql://app@db1/x?application_name=a@b"),
        ("postgresql://app@db1/x?password=secret&sslmode=require", "postgresql://app@db1/x?password=***&sslmode=require"),
        ("postgresql://db1,db2:5433/x?user=app&PASSWORD=secret", "postgresql://db1,db2:5433/x?user=app&PASSWORD=***"),
        ("postgresql:///x?host=/tmp/s", "postgresql:///x?host=/tmp/s"),
        // The passphrase of the client's SSL key is a secret too.
        ("postgresql://app@db1/x?sslpassword=secret&sslmode=require", "postgresql://app@db1/x?sslpassword=***&sslmode=require"),
        ("postgresql://app@db1/x?SSL%70assword=secret", "postgresql://app@db1/x?SSL%70assword=***"),
        ("host=db1 sslpassword=secret dbname=x", "host=db1 sslpassword=*** dbname=x"),
        ("host=db1 password=secret dbname=x", "host=db1 password=*** dbname=x"),
        ("host=db1 password = 'se cr\\'et' dbname=x", "host=db1 password = *** dbname=x"),
        ("password='unterminated secret", "password=***"),
        ("host db1 password=secret", "host ***"),
        ("", ""),
        ("mydb", "mydb"),
    ])
    func passwordsAreRedacted(input: String, expected: String) {
        let redacted = PostgresConnectionString.redacted(input)
        #expect(redacted == expected)
        #expect(!redacted.contains("secret") && !redacted.contains("cret"))
    }

    @Test func settingsAreReadAndReplaced() throws {
        let url = "postgresql://app:pw@%2Ftmp%2Fsock:5433/one?sslmode=disable"
        let settings = try PostgresConnectionString.settings(in: url)
        #expect(settings["host"] == "/tmp/sock")
        #expect(settings["port"] == "5433")
        #expect(settings["dbname"] == "one")
        #expect(settings["password"] == "pw")
        let other = try PostgresConnectionString.replacing(["dbname": "two words&more"], in: url)
        let reread = try PostgresConnectionString.settings(in: other)
        #expect(reread["dbname"] == "two words&more")
        #expect(reread["host"] == "/tmp/sock")
        #expect(reread["sslmode"] == "disable")
        #expect(PostgresConnectionString.isURL(other))
        #expect(!PostgresConnectionString.redacted(other).contains("pw"))
        #expect(throws: StratusError.self) { try PostgresConnectionString.settings(in: "postgresql://h/d?bogus=1") }
    }

    @Test("a URL whose user part holds more than one '@' is refused without showing any part of it: libpq would read the password's tail as the host")
    func unescapedAtSignsAreRefused() throws {
        for url in ["postgresql://owner:SECRET@PW@127.0.0.1:54329/app", "postgres://owner@corp@db1/app", "postgresql://o:S@C@R@db1:1/app?sslmode=disable"] {
            for attempt in [{ _ = try PostgresConnectionString.settings(in: url) }, { _ = try PostgresConnection(url: url) },
                            { _ = try PostgresConnectionPool(url: url) }, { _ = try PostgresConnectionString.replacing(["dbname": "x"], in: url) }] {
                let error = try #require(throws: StratusError.self) { try attempt() }
                #expect(error.code == .invalidArguments && error.message.contains("%40"), "\(error)")
                for secret in ["SECRET", "PW", "corp", "S@C", "C@R"] { #expect(!error.message.contains(secret), "\(error)") }
            }
        }
        #expect(try PostgresConnectionString.settings(in: "postgresql://owner:SE%40CRET@db1/app")["password"] == "SE@CRET")
    }

    @Test("a '/' of the password left unencoded is refused without showing any part of the URL: libpq would read the password's head as the port, or its tail as the host, and quote it")
    func unescapedSlashesAreRefused() throws {
        for url in ["postgresql://owner:SEC%40RET/PW@127.0.0.1:54329/app", "postgres://owner:SECRET/PW@db1/app?sslmode=disable",
                    // A password holding both: libpq would read its tail as the host and database.
                    "postgresql://owner:SEC@RET/PW@127.0.0.1:54329/app", "postgresql://owner:SEC@x:y/PW%w@127.0.0.1:54329/app"] {
            for attempt in [{ _ = try PostgresConnectionString.settings(in: url) }, { _ = try PostgresConnection(url: url) },
                            { _ = try PostgresConnectionPool(url: url) }] {
                let error = try #require(throws: StratusError.self) { try attempt() }
                #expect(error.code == .invalidArguments && error.message.contains("%2F"), "\(error)")
                for secret in ["SEC", "RET", "PW", "owner"] { #expect(!error.message.contains(secret), "\(error)") }
            }
            #expect(!PostgresConnectionString.redacted(url).contains("SEC") && !PostgresConnectionString.redacted(url).contains("PW"))
        }
        // A '?' before the '@' is libpq's user part; an '@' after it would be read as the host.
        let twice = try #require(throws: StratusError.self) { try PostgresConnectionString.settings(in: "postgresql://owner:SE?CRET@PW@db1/app") }
        #expect(twice.message.contains("%40") && !twice.message.contains("CRET") && !twice.message.contains("PW"), "\(twice)")
        #expect(try PostgresConnectionString.settings(in: "postgresql://owner:SE%2FCRET@db1/app")["password"] == "SE/CRET")
        #expect(try PostgresConnectionString.settings(in: "postgresql://owner:SE?CRET@db1/app")["password"] == "SE?CRET")
        #expect(try PostgresConnectionString.settings(in: "postgresql://db1/my%40db")["dbname"] == "my@db")
    }

    @Test("URLs of any scheme in a message have their passwords hidden; help's URL form is left as it is")
    func urlsInTextAreRedacted() {
        let cases = [
            ("unexpected argument 'postgresql://u:s3cret@db1/app'", "unexpected argument 'postgresql://u:***@db1/app'"),
            ("no store at postgresq://u:s3cret@db1:5432/app (--store)", "no store at postgresq://u:***@db1:5432/app (--store)"),
            ("two: pg://a:s3cret@h/x and postgres://b@h/y?password=s3cret&x=1.", "two: pg://a:***@h/x and postgres://b@h/y?password=***&x=1."),
            ("write postgresql://[user[:password]@]host[:port]/dbname", "write postgresql://[user[:password]@]host[:port]/dbname"),
            ("no URL here: a:b@c", "no URL here: a:b@c"),
        ]
        for (text, expected) in cases {
            #expect(PostgresConnectionString.redactingURLs(in: text) == expected)
        }
    }

    @Test("the scheme is read in any case, as RFC 3986 has it; other spellings are not URLs")
    func schemesInAnyCase() throws {
        for url in ["POSTGRESQL://u:pw@db1:5433/app", "Postgres://u:pw@db1:5433/app", "postgresql://u:pw@db1:5433/app"] {
            #expect(PostgresConnectionString.isURL(url))
            let settings = try PostgresConnectionString.settings(in: url)
            #expect(settings["host"] == "db1" && settings["port"] == "5433" && settings["dbname"] == "app" && settings["password"] == "pw", "\(settings)")
            #expect(PostgresConnectionString.redacted(url).hasSuffix("u:***@db1:5433/app"))
        }
        for text in ["postgresql:/u:pw@db1/app", "postgres:app", "POSTGRESQL:///app"] {
            #expect(PostgresConnectionString.hasPostgresScheme(text), "\(text)")
        }
        #expect(!PostgresConnectionString.isURL("postgresql:/u:pw@db1/app"))
        #expect(PostgresConnectionString.isURL("POSTGRESQL:///app"))
        #expect(!PostgresConnectionString.hasPostgresScheme("./postgresql.sqlite") && !PostgresConnectionString.hasPostgresScheme("postgresx://a"))
    }
}
