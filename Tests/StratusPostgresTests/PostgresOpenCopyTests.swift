import Foundation
import Stratus
@testable import StratusPostgres
import StratusTestSupport
import Testing

/// A COPY left open while the caller does other work (how the engine streams new rows), and a
/// statement sent ahead of its answer (how a stream reads its next rows): the connection ends
/// or drops them before any other statement, and keeps what failed.
@Suite("PostgreSQL connection: open COPY and statements sent ahead", .requiresPostgres)
struct PostgresOpenCopyTests {
    static func rows(_ ids: Range<Int64>, header: Bool) -> [UInt8] {
        var copy = PostgresBinaryCopy(header: header)
        for id in ids {
            copy.beginRow(fields: 4)
            copy.int64(id)
            copy.text("row \(id)\ttab ü")
            copy.double(id == 1 ? -0.0 : Double(id) / 3)
            if id % 2 == 0 { copy.jsonb(utf8: Array(#"{"a": [1, "x"]}"#.utf8)) } else { copy.null() }
        }
        return copy.bytes
    }

    @Test func anOpenCopyEndsBeforeTheNextStatement() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, s text, d float8, j jsonb)")
        try connection.transaction {
            try connection.beginCopy("COPY t (id, s, d, j) FROM STDIN (FORMAT binary)")
            try connection.sendCopyData(Self.rows(0..<500, header: true))
            try connection.sendCopyData(Self.rows(500..<1_000, header: false))
            #expect(connection.isCopying)
            // The next statement ends the COPY and sees its rows.
            #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 1_000)
            #expect(!connection.isCopying && connection.openCopyFailure == nil)
        }
        let row = try connection.query("SELECT s, d, j::text FROM t WHERE id = 4")[0]
        #expect(try row.text(0) == "row 4\ttab ü")
        #expect(try row.double(1) == 4.0 / 3)
        #expect(try row.text(2) == #"{"a": [1, "x"]}"#)
        #expect(try connection.query("SELECT d FROM t WHERE id = 1")[0].double(0)?.bitPattern == (-0.0).bitPattern)
    }

    @Test func aFailedOpenCopyFailsTheNextStatementAndIsKept() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, s text, d float8, j jsonb)")
        try connection.begin()
        try connection.beginCopy("COPY t (id, s, d, j) FROM STDIN (FORMAT binary)")
        try connection.sendCopyData(Self.rows(0..<10, header: true))
        try connection.sendCopyData(Self.rows(5..<6, header: false))
        let error = try #require(throws: StratusError.self) { try connection.query("SELECT count(*) FROM t") }
        #expect(error.sqlState == "23505")
        #expect(connection.openCopyFailure?.sqlState == "23505")
        #expect(connection.transactionStatus == .failedTransaction)
        try connection.rollback()
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
    }

    @Test func rollbackAbandonsAnOpenCopy() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.executeScript("CREATE TABLE t (id int8 PRIMARY KEY, s text, d float8, j jsonb)")
        try connection.begin()
        try connection.beginCopy("COPY t (id, s, d, j) FROM STDIN (FORMAT binary)")
        try connection.sendCopyData(Self.rows(0..<10, header: true))
        try connection.rollback()
        #expect(!connection.isCopying && connection.transactionStatus == .idle)
        #expect(try connection.query("SELECT count(*) FROM t")[0].int64(0) == 0)
    }

    @Test func aStatementSentAheadIsReceivedOrDropped() throws {
        let database = try PostgresTestServer.makeSchema()
        let connection = try PostgresConnection(url: database.url)
        try connection.send("SELECT 41 + 1")
        #expect(try connection.receive()[0].int64(0) == 42)
        // Another statement drops an answer nobody received.
        try connection.send("SELECT 1")
        #expect(try connection.query("SELECT 2::int8")[0].int64(0) == 2)
        #expect(throws: StratusError.self) { try connection.receive() }
        try connection.send("SELECT 1/0")
        #expect(throws: StratusError.self) { try connection.receive() }
        #expect(connection.transactionStatus == .idle)
    }
}
