import Dispatch
import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

@Suite("PostgreSQL connection pool", .requiresPostgres)
struct PostgresConnectionPoolTests {
    @Test func theConnectionAfterTheLastWaitsThenTimesOut() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 2, acquireTimeout: 0.2)
        try pool.withConnection { first in
            try pool.withConnection { second in
                #expect(first.backendProcessID != second.backendProcessID)
                let error = try #require(throws: StratusError.self) { try pool.withConnection { _ in } }
                #expect(error.code == .serviceUnavailable)
                #expect(error.isTransient)
                #expect(error.message.contains("all 2 connections"))
                #expect(pool.openConnectionCount == 2)
            }
        }
        // Both came back: the next callers get them without opening more.
        try pool.withConnection { _ in try pool.withConnection { _ in } }
        #expect(pool.openConnectionCount == 2)
    }

    @Test func aWaitingCallerGetsTheConnectionAnotherReturns() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 1, acquireTimeout: 120)
        let holding = DispatchSemaphore(value: 0)
        let waiterDone = DispatchSemaphore(value: 0)
        let holderPID = try pool.withConnection { connection in
            let waiter = Thread {
                holding.wait()
                _ = try? pool.withConnection { _ = try $0.query("SELECT 1") }
                waiterDone.signal()
            }
            waiter.start()
            holding.signal()
            return connection.backendProcessID
        }
        waiterDone.wait()
        #expect(pool.openConnectionCount == 1)
        #expect(try pool.withConnection { $0.backendProcessID } == holderPID)
    }

    @Test func aBrokenConnectionIsDiscarded() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 1)
        let firstPID = try pool.withConnection { $0.backendProcessID }
        // Killed while in use: the caller sees the failure, the pool replaces the connection.
        let error = try #require(throws: StratusError.self) {
            try pool.withConnection { try $0.execute("SELECT pg_terminate_backend(pg_backend_pid())") }
        }
        #expect(error.code == .serviceUnavailable)
        #expect(pool.openConnectionCount == 0)
        let secondPID = try pool.withConnection { connection throws -> Int32 in
            #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
            return connection.backendProcessID
        }
        #expect(secondPID != firstPID)
        // Killed while idle in the pool (a server restart would do the same): replaced on the next use.
        let observer = try PostgresConnection(url: database.url)
        #expect(try observer.query("SELECT pg_terminate_backend($1::int4)", [.int64(Int64(secondPID))])[0].bool(0) == true)
        try waitUntilGone(secondPID, observer)
        let thirdPID = try pool.withConnection { connection throws -> Int32 in
            #expect(try connection.query("SELECT 1")[0].int64(0) == 1)
            return connection.backendProcessID
        }
        #expect(thirdPID != secondPID)
        #expect(pool.openConnectionCount == 1)
    }

    /// Waits until the terminated backend has left: the pool would otherwise hand out a
    /// connection that is still being torn down. The bound is minutes and fails loudly, rather
    /// than going on after 60 s as if the backend were gone.
    private func waitUntilGone(_ pid: Int32, _ observer: PostgresConnection) throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < deadline {
            let count = try observer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int4", [.int64(Int64(pid))])[0].int64(0)
            if count == 0 { return }
            usleep(10_000)
        }
        throw PostgresTestServerError(message: "backend \(pid) was still there 5 minutes after pg_terminate_backend")
    }

    @Test func aConnectionComesBackWithoutItsTransactionOrListening() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 1)
        try pool.withConnection { try $0.executeScript("CREATE TABLE t (id int8)") }
        try pool.withConnection { connection in
            try connection.begin()
            try connection.execute("INSERT INTO t VALUES (1)")
            try connection.listen(to: "changes")
        }
        try pool.withConnection { connection throws in
            #expect(connection.transactionStatus == .idle)
            #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
            #expect(try connection.query("SELECT count(*) FROM pg_listening_channels()")[0].int64(0) == 0)
        }
        // A failed transaction too.
        try pool.withConnection { connection in
            try connection.begin()
            _ = try? connection.execute("SELECT 1/0")
            #expect(connection.transactionStatus == .failedTransaction)
        }
        #expect(try pool.withConnection { $0.transactionStatus } == .idle)
        #expect(pool.openConnectionCount == 1)
    }

    @Test func withTransactionCommitsOrRollsBack() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url)
        try pool.withConnection { try $0.executeScript("CREATE TABLE t (id int8 PRIMARY KEY)") }
        try pool.withTransaction { try $0.execute("INSERT INTO t VALUES (1)") }
        #expect(throws: StratusError.self) {
            try pool.withTransaction(isolation: .serializable) { connection in
                try connection.execute("INSERT INTO t VALUES (2)")
                try connection.execute("INSERT INTO t VALUES (1)")
            }
        }
        let ids = try pool.withTransaction(readOnly: true) { try $0.query("SELECT array_agg(id) FROM t")[0].value(0) }
        #expect(ids == .int64Array([1]))
    }

    @Test func threadsShareABoundedPool() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 3, acquireTimeout: 120)
        try pool.withConnection { try $0.executeScript("CREATE TABLE counter (n int8); INSERT INTO counter VALUES (0)") }
        let threads = 8, increments = 25
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments {
                // Serialization failures are transient: retry them, as operations do.
                while true {
                    do {
                        try pool.withTransaction(isolation: .serializable) { try $0.execute("UPDATE counter SET n = n + 1") }
                        break
                    } catch let error as StratusError where error.isTransient {
                        continue
                    } catch {
                        Issue.record(error)
                        return
                    }
                }
            }
        }
        #expect(try pool.withConnection { try $0.query("SELECT n FROM counter")[0].int64(0) } == Int64(threads * increments))
        #expect(pool.openConnectionCount <= 3)
    }

    @Test func idleConnectionsCanBeClosed() throws {
        let database = try PostgresTestServer.makeSchema()
        let pool = try PostgresConnectionPool(url: database.url, maximumConnections: 2)
        try pool.withConnection { _ in try pool.withConnection { _ in } }
        #expect(pool.openConnectionCount == 2)
        pool.closeIdleConnections()
        #expect(pool.openConnectionCount == 0)
        #expect(try pool.withConnection { try $0.query("SELECT 1")[0].int64(0) } == 1)
    }
}
