import CLibPQ
import Foundation
import Stratus

/// Statements sent to the server together and answered together: one round trip for all of
/// them instead of one each (libpq's pipeline mode).
///
/// Run by ``PostgresConnection/run(_:)``. Outside a transaction the statements form one
/// implicit transaction: all of them apply, or none. Inside one, a failure fails the
/// transaction. After a failing statement, the later ones are skipped.
///
/// ```swift
/// var pipeline = PostgresPipeline()
/// for (id, body) in notes {
///     try pipeline.append("INSERT INTO notes (id, body) VALUES ($1, $2)", [.int64(id), .text(body)])
/// }
/// let results = try connection.run(pipeline)
/// ```
public struct PostgresPipeline {
    struct Statement {
        let sql: String
        let parameters: PostgresParameters
    }

    private(set) var statements: [Statement] = []

    public init() {}

    /// How many statements the pipeline holds.
    public var count: Int { statements.count }

    /// Adds a statement (one, no `;`-separated lists) with its parameters.
    ///
    /// - Throws: `invalidArguments` for text with a NUL character.
    public mutating func append(_ sql: String, _ parameters: [PostgresValue] = []) throws {
        statements.append(Statement(sql: sql, parameters: try PostgresParameters(parameters)))
    }
}

extension PostgresConnection {
    /// Sends every statement of `pipeline` and reads their results, one per statement, in
    /// order. Statements are prepared once per connection as with ``query(_:_:prepare:)``.
    ///
    /// ```swift
    /// let counts = try connection.run(pipeline).map(\.affectedRowCount)
    /// ```
    ///
    /// - Throws: the first failing statement's error (its message says which statement), as
    ///   ``query(_:_:prepare:)`` describes; nothing of an implicit transaction is applied then.
    public func run(_ pipeline: PostgresPipeline) throws -> [PostgresResult] {
        guard !pipeline.statements.isEmpty else { return [] }
        try settle()
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        guard PQenterPipelineMode(handle) == 1 else {
            throw StratusError(.internalError, "the connection to \(server) cannot enter pipeline mode: \(PostgresConnectionString.messageLine(String(cString: PQerrorMessage(handle))))")
        }
        // Non-blocking, so that neither side can wait forever for the other to read: the
        // server's answers are read while the statements are still being sent.
        PQsetnonblocking(handle, 1)
        defer {
            if isOpen { PQexitPipelineMode(handle) }
            PQsetnonblocking(handle, 0)
        }
        var reader = PipelineReader(connection: self, statements: pipeline.statements, wasInTransaction: wasInTransaction)
        var preparedHere: [String: String] = [:]
        for (index, statement) in pipeline.statements.enumerated() {
            let key = Self.statementKey(statement.sql, statement.parameters)
            var name = cachedStatementName(forKey: key) ?? preparedHere[key]
            if name == nil {
                let newName = nextStatementName()
                let sent = statement.parameters.withPointers { types, _, _, _ in
                    PQsendPrepare(handle, newName, statement.sql, Int32(statement.parameters.count), types)
                }
                guard sent == 1 else { throw reader.sendFailure() }
                reader.expect(.prepare(key: key, name: newName, statement: index))
                preparedHere[key] = newName
                name = newName
            }
            let sent = statement.parameters.withPointers { _, values, lengths, formats in
                PQsendQueryPrepared(handle, name, Int32(statement.parameters.count), values, lengths, formats, 1)
            }
            guard sent == 1 else { throw reader.sendFailure() }
            reader.expect(.query(statement: index))
            if index % 64 == 63 { try reader.readAvailable() }
        }
        guard PQpipelineSync(handle) == 1 else { throw reader.sendFailure() }
        reader.syncSent = true
        while !reader.synced {
            let flushed = PQflush(handle)
            guard flushed >= 0 else { throw reader.sendFailure() }
            try reader.readAvailable()
            if reader.synced { break }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN) | (flushed == 1 ? Int16(POLLOUT) : 0), revents: 0)
            if poll(&descriptor, 1, -1) < 0 && errno != EINTR { throw reader.sendFailure() }
        }
        if let error = reader.firstError { throw error }
        return reader.results.map { $0! }
    }
}

/// Reads a pipeline's results as they arrive, matching them with what was sent.
private struct PipelineReader {
    enum Expected {
        case prepare(key: String, name: String, statement: Int)
        case query(statement: Int)
    }

    let connection: PostgresConnection
    let statements: [PostgresPipeline.Statement]
    let wasInTransaction: Bool
    private var expected: [Expected] = []
    private var position = 0
    var results: [PostgresResult?]
    var firstError: StratusError?
    private(set) var synced = false

    init(connection: PostgresConnection, statements: [PostgresPipeline.Statement], wasInTransaction: Bool) {
        self.connection = connection
        self.statements = statements
        self.wasInTransaction = wasInTransaction
        results = Array(repeating: nil, count: statements.count)
        expected.reserveCapacity(statements.count)
    }

    /// Whether the sync that ends the pipeline was sent (its answer is the last).
    var syncSent = false

    mutating func expect(_ entry: Expected) { expected.append(entry) }

    /// Handles every result that has arrived, without waiting for more.
    mutating func readAvailable() throws {
        let handle = connection.handle
        guard PQconsumeInput(handle) == 1 else { throw sendFailure() }
        while !synced, PQisBusy(handle) == 0 {
            // Every statement sent so far is answered; before the sync is sent, libpq would
            // answer NULL from here on.
            if position == expected.count && !syncSent { break }
            guard let result = PQgetResult(handle) else {
                // The end of one statement's results.
                position += 1
                continue
            }
            let status = PQresultStatus(result)
            if status == PGRES_PIPELINE_SYNC {
                PQclear(result)
                synced = true
                break
            }
            guard position < expected.count else {
                PQclear(result)
                throw StratusError(.internalError, "PostgreSQL at \(connection.server) answered more results than the pipeline sent")
            }
            switch (expected[position], status) {
            case (_, PGRES_PIPELINE_ABORTED):
                PQclear(result)
            case (.prepare(let key, let name, _), PGRES_COMMAND_OK):
                PQclear(result)
                connection.rememberStatement(name, forKey: key)
            case (.query(let index), PGRES_COMMAND_OK), (.query(let index), PGRES_TUPLES_OK), (.query(let index), PGRES_EMPTY_QUERY):
                results[index] = PostgresResult(result)
            case (.prepare(_, _, let index), _), (.query(let index), _):
                var error = connection.failure(result, sql: statements[index].sql, wasInTransaction: wasInTransaction)
                PQclear(result)
                if firstError == nil {
                    error.message = "statement \(index + 1) of \(statements.count) in a pipeline: " + error.message
                    firstError = error
                }
            }
        }
    }

    /// The error for a pipeline that could not be sent or read: the connection broke.
    func sendFailure() -> StratusError {
        connection.failure(nil, sql: nil, wasInTransaction: wasInTransaction)
    }
}
