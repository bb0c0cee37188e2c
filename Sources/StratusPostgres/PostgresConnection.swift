import CLibPQ
import Foundation
import Stratus
import Synchronization

/// One connection to a PostgreSQL server, through libpq.
///
/// Not Sendable: one thread uses a connection at a time (``PostgresConnectionPool`` hands
/// each to one caller); only its ``PostgresCanceller`` may be used from elsewhere. The libpq
/// connection is closed only in `deinit`, also when opening failed half-way.
///
/// Statements take their values as parameters, never spliced into the SQL; names (tables,
/// schemas, channels) go through ``quoteIdentifier(_:)``. Statements run through ``query(_:_:prepare:)``
/// are prepared once per connection and reused.
///
/// ```swift
/// let connection = try PostgresConnection(url: "postgresql://app@db1/stratus")
/// try connection.execute("INSERT INTO notes (id, body) VALUES ($1, $2)", [.int64(1), .text("hi")])
/// for row in try connection.query("SELECT id, body FROM notes WHERE id > $1", [.int64(0)]) {
///     print(try row.int64(0) ?? 0, try row.text(1) ?? "")
/// }
/// ```
public final class PostgresConnection {
    let handle: OpaquePointer
    /// Where the server is, for messages: `db1:5432`, or the socket's path.
    public let server: String
    /// The connection string this connection was opened with, its password hidden.
    public let redactedURL: String
    /// Prepared statements by SQL and parameter types, with their names on the server.
    private var preparedStatements: [String: String] = [:]
    private var preparedStatementCount = 0
    let cancelRequest = CancelRequest()
    /// What the notice receiver learned; lives as long as the connection, which the receiver
    /// is called from only.
    private let notices = ServerNotices()
    /// Whether LISTEN was used, so that the pool knows to UNLISTEN before reuse.
    var isListening = false
    /// The canceller its pool keeps while the connection is lent (made once).
    lazy var poolCanceller: PostgresCanceller? = try? makeCanceller()
    /// How many ``savepoint(_:)`` calls are running, for their names.
    var savepointDepth = 0
    /// The statement ``send(_:)`` sent and ``receive()`` has not read.
    private var sentStatement: (sql: String, wasInTransaction: Bool)?
    /// The COPY ``beginCopy(_:)`` started and that is still open.
    var openCopy: (sql: String, wasInTransaction: Bool)?
    /// The error of the last COPY left open, once it ended and failed; cleared by the next
    /// ``beginCopy(_:)`` and by ``forgetCopyFailure()``.
    var openCopyFailure: StratusError?

    /// The most prepared statements a connection keeps before forgetting them all.
    static let maximumPreparedStatements = 500

    /// Opens a connection the way `psql` would: `url` is a URL or a `key=value` string, read
    /// by libpq, and what it leaves out comes from libpq's environment variables (`PGHOST`,
    /// `PGUSER`, `PGPASSWORD`, `PGSSLMODE`…), `~/.pgpass` and service files. An empty string
    /// uses the environment alone.
    ///
    /// Stratus adds `application_name=stratus` and `connect_timeout=10` unless the URL or
    /// `PGAPPNAME` / `PGCONNECT_TIMEOUT` say otherwise, and always talks UTF-8. `settings`
    /// (libpq keywords) override the URL.
    ///
    /// ```swift
    /// let connection = try PostgresConnection(url: "postgres://app@db1/stratus?sslmode=require")
    /// ```
    ///
    /// - Throws: `invalidArguments` for a string libpq cannot read; `notAuthenticated` or
    ///   `permissionFailure` when the server refuses the login; `badContainer` for a missing
    ///   database; `serviceUnavailable` (with `retryAfterSeconds`) when the server cannot be
    ///   reached, or has had no free connection slot for 30 seconds (a full server is waited
    ///   for). Messages name the host and port, never the password.
    public init(url: String, settings: [String: String] = [:]) throws {
        let url = PostgresConnectionString.normalized(url)
        redactedURL = PostgresConnectionString.redacted(url)
        handle = try Self.connect(url: url, settings: settings)
        server = Self.serverDescription(handle)
        // Notices (`NOTICE: table does not exist, skipping`) would go to stderr; Stratus
        // decides itself what to log. A FATAL message received while idle (the server
        // shutting down, the backend terminated) arrives as a notice too, and dooms the
        // connection before its socket is seen closed.
        PQsetNoticeReceiver(handle, { context, result in
            guard let context, let result,
                  let severity = PQresultErrorField(result, stratus_pq_diag_severity_nonlocalized()).map({ String(cString: $0) }),
                  severity == "FATAL" || severity == "PANIC" else { return }
            Unmanaged<ServerNotices>.fromOpaque(context).takeUnretainedValue().saidGoodbye = true
        }, Unmanaged.passUnretained(notices).toOpaque())
    }

    deinit {
        PQfinish(handle)
    }

    private static func connect(url: String, settings: [String: String]) throws -> OpaquePointer {
        // libpq reads a string with '=' or a URL prefix as connection settings, anything else
        // as a database name; only the former can be malformed.
        if PostgresConnectionString.isURL(url) || url.contains("=") {
            _ = try PostgresConnectionString.settings(in: url)
        }
        var pairs: [(String, String)] = []
        if getenv("PGAPPNAME") == nil { pairs.append(("application_name", "stratus")) }
        if getenv("PGCONNECT_TIMEOUT") == nil { pairs.append(("connect_timeout", "10")) }
        // Keywords after `dbname` override what the URL says, those before it do not.
        pairs.append(("dbname", url))
        pairs.append(("client_encoding", "UTF8"))
        pairs += settings.sorted { $0.key < $1.key }
        let keywords = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        // A server whose connection slots are all taken (SQLSTATE 53300) frees them as its
        // clients finish: a job started while others run waits for a slot, up to
        // `fullServerPatience`, rather than failing at once.
        let started = ContinuousClock.now
        var pause = Duration.milliseconds(20)
        while true {
            let connection = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keywordPointers in
                (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valuePointers in
                    PQconnectdbParams(keywordPointers.baseAddress, valuePointers.baseAddress, 1)
                }
            }
            guard let connection else {
                throw StratusError(.internalError, "libpq could not allocate a connection (out of memory)")
            }
            if PQstatus(connection) == CONNECTION_OK { return connection }
            if isServerFull(connection), ContinuousClock.now - started + pause < fullServerPatience {
                PQfinish(connection)
                usleep(useconds_t(pause / .microseconds(1)))
                pause = min(pause * 2, .seconds(1))
                continue
            }
            let error = connectError(connection, url: url)
            PQfinish(connection)
            throw error
        }
    }

    /// How long a connection waits for a slot on a server that has none free.
    static let fullServerPatience = Duration.seconds(30)

    /// Whether the server refused the connection because its connection slots are all taken
    /// (`too many clients already`, the last slots being reserved for superusers, or the
    /// role's or the database's `CONNECTION LIMIT` reached).
    private static func isServerFull(_ connection: OpaquePointer) -> Bool {
        let message = String(cString: PQerrorMessage(connection)).lowercased()
        return ["too many clients already", "remaining connection slots are reserved", "too many connections for"].contains(where: message.contains)
    }

    /// Tells a refused login from an unreachable server. libpq gives no SQLSTATE for a failed
    /// connection, so its (English, client-side or server-sent) message is read.
    private static func connectError(_ connection: OpaquePointer, url: String) -> StratusError {
        let server = serverDescription(connection)
        // Quoted, so that what follows the URL is not read as part of a `password=` value by
        // the pass that hides the passwords of every URL in a message.
        let shownURL = url.isEmpty ? "" : " ('\(PostgresConnectionString.redacted(url))')"
        var reason = PostgresConnectionString.messageLine(String(cString: PQerrorMessage(connection)))
        // libpq does not quote passwords in its messages; this guards against a server that would.
        if let password = PQpass(connection).map({ String(cString: $0) }), password.count >= 4 {
            reason = reason.replacingOccurrences(of: password, with: "***")
        }
        let lower = reason.lowercased()
        if PQconnectionNeedsPassword(connection) == 1 {
            return StratusError(.notAuthenticated, "the PostgreSQL server at \(server) asks for a password and none was given (\(passwordSources(connection)))\(shownURL)")
        }
        // libpq's own checks of the settings (a port that is no number, an unknown sslmode):
        // a mistake in the URL or the environment, not a server that is away.
        let settingProblems = ["invalid integer value", "invalid port number", "invalid connection option", "could not match", "could not parse network address",
                               // A service file or a service in it that libpq cannot use; options the server cannot take.
                               "definition of service", "service file", "nested service specifications", "invalid value for parameter",
                               "unrecognized configuration parameter"]
        if settingProblems.contains(where: lower.contains) || lower.wholeMatch(of: #/invalid [a-z_ ]+ value: .*/#) != nil {
            return StratusError(.invalidArguments, "the PostgreSQL connection settings cannot be used\(shownURL): \(reason)")
        }
        // libpq's SSL files on this machine (a root certificate, a client certificate or key)
        // and its check of the server's certificate: settings or files to mend here, not a
        // login the server refused (77), nor a server away (75) that a cron job would retry.
        if ["root certificate", "certificate file", "private key file"].contains(where: lower.contains) {
            return StratusError(.invalidArguments, "the SSL files the PostgreSQL connection settings name cannot be used (sslrootcert, sslcert, sslkey; by default in ~/.postgresql)\(shownURL): \(reason)")
        }
        if ["certificate verify failed", "does not match host name", "host name from server certificate"].contains(where: lower.contains) {
            return StratusError(.invalidArguments, "the PostgreSQL server at \(server) could not be verified as the one the connection settings name (sslmode verify-ca or verify-full)\(shownURL): \(reason); give the certificate of the authority that signed its certificate (sslrootcert=FILE) and name the host as that certificate does")
        }
        if lower.contains("ssl was required") || lower.contains("does not support ssl") {
            return StratusError(.invalidArguments, "the PostgreSQL server at \(server) does not offer SSL, which the connection settings require (sslmode, or PGSSLMODE)\(shownURL): turn SSL on in the server, or ask for less (sslmode=prefer): \(reason)")
        }
        if lower.contains("permission denied") {
            return StratusError(.permissionFailure, "the PostgreSQL server at \(server) refused the connection\(shownURL): \(reason)")
        }
        // A role without LOGIN (CREATE ROLE's default) is refused for good, like a wrong
        // password: not a server that is away, which a cron job would retry forever.
        let refusals = ["authentication failed", "no pg_hba.conf entry", "pg_hba.conf rejects", "password", "certificate", "is not permitted to log in"]
        if refusals.contains(where: lower.contains) || (lower.contains("role \"") && lower.contains("does not exist")) {
            // libpq names the password file itself when the password came from there.
            let named = lower.contains("password retrieved from file")
            let origin = lower.contains("password authentication failed") && !named ? passwordOrigin(connection, url: url).map { " (the password came from \($0))" } ?? "" : ""
            // Debian's pg_hba.conf has `local all all peer`: over the Unix socket, only the
            // operating-system user of the role's name logs in as it, whatever the password.
            let peer = lower.contains("peer authentication failed")
                ? "; over the Unix socket the server lets only the operating-system user of the same name log in as a role (peer authentication in pg_hba.conf): connect over TCP instead (host=localhost, with a password), or have the server's administrator map this user in pg_ident.conf"
                : ""
            let noLogin = lower.contains("is not permitted to log in")
                ? "; an administrator lets the role log in with ALTER ROLE \(PQuser(connection).flatMap { try? quoteIdentifier(String(cString: $0)) } ?? "name") LOGIN (CREATE ROLE makes roles that cannot)"
                : ""
            return StratusError(.notAuthenticated, "the PostgreSQL server at \(server) refused the login\(shownURL): \(reason)\(origin)\(peer)\(noLogin)")
        }
        if lower.contains("database \"") && lower.contains("does not exist") {
            let name = PQdb(connection).map { String(cString: $0) } ?? "DBNAME"
            let user = PQuser(connection).map { String(cString: $0) } ?? "OWNER"
            return StratusError(.badContainer, "the PostgreSQL server at \(server) has no database \(name)\(shownURL): a role that may create databases creates it, owned by the role that is to own Stratus's tables (createdb -O OWNER \(name): OWNER is \(user) only if \(user) is to own them, not a member that uses a store another role owns); Stratus creates its tables in it")
        }
        return StratusError(.serviceUnavailable, "cannot connect to the PostgreSQL server at \(server)\(shownURL): \(reason)", retryAfterSeconds: 1)
    }

    /// Where the password libpq sent came from, for the message that the server refused it: a
    /// stale `PGPASSWORD` or password file line is otherwise hard to tell from a mistyped URL.
    /// libpq takes the URL's password first, then a service file's (`service=`, `PGSERVICE`),
    /// then `PGPASSWORD`, then the password file.
    static func passwordOrigin(_ connection: OpaquePointer, url: String) -> String? {
        guard PQconnectionUsedPassword(connection) == 1 else { return nil }
        let settings = try? PostgresConnectionString.settings(in: url)
        if settings?["password"]?.isEmpty == false { return "the connection URL" }
        let environment = ProcessInfo.processInfo.environment
        let fromEnvironment = environment["PGPASSWORD"].flatMap { $0.isEmpty ? nil : $0 }
        // libpq before version 18 does not report the service it used: the URL's, else PGSERVICE.
        let service = settings?["service"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["PGSERVICE"].flatMap { $0.isEmpty ? nil : $0 }
        // The password option holds what the URL, the service or PGPASSWORD gave (a password
        // file's line is kept apart): one PGPASSWORD does not hold came from the service.
        if let service, let password = connectionOptions(connection, ["password"])["password"], !password.isEmpty, password != fromEnvironment {
            let file = environment["PGSERVICEFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "~/.pg_service.conf or the system's pg_service.conf"
            return "the password= line of service \(service) in the service file (\(file)), which libpq prefers to PGPASSWORD and the password file"
        }
        if fromEnvironment != nil { return "the PGPASSWORD environment variable" }
        let passfile = passwordFile(connection)
        return passfile.map { "the password file \($0)" } ?? "the password file"
    }

    /// Where libpq looked for a password, for the message that none was found: the URL,
    /// `PGPASSWORD` and the password file (`passfile`, `PGPASSFILE`, else `~/.pgpass`), with what
    /// is wrong with that file when libpq skips it (missing, or readable by others).
    static func passwordSources(_ connection: OpaquePointer) -> String {
        let passfile = passwordFile(connection)
        let fromEnvironment = ProcessInfo.processInfo.environment["PGPASSFILE"].map { !$0.isEmpty && $0 == passfile } ?? false
        guard let path = passfile, !path.isEmpty else { return "in the URL, PGPASSWORD or ~/.pgpass" }
        var file = fromEnvironment ? "the password file PGPASSFILE names, \(path)" : "the password file \(path)"
        var info = stat()
        if stat(path, &info) != 0 {
            file += ", which does not exist"
        } else if info.st_mode & 0o077 != 0 {
            file += ", which libpq ignores: others may read it (chmod 600 \(path))"
        } else {
            let host = PQhost(connection).map { String(cString: $0) } ?? ""
            let port = PQport(connection).map { String(cString: $0) } ?? ""
            let database = PQdb(connection).map { String(cString: $0) } ?? ""
            let user = PQuser(connection).map { String(cString: $0) } ?? ""
            file += ", which has no line for host \(host), port \(port), database \(database) and user \(user)"
            if host.hasPrefix("/") {
                // libpq matches a socket folder other than its own under the folder's path.
                file += " (over a Unix socket the line's host is the socket folder, \(host), except libpq's own folder, which it matches as localhost)"
            }
        }
        return "in the URL, PGPASSWORD or \(file)"
    }

    /// The password file libpq reads for the connection (`passfile`, `PGPASSFILE`, else
    /// `~/.pgpass`), when it names one.
    private static func passwordFile(_ connection: OpaquePointer) -> String? {
        connectionOptions(connection, ["passfile"])["passfile"]
    }

    /// The values libpq settled on for the `keywords` it has a value for (``PQconninfo``).
    private static func connectionOptions(_ connection: OpaquePointer, _ keywords: Set<String>) -> [String: String] {
        guard let options = PQconninfo(connection) else { return [:] }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            let name = String(cString: keyword)
            if keywords.contains(name), let value = option.pointee.val { values[name] = String(cString: value) }
            option += 1
        }
        return values
    }

    static func serverDescription(_ connection: OpaquePointer) -> String {
        serverDescription(host: PQhost(connection).map { String(cString: $0) } ?? "", port: PQport(connection).map { String(cString: $0) } ?? "")
    }

    /// A server as messages name it: `host:port`, an IPv6 address in brackets as in a URL
    /// (`::1:5432` reads as another address), a Unix socket as its file.
    static func serverDescription(host: String, port: String) -> String {
        if host.hasPrefix("/") || host.hasPrefix("@") { return "\(host)/.s.PGSQL.\(port)" }
        return "\(host.isEmpty ? "localhost" : host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    // MARK: - State

    /// Whether the connection still works, as far as libpq knows without asking the server.
    public var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Where the connection stands with respect to transactions.
    public var transactionStatus: PostgresTransactionStatus {
        switch PQtransactionStatus(handle) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .failedTransaction
        case PQTRANS_ACTIVE: return .busy
        default: return .broken
        }
    }

    /// The server's version as a number: 150004 for 15.4.
    public var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// The process ID of the server process serving this connection.
    public var backendProcessID: Int32 { PQbackendPID(handle) }

    /// Checks, without waiting, that the server has not closed the connection since its last
    /// statement (a restart, an administrator's `pg_terminate_backend`): reads whatever the
    /// server sent meanwhile. Notifications received are kept for ``nextNotification(timeout:)``.
    public func isUsable() -> Bool {
        guard isOpen, !notices.saidGoodbye, PQtransactionStatus(handle) == PQTRANS_IDLE else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { return false }
        let ready = poll(&descriptor, 1, 0)
        if ready > 0 {
            if PQconsumeInput(handle) == 0 { return false }
            // Reading is not parsing: PQisBusy hands what came to the notice receiver.
            _ = PQisBusy(handle)
            if descriptor.revents & Int16(POLLHUP | POLLERR) != 0 { return false }
        }
        return isOpen && !notices.saidGoodbye
    }

    // MARK: - Statements

    /// Runs SQL through the simple protocol: several statements separated by `;`, no
    /// parameters, no results (schema scripts, `BEGIN`).
    ///
    /// ```swift
    /// try connection.executeScript("CREATE TABLE a (id int8); CREATE INDEX ON a (id)")
    /// ```
    ///
    /// - Throws: the first failing statement's error (see ``query(_:_:prepare:)``).
    public func executeScript(_ sql: String) throws {
        _ = try perform(sql: sql) { PQexec(handle, sql) }
    }

    /// Runs one statement and answers how many rows it changed (`INSERT`, `UPDATE`,
    /// `DELETE`), 0 for others.
    ///
    /// ```swift
    /// let deleted = try connection.execute("DELETE FROM notes WHERE id = $1", [.int64(7)])
    /// ```
    ///
    /// - Throws: as ``query(_:_:prepare:)``.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = [], prepare: Bool = true) throws -> Int {
        try query(sql, parameters, prepare: prepare).affectedRowCount
    }

    /// Runs one statement with `parameters` bound to `$1`, `$2`… and answers its rows.
    ///
    /// With `prepare` (the default) the statement is prepared on this connection the first
    /// time it runs with these parameter types and reused afterwards; pass `false` for SQL
    /// that runs once. Results come in binary format (see ``PostgresRow``).
    ///
    /// ```swift
    /// let rows = try connection.query("SELECT body FROM notes WHERE id = $1", [.int64(1)])
    /// let body = try rows.first?.text(0)
    /// ```
    ///
    /// - Throws: a ``StratusError`` whose ``StratusError/sqlState`` holds the server's
    ///   SQLSTATE: `zoneBusy` (with `retryAfterSeconds`) for serialization failures,
    ///   deadlocks and lock timeouts; `serviceUnavailable` for a lost connection (its
    ///   transaction was not applied); `constraintViolation`, `permissionFailure`,
    ///   `invalidArguments` (a value that does not fit its type; text with NUL);
    ///   `operationCancelled` after ``PostgresCanceller/cancel()``; `internalError` for
    ///   other refusals (named with the statement, never the values).
    public func query(_ sql: String, _ parameters: [PostgresValue] = [], prepare: Bool = true) throws -> PostgresResult {
        try settle()
        let encoded = try PostgresParameters(parameters)
        if prepare {
            let name = try preparedStatement(sql, encoded)
            return try perform(sql: sql) {
                encoded.withPointers { _, values, lengths, formats in
                    PQexecPrepared(handle, name, Int32(encoded.count), values, lengths, formats, 1)
                }
            }
        }
        return try perform(sql: sql) {
            encoded.withPointers { types, values, lengths, formats in
                PQexecParams(handle, sql, Int32(encoded.count), types, values, lengths, formats, 1)
            }
        }
    }

    /// Sends a statement without parameters (results in binary format) and returns at once,
    /// so that the server works on it while the caller does something else; ``receive()``
    /// waits for its rows. Another statement run in between waits for them and drops them.
    ///
    /// ```swift
    /// try connection.send("FETCH FORWARD 1000 FROM rows")
    /// decode(previousRows)
    /// let rows = try connection.receive()
    /// ```
    ///
    /// - Throws: a lost connection as ``query(_:_:prepare:)`` describes.
    func send(_ sql: String) throws {
        try settle()
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        guard PQsendQueryParams(handle, sql, 0, nil, nil, nil, nil, 1) == 1 else {
            throw failure(nil, sql: sql, wasInTransaction: wasInTransaction)
        }
        sentStatement = (sql, wasInTransaction)
    }

    /// The result of the statement ``send(_:)`` sent.
    ///
    /// - Throws: the statement's error as ``query(_:_:prepare:)`` describes; `internalError`
    ///   when no statement was sent.
    func receive() throws -> PostgresResult {
        guard let (sql, wasInTransaction) = sentStatement else {
            throw StratusError(.internalError, "no statement was sent on the connection to \(server)")
        }
        sentStatement = nil
        var first: OpaquePointer?
        while let result = PQgetResult(handle) {
            if first == nil { first = result } else { PQclear(result) }
        }
        return try check(first, sql: sql, wasInTransaction: wasInTransaction)
    }

    /// Makes the connection ready for a statement: drops the answer of a statement sent and
    /// not received, and ends a COPY left open.
    ///
    /// - Throws: the open COPY's error.
    func settle() throws {
        discardSentStatement()
        if openCopy != nil { try endCopy() }
    }

    /// Reads and drops the answer of a statement sent and not received.
    func discardSentStatement() {
        guard sentStatement != nil else { return }
        sentStatement = nil
        while let result = PQgetResult(handle) { PQclear(result) }
    }

    /// The name of the statement prepared for `sql` with the types of `parameters`,
    /// preparing it if needed.
    private func preparedStatement(_ sql: String, _ parameters: PostgresParameters) throws -> String {
        let key = Self.statementKey(sql, parameters)
        if let name = preparedStatements[key] { return name }
        if preparedStatements.count >= Self.maximumPreparedStatements { forgetPreparedStatements() }
        let name = nextStatementName()
        _ = try perform(sql: sql) {
            parameters.withPointers { types, _, _, _ in PQprepare(handle, name, sql, Int32(parameters.count), types) }
        }
        preparedStatements[key] = name
        return name
    }

    /// Statements are told apart by their parameter types too: a statement prepared with
    /// `$1` as int8 cannot take `$1` as text.
    static func statementKey(_ sql: String, _ parameters: PostgresParameters) -> String {
        sql + "\u{1}" + parameters.types.map(String.init).joined(separator: ",")
    }

    func cachedStatementName(forKey key: String) -> String? { preparedStatements[key] }

    /// Caches a statement a pipeline prepared. The cache is trimmed by the next statement
    /// prepared outside a pipeline (`DEALLOCATE` cannot run inside one).
    func rememberStatement(_ name: String, forKey key: String) {
        preparedStatements[key] = name
    }

    func forgetStatement(forKey key: String) { preparedStatements[key] = nil }

    func nextStatementName() -> String {
        preparedStatementCount += 1
        return "stratus_\(preparedStatementCount)"
    }

    private func forgetPreparedStatements() {
        preparedStatements.removeAll()
        // Statements are not transactional; in a failed transaction this fails and the old
        // statements stay on the server until the connection closes, which is harmless.
        if let result = PQexec(handle, "DEALLOCATE ALL") { PQclear(result) }
    }

    /// Runs `send` (one libpq call that executes a statement and waits for its result) and
    /// turns a failure into a ``StratusError``.
    func perform(sql: String?, committing: Bool = false, _ send: () -> OpaquePointer?) throws -> PostgresResult {
        try settle()
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        let result = send()
        return try check(result, sql: sql, wasInTransaction: wasInTransaction, committing: committing)
    }

    /// The result, or the error it reports (the result is then cleared).
    func check(_ result: OpaquePointer?, sql: String?, wasInTransaction: Bool, committing: Bool = false) throws -> PostgresResult {
        guard let result else {
            throw failure(nil, sql: sql, wasInTransaction: wasInTransaction, committing: committing)
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            cancelRequest.clear()
            return PostgresResult(result)
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            let status = PQresultStatus(result)
            PQclear(result)
            endUnexpectedCopy(status)
            throw StratusError(.internalError, "a COPY statement was run as a query; use copyIn or copyOut (in: \(String((sql ?? "").prefix(120))))")
        default:
            let error = failure(result, sql: sql, wasInTransaction: wasInTransaction, committing: committing)
            PQclear(result)
            throw error
        }
    }

    /// The error of a failed statement: the server's, or a lost connection.
    func failure(_ result: OpaquePointer?, sql: String?, wasInTransaction: Bool, committing: Bool = false) -> StratusError {
        let sqlState = result.flatMap { Self.field($0, stratus_pq_diag_sqlstate()) }
        if PQstatus(handle) != CONNECTION_OK {
            // The connection broke, or the server closed it (shutdown, terminated backend).
            let reason = result.flatMap { Self.field($0, stratus_pq_diag_message_primary()) }
                ?? PostgresConnectionString.messageLine(String(cString: PQerrorMessage(handle)))
            var error = StratusError.postgresConnectionLost(server: server, inTransaction: wasInTransaction, committing: committing, reason: reason)
            // A commit's lost answer keeps its own SQLSTATE (08007), which the writer asks about.
            if !committing { error.sqlState = sqlState }
            return error
        }
        guard let result, let sqlState else {
            // libpq's own failures (out of memory, a protocol error) have no SQLSTATE.
            let reason = PostgresConnectionString.messageLine(String(cString: result.map { PQresultErrorMessage($0) } ?? PQerrorMessage(handle)))
            return StratusError(.internalError, "PostgreSQL at \(server): \(reason)\(sql.map { " (in: \(String($0.prefix(120))))" } ?? "")")
        }
        if sqlState == "0A000", let sql {
            // "cached plan must not change result type" after a schema change: prepare anew next time.
            preparedStatements = preparedStatements.filter { !$0.key.hasPrefix(sql + "\u{1}") }
        }
        return .postgres(
            sqlState: sqlState, message: Self.field(result, stratus_pq_diag_message_primary()) ?? "", server: server,
            constraint: Self.field(result, stratus_pq_diag_constraint_name()), sql: sql, cancelRequested: cancelRequest.take())
    }

    static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }

    /// Leaves a COPY that a plain query started, so that the connection can go on.
    private func endUnexpectedCopy(_ status: ExecStatusType) {
        if status == PGRES_COPY_IN {
            _ = PQputCopyEnd(handle, "Stratus does not run COPY as a query")
        } else {
            var buffer: UnsafeMutablePointer<CChar>?
            while PQgetCopyData(handle, &buffer, 0) > 0 { PQfreemem(buffer) }
        }
        while let result = PQgetResult(handle) { PQclear(result) }
    }

    // MARK: - Names

    /// `name` as an SQL identifier in double quotes, its own double quotes doubled: the one
    /// way Stratus puts a name (table, schema, channel, role) into SQL.
    ///
    /// ```swift
    /// let sql = "CREATE SCHEMA \(try PostgresConnection.quoteIdentifier(schema))"
    /// ```
    ///
    /// - Throws: `invalidArguments` for an empty name, one with a NUL character, or one longer
    ///   than PostgreSQL's 63 bytes (which PostgreSQL would silently shorten, making two
    ///   names one).
    public static func quoteIdentifier(_ name: String) throws -> String {
        guard !name.isEmpty, !name.utf8.contains(0) else {
            throw StratusError(.invalidArguments, "'\(name.replacingOccurrences(of: "\0", with: "\\0"))' is not a valid PostgreSQL name: it is empty or holds a NUL character")
        }
        guard name.utf8.count <= 63 else {
            throw StratusError(.invalidArguments, "the name '\(name.prefix(80))' is longer than PostgreSQL's 63 bytes")
        }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

@available(*, unavailable)
extension PostgresConnection: Sendable {}

/// Notices the server sent outside of statements, as far as Stratus cares.
private final class ServerNotices {
    /// A FATAL or PANIC message came: the server is closing the connection.
    var saidGoodbye = false
}

/// Where a connection stands with respect to transactions (libpq's `PQtransactionStatus`).
public enum PostgresTransactionStatus: Sendable {
    /// No transaction is open.
    case idle
    /// A transaction is open and healthy.
    case inTransaction
    /// A statement of the open transaction failed; only `ROLLBACK` is accepted.
    case failedTransaction
    /// A statement is running (a COPY or pipeline in progress).
    case busy
    /// The connection is broken.
    case broken
}

/// Whether a ``PostgresCanceller`` asked for the running statement to stop, shared between
/// the connection and its cancellers.
final class CancelRequest: Sendable {
    private let requested = Mutex(false)

    func set() { requested.withLock { $0 = true } }
    func clear() { requested.withLock { $0 = false } }

    /// Whether a stop was asked for; forgets it.
    func take() -> Bool { requested.withLock { value in defer { value = false }; return value } }
}
