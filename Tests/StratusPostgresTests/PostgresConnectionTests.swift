import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

@Suite("PostgreSQL connection: statements, values, transactions", .requiresPostgres)
struct PostgresConnectionTests {
    @Test func connectsAndNamesItself() throws {
        let database = try PostgresTestServer.makeDatabase()
        let connection = try PostgresConnection(url: database.url)
        #expect(connection.isOpen)
        #expect(connection.serverVersion >= 140000)
        #expect(connection.transactionStatus == .idle)
        #expect(try connection.query("SHOW application_name")[0].text(0) == "stratus")
        #expect(try connection.query("SELECT current_database()")[0].text(0) == database.name)
        #expect(try connection.query("SHOW client_encoding")[0].text(0) == "UTF8")
    }

    @Test func settingsOverrideTheURL() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url, settings: ["application_name": "stratus-test"])
        #expect(try connection.query("SHOW application_name")[0].text(0) == "stratus-test")
    }

    static let texts = [
        "", "plain", "it's \"quoted\"; DROP TABLE x; --", "back\\slash\ttab\nnewline\r", "grüße ✓ 😀",
        "e\u{301}", "\u{e9}", String(repeating: "long ", count: 20_000),
    ]
    static let integers: [Int64] = [.min, .min + 1, -1, 0, 1, Int64(Int32.max) + 1, .max]
    static let doubles: [Double] = [
        0.0, -0.0, 0.1, -1.5, .pi, .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude,
        -.greatestFiniteMagnitude, .infinity, -.infinity, .nan, .leastNormalMagnitude / 3, 123_456_789.123_456_789,
    ]
    static let byteStrings: [Data] = [Data(), Data([0]), Data([0, 1, 0, 255, 0]), Data((0..<256).map { UInt8($0) }), Data("\\x41'".utf8)]

    @Test func parametersRoundTripThroughSelect() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        for text in Self.texts {
            let read = try connection.query("SELECT $1", [.text(text)])[0].text(0)
            #expect(read.map { Array($0.utf8) } == Array(text.utf8), "text of \(text.utf8.count) bytes")
        }
        for integer in Self.integers {
            #expect(try connection.query("SELECT $1", [.int64(integer)])[0].int64(0) == integer)
        }
        for double in Self.doubles {
            let read = try connection.query("SELECT $1", [.double(double)])[0].double(0)
            #expect(read?.bitPattern == double.bitPattern, "\(double)")
        }
        for bytes in Self.byteStrings {
            #expect(try connection.query("SELECT $1", [.bytea(bytes)])[0].bytes(0) == bytes)
        }
        #expect(try connection.query("SELECT $1", [.bool(true)])[0].bool(0) == true)
        #expect(try connection.query("SELECT $1", [.bool(false)])[0].bool(0) == false)
        let null = try connection.query("SELECT $1::text, $2::int8", [.null, .null])[0]
        #expect(null.isNull(0) && null.isNull(1))
        #expect(try null.text(0) == nil && null.int64(1) == nil)
    }

    @Test func valuesRoundTripThroughATable() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (n serial PRIMARY KEY, s text, i int8, d float8, b bytea, f bool, j jsonb)")
        var stored: [[PostgresValue]] = []
        for index in 0..<max(Self.texts.count, Self.integers.count, Self.doubles.count, Self.byteStrings.count) {
            let row: [PostgresValue] = [
                index < Self.texts.count ? .text(Self.texts[index]) : .null,
                index < Self.integers.count ? .int64(Self.integers[index]) : .null,
                index < Self.doubles.count ? .double(Self.doubles[index]) : .null,
                index < Self.byteStrings.count ? .bytea(Self.byteStrings[index]) : .null,
                .bool(index % 2 == 0),
                .text(#"{"k": [1, "ü", null]}"#),
            ]
            try connection.execute("INSERT INTO t (s, i, d, b, f, j) VALUES ($1, $2, $3, $4, $5, $6)", row)
            stored.append(row)
        }
        let rows = try connection.query("SELECT s, i, d, b, f, j FROM t ORDER BY n")
        #expect(rows.count == stored.count)
        for (row, expected) in zip(rows, stored) {
            for column in 0..<5 {
                #expect(try row.value(column) == expected[column], "column \(column)")
            }
            #expect(try row.text(5) == #"{"k": [1, "ü", null]}"#)
        }
    }

    @Test func arraysBindManyRowsAtOnce() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (i int8, s text, d float8)")
        let inserted = try connection.execute(
            "INSERT INTO t SELECT * FROM unnest($1::int8[], $2::text[], $3::float8[])",
            [.int64Array([1, 2, nil]), .textArray(["a", nil, "c,\"d\"{}"]), .doubleArray([-0.0, .infinity, nil])])
        #expect(inserted == 3)
        let row = try connection.query("SELECT array_agg(i ORDER BY s), array_agg(s ORDER BY s), array_agg(d ORDER BY s) FROM t")[0]
        #expect(try row.value(0) == .int64Array([1, nil, 2]))
        #expect(try row.value(1) == .textArray(["a", "c,\"d\"{}", nil]))
        #expect(try row.value(2) == .doubleArray([-0.0, nil, .infinity]))
        let empty = try connection.query("SELECT $1::int8[]", [.int64Array([])])[0]
        #expect(try empty.value(0) == .int64Array([]))
        let flags = try connection.query("SELECT $1::bool[], $2::bytea[]", [.boolArray([true, nil]), .byteaArray([Data([0]), nil])])[0]
        #expect(try flags.value(0) == .boolArray([true, nil]))
        #expect(try flags.value(1) == .byteaArray([Data([0]), nil]))
    }

    @Test func serverTypesAreReadAsTheirSwiftValues() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let row = try connection.query("""
            SELECT 7::int2, 8::int4, 9::oid, 1.5::float4, 12345678901234567890.000100::numeric, (-0.5)::numeric,
                   'x'::varchar, 'name'::name, '{"a":1}'::jsonb, '00112233-4455-6677-8899-aabbccddeeff'::uuid,
                   sum(x) FROM (VALUES (1::int8), (2)) v(x)
            """)[0]
        #expect(try row.int64(0) == 7)
        #expect(try row.int64(1) == 8)
        #expect(try row.int64(2) == 9)
        #expect(try row.double(3) == 1.5)
        #expect(try row.text(4) == "12345678901234567890.000100")
        #expect(try row.text(5) == "-0.5")
        #expect(try row.text(6) == "x")
        #expect(try row.text(7) == "name")
        #expect(try row.text(8) == #"{"a": 1}"#)
        #expect(try row.text(9) == "00112233-4455-6677-8899-aabbccddeeff")
        #expect(try row.int64(10) == 3)  // sum(int8) is numeric
        #expect(throws: StratusError.self) { try row.int64(6) }
        #expect(throws: StratusError.self) { try row.bytes(0) }
    }

    @Test func textWithNULIsRefusedWithoutShowingIt() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let error = try #require(throws: StratusError.self) {
            try connection.query("SELECT $1, $2", [.int64(1), .text("secret\u{0}value")])
        }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("$2"))
        #expect(!error.message.contains("secret"))
        #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
    }

    @Test func preparedStatementsAreReusedPerConnection() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let sql = "SELECT $1::int8 + 1 AS next"
        for i in 0..<5 {
            #expect(try connection.query(sql, [.int64(Int64(i))])[0].int64(0) == Int64(i + 1))
        }
        let prepared = try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", [.text(sql)], prepare: false)
        #expect(try prepared[0].int64(0) == 1)
        // The same SQL with other parameter types is another statement.
        #expect(try connection.query(sql, [.text("41")])[0].int64(0) == 42)
        let unprepared = try connection.query("SELECT $1::int8 * 2", [.int64(21)], prepare: false)
        #expect(try unprepared[0].int64(0) == 42)
        #expect(try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%* 2'", prepare: false)[0].int64(0) == 0)
    }

    @Test func aStatementPreparedBeforeASchemaChangeStillRuns() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (a int8); INSERT INTO t VALUES (1)")
        #expect(try connection.query("SELECT * FROM t").columnCount == 1)
        try connection.executeScript("ALTER TABLE t ADD COLUMN b int8")
        // PostgreSQL refuses the cached plan once (feature_not_supported); the next run prepares anew.
        let first = Result { try connection.query("SELECT * FROM t").columnCount }
        if case .failure(let error as StratusError) = first { #expect(error.sqlState == "0A000") }
        #expect(try connection.query("SELECT * FROM t").columnCount == 2)
    }

    @Test func resultsNameTheirColumnsAndCounts() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8, \"Body\" text)")
        #expect(try connection.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')") == 2)
        let result = try connection.query("SELECT id, \"Body\" FROM t ORDER BY id")
        #expect(result.count == 2)
        #expect(result.columnName(1) == "Body")
        #expect(result.columnIndex(named: "Body") == 1)
        #expect(result.columnIndex(named: "body") == nil)
        #expect(result.commandTag == "SELECT 2")
        #expect(try connection.execute("UPDATE t SET id = id + 10") == 2)
        #expect(try connection.execute("CREATE INDEX ON t (id)") == 0)
    }

    @Test func identifiersAreQuoted() throws {
        #expect(try PostgresConnection.quoteIdentifier("zone") == "\"zone\"")
        #expect(try PostgresConnection.quoteIdentifier("we\"ird name") == "\"we\"\"ird name\"")
        #expect(throws: StratusError.self) { try PostgresConnection.quoteIdentifier("") }
        #expect(throws: StratusError.self) { try PostgresConnection.quoteIdentifier("a\u{0}b") }
        #expect(throws: StratusError.self) { try PostgresConnection.quoteIdentifier(String(repeating: "x", count: 64)) }
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let table = try PostgresConnection.quoteIdentifier("Robert\"); DROP TABLE t; --")
        try connection.executeScript("CREATE TABLE \(table) (v text)")
        try connection.execute("INSERT INTO \(table) VALUES ($1)", [.text("ok")])
        #expect(try connection.query("SELECT v FROM \(table)")[0].text(0) == "ok")
    }

    // MARK: - Transactions

    @Test func aTransactionIsRolledBackWhenItsBodyThrows() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY)")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO t VALUES ($1)", [.int64(1)])
                throw Stop()
            }
        }
        #expect(connection.transactionStatus == .idle)
        // A failing statement rolls back the statements before it.
        #expect(throws: StratusError.self) {
            try connection.transaction(isolation: .serializable) {
                try connection.execute("INSERT INTO t VALUES ($1)", [.int64(2)])
                try connection.execute("INSERT INTO t VALUES ($1)", [.int64(2)])
            }
        }
        #expect(connection.transactionStatus == .idle)
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
        try connection.transaction { try connection.execute("INSERT INTO t VALUES (3)") }
        #expect(try connection.query("SELECT id FROM t")[0].int64(0) == 3)
    }

    @Test func aSavepointUndoesOnlyItsOwnChanges() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY)")
        try connection.transaction {
            try connection.execute("INSERT INTO t VALUES (1)")
            let duplicate = Result { try connection.savepoint { try connection.execute("INSERT INTO t VALUES (1)") } }
            #expect(throws: StratusError.self) { try duplicate.get() }
            try connection.savepoint { try connection.execute("INSERT INTO t VALUES (2)") }
        }
        #expect(try connection.query("SELECT array_agg(id ORDER BY id) FROM t")[0].value(0) == .int64Array([1, 2]))
        #expect(throws: StratusError.self) { try connection.savepoint {} }
    }

    @Test func aReadOnlyTransactionRefusesWrites() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8)")
        let error = try #require(throws: StratusError.self) {
            try connection.transaction(isolation: .repeatableRead, readOnly: true) {
                try connection.execute("INSERT INTO t VALUES (1)")
            }
        }
        #expect(error.sqlState == "25006")
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
    }

    @Test func commitOfAFailedTransactionIsAnError() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.begin()
        #expect(throws: StratusError.self) { try connection.execute("SELECT 1/0") }
        #expect(connection.transactionStatus == .failedTransaction)
        #expect(throws: StratusError.self) { try connection.commit() }
        #expect(connection.transactionStatus == .idle)
    }

    // MARK: - COPY

    @Test func copyLoadsTenThousandRows() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, s text, d float8, b bytea, f bool, a text[])")
        let copied = try connection.copyIn("COPY t (id, s, d, b, f, a) FROM STDIN") { writer in
            for i in 0..<10_000 {
                try writer.writeRow([
                    .int64(Int64(i)),
                    i % 10 == 0 ? .null : .text("row \(i)\ttab\nline \\N back\\slash ü"),
                    .double(i == 1 ? -0.0 : Double(i) / 3),
                    .bytea(Data([0, UInt8(i % 256), 0])),
                    .bool(i % 2 == 0),
                    .textArray(["x", nil, "q\"uote"]),
                ])
            }
            #expect(writer.rowCount == 10_000)
        }
        #expect(copied == 10_000)
        let summary = try connection.query("SELECT count(*), count(s), sum(id) FROM t")[0]
        #expect(try summary.int64(0) == 10_000)
        #expect(try summary.int64(1) == 9_000)
        #expect(try summary.int64(2) == 49_995_000)
        let row = try connection.query("SELECT s, d, b, f, a FROM t WHERE id = $1", [.int64(7)])[0]
        #expect(try row.text(0) == "row 7\ttab\nline \\N back\\slash ü")
        #expect(try row.double(1) == 7.0 / 3)
        #expect(try row.bytes(2) == Data([0, 7, 0]))
        #expect(try row.bool(3) == false)
        #expect(try row.value(4) == .textArray(["x", nil, "q\"uote"]))
        let negativeZero = try connection.query("SELECT d FROM t WHERE id = 1")[0].double(0)
        #expect(negativeZero?.bitPattern == (-0.0).bitPattern)
    }

    @Test func aFailedCopyCopiesNothing() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY)")
        struct SourceFailed: Error {}
        #expect(throws: SourceFailed.self) {
            try connection.copyIn("COPY t FROM STDIN") { writer in
                try writer.writeRow([.int64(1)])
                throw SourceFailed()
            }
        }
        let error = try #require(throws: StratusError.self) {
            try connection.copyIn("COPY t FROM STDIN") { writer in
                try writer.writeRow([.int64(1)])
                try writer.writeRow([.text("secret-not-a-number")])
            }
        }
        #expect(error.code == .invalidArguments)
        #expect(!error.message.contains("secret"))
        #expect(throws: StratusError.self) { try connection.copyIn("SELECT 1") { _ in } }
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
        #expect(connection.transactionStatus == .idle)
    }

    @Test func copyOutStreamsRows() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        var lines: [String] = []
        let count = try connection.copyOut("COPY (SELECT g, 'v' || g FROM generate_series(1, 1000) g) TO STDOUT") { row in
            lines.append(String(decoding: row, as: UTF8.self))
        }
        #expect(count == 1000)
        #expect(lines.count == 1000)
        #expect(lines.last == "1000\tv1000\n")
        struct Enough: Error {}
        var seen = 0
        #expect(throws: Enough.self) {
            try connection.copyOut("COPY (SELECT g FROM generate_series(1, 10000000) g) TO STDOUT") { _ in
                seen += 1
                if seen == 10 { throw Enough() }
            }
        }
        #expect(seen == 10)
        #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
    }

    // MARK: - Pipelines

    @Test func aPipelineRunsManyStatementsInOneRoundTrip() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, s text)")
        var pipeline = PostgresPipeline()
        for i in 0..<5_000 {
            try pipeline.append("INSERT INTO t VALUES ($1, $2)", [.int64(Int64(i)), .text(String(repeating: "p", count: i % 100))])
        }
        try pipeline.append("SELECT count(*), sum(length(s)) FROM t")
        let results = try connection.run(pipeline)
        #expect(results.count == 5_001)
        #expect(results.prefix(5_000).allSatisfy { $0.affectedRowCount == 1 })
        #expect(try results[5_000][0].int64(0) == 5_000)
        #expect(try results[5_000][0].int64(1) == 50 * 99 * 50)
        // Prepared once, reused outside pipelines too.
        #expect(try connection.execute("INSERT INTO t VALUES ($1, $2)", [.int64(-1), .text("")]) == 1)
        #expect(try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement = 'INSERT INTO t VALUES ($1, $2)'", prepare: false)[0].int64(0) == 1)
        #expect(try connection.run(PostgresPipeline()).isEmpty)
    }

    @Test func aFailingStatementStopsThePipelineAndAppliesNothing() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY)")
        var pipeline = PostgresPipeline()
        for i in 0..<100 { try pipeline.append("INSERT INTO t VALUES ($1)", [.int64(Int64(i % 60))]) }
        let error = try #require(throws: StratusError.self) { try connection.run(pipeline) }
        #expect(error.code == .constraintViolation)
        #expect(error.sqlState == "23505")
        #expect(error.message.contains("statement 61 of 100"))
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
        // A statement that cannot be prepared fails the same way, and the connection goes on.
        var broken = PostgresPipeline()
        try broken.append("INSERT INTO t VALUES (1)")
        try broken.append("INSERT INTO missing VALUES (1)")
        #expect(throws: StratusError.self) { try connection.run(broken) }
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
        #expect(connection.transactionStatus == .idle)
    }

    @Test func aPipelineInsideATransactionJoinsIt() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8)")
        try connection.begin()
        var pipeline = PostgresPipeline()
        for i in 0..<10 { try pipeline.append("INSERT INTO t VALUES ($1)", [.int64(Int64(i))]) }
        _ = try connection.run(pipeline)
        #expect(connection.transactionStatus == .inTransaction)
        try connection.rollback()
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
    }

    // MARK: - Notifications and cancellation

    @Test func aNotificationWakesAWaiter() throws {
        let database = try PostgresTestServer.makeSchema()
        let listener = try PostgresConnection(url: database.url)
        try listener.listen(to: "zone changes")
        #expect(try listener.nextNotification(timeout: 0.05) == nil)
        // The sender's connection is opened here, with `try`, and its error kept: a sender that
        // failed with `try?` dropped the notification silently, and the waiter only timed out.
        // (Used by the thread alone from here on.)
        nonisolated(unsafe) let connection = try PostgresConnection(url: database.url)
        let sendError = Box<String?>(nil)
        let sent = DispatchSemaphore(value: 0)
        let sender = Thread {
            do { try connection.notify("zone changes", payload: "zone-1 ü") } catch { sendError.value = "\(error)" }
            sent.signal()
        }
        sender.start()
        let received = try listener.nextNotification(timeout: 300)
        sent.wait()
        #expect(sendError.value == nil, "the NOTIFY failed: \(sendError.value ?? "")")
        let notification = try #require(received)
        #expect(notification.channel == "zone changes")
        #expect(notification.payload == "zone-1 ü")
        #expect(notification.senderProcessID != listener.backendProcessID)
        // Sent inside a transaction: delivered at its commit, one per distinct payload.
        try listener.transaction {
            try listener.notify("zone changes", payload: "a")
            try listener.notify("zone changes", payload: "a")
            try listener.notify("zone changes", payload: "b")
        }
        #expect(try listener.nextNotification(timeout: 300)?.payload == "a")
        #expect(try listener.nextNotification(timeout: 300)?.payload == "b")
        try listener.unlisten(from: "zone changes")
        try listener.notify("zone changes", payload: "c")
        #expect(try listener.nextNotification(timeout: 0.05) == nil)
    }

    @Test func aRunningStatementCanBeCancelled() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        let canceller = try connection.makeCanceller()
        let pid = connection.backendProcessID
        let url = database.url
        let watcher = Thread {
            // Cancel once the statement is seen running, not after a guessed delay: a cancel sent
            // before it runs is lost, and the statement would sleep its 120 s and succeed. The
            // looking goes on for minutes (an observer that could not connect tries again), not
            // for 60 s after which it used to cancel anyway.
            let deadline = ContinuousClock.now + .seconds(300)
            var observer: PostgresConnection?
            while ContinuousClock.now < deadline {
                if observer == nil { observer = try? PostgresConnection(url: url) }
                let running = try? observer?.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep%'",
                    [.int64(Int64(pid))])[0].int64(0)
                if running == 1 {
                    canceller.cancel()
                    return
                }
                usleep(10_000)
            }
        }
        watcher.start()
        let error = try #require(throws: StratusError.self) { try connection.execute("SELECT pg_sleep(120)") }
        #expect(error.code == .operationCancelled)
        #expect(error.sqlState == "57014")
        #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
    }

    @Test func aStatementTimeoutIsTransient() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url, settings: ["options": "-c statement_timeout=50"])
        let error = try #require(throws: StratusError.self) { try connection.execute("SELECT pg_sleep(30)") }
        #expect(error.code == .serviceUnavailable)
        #expect(error.isTransient)
        #expect(error.retryAfterSeconds != nil)
    }
}
