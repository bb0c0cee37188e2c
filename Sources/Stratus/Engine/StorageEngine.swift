import Foundation

/// A store of containers: what ``Container`` reads and writes through.
///
/// Applications choose an engine and hand it to a container; they never call it. The embedded
/// default is `SQLiteEngine` (module `StratusSQLite`); `PostgresEngine` (module
/// `StratusPostgres`) shares one store among many machines.
///
/// ```swift
/// let engine = try SQLiteEngine(path: "/var/lib/stratus/app.sqlite")
/// let container = Container(identifier: "com.example.app", engine: engine)
/// ```
///
/// ## For engine authors
///
/// The requirements are Stratus's engine SPI: `@_spi(StratusEngine) import Stratus` to see
/// and implement them. One call is one transaction. Operations validate, apply the write
/// policy, split into batches, retry and report per item; an engine stores and reads, and
/// translates Stratus's query, ordering and equality rules (``QueryRules``) into its own
/// language. Engines never see an `Operation`, and operations never build SQL. A new engine
/// passes the conformance suite in `StratusTestSupport` unchanged.
///
/// Engines are called from operation threads and must be safe to call concurrently. Errors
/// they throw are ``StratusError``s; a busy store is `.zoneBusy` with `retryAfterSeconds`.
public protocol StorageEngine: AnyObject, Sendable {
    /// Identifies this store (not its location): cursors and change tokens from another store
    /// are refused with it.
    @_spi(StratusEngine) var storeIdentifier: String { get throws }

    /// Who the store itself knows the caller as (the role a database server logged in), or
    /// `nil` for a store without logins (an SQLite file). A container opened without a user
    /// name acts as this user unless `$STRATUS_USER` names one, so that the server's
    /// permissions and Stratus's user are the same person.
    @_spi(StratusEngine) var authenticatedUserName: String? { get }

    /// Items an import writes per transaction unless its caller chose (``RecordImporter/Options/batchSize``):
    /// what a commit costs this store decides it. 2,000 unless an engine says otherwise.
    @_spi(StratusEngine) var preferredImportBatchSize: Int { get }

    /// Reads records by ID. IDs not in the store are absent from the answer.
    @_spi(StratusEngine) func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record]

    /// The names of the records in `id`'s zone whose `.deleteSelf` references point at `id`, as
    /// stored: ``RecordWriteTransaction/deleteSelfSources(of:)`` read outside a write (a dry
    /// run reads what a write would).
    @_spi(StratusEngine) func deleteSelfSources(of id: Record.ID, in database: DatabaseContext) throws -> [String]

    /// Whether stored records of `id`'s zone name `id` as their `parent`, whether or not `id`
    /// itself is stored, answered through an index of records by parent (never a scan of the
    /// zone). The shared database asks it before a participant creates `id`: records whose
    /// parent was deleted would otherwise join whatever hierarchy the new record is put in.
    ///
    /// ```swift
    /// if try engine.hasChildRecords(of: id, in: context) { /* records name id as their parent */ }
    /// ```
    @_spi(StratusEngine) func hasChildRecords(of id: Record.ID, in database: DatabaseContext) throws -> Bool

    /// Runs `body` in one write transaction of `database`: committed when `body` returns,
    /// rolled back when it throws (the error is rethrown). See ``RecordWriteTransaction``.
    @_spi(StratusEngine) func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T

    /// The asset content of a database's records (see ``AssetContentStore``).
    @_spi(StratusEngine) func assetContents(for database: DatabaseContext) -> any AssetContentStore

    /// Reads one page of a query's matches after `position` (from the start when `nil`).
    @_spi(StratusEngine) func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage

    /// Opens a read of every match of a query after `position` (from the start when `nil`), in
    /// order, from one snapshot of the store that the stream keeps until it is closed.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    @_spi(StratusEngine) func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream

    /// How many records match a query, counted by the store without reading them.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    @_spi(StratusEngine) func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int

    // MARK: Schemas

    /// The schema of one environment of a container (``DatabaseContext/storageContainer``);
    /// empty for an environment never given one.
    @_spi(StratusEngine) func fetchSchema(storageContainer: String) throws -> ContainerSchema

    /// One record type's schema in one environment of a container; `nil` for a type it does
    /// not have. Every query page asks for it: an engine answers it from one row, without
    /// reading the container's other types.
    @_spi(StratusEngine) func fetchRecordTypeSchema(_ recordType: String, storageContainer: String) throws -> RecordTypeSchema?

    /// Changes the schema of one environment of a container in one transaction: reads it, lets
    /// `body` change it (the core decides what, and throws to change nothing), stores the result,
    /// and builds the indexes it declares over the records stored, dropping the indexes that no
    /// schema declares any more. Answers what `body` answered.
    ///
    /// Concurrent calls for one environment, and write transactions that grow its record types
    /// (``RecordWriteTransaction/saveRecordTypeSchema(_:)``), are serialized: none loses another's change.
    @_spi(StratusEngine) func modifySchema<T>(storageContainer: String, _ body: (inout ContainerSchema) throws -> T) throws -> T

    /// As ``modifySchema(storageContainer:_:)``, and hands `body` the schema of `other` (the
    /// container's other environment) as the same transaction reads it, serialized with every
    /// change of either: a replacement of development checked against production, or a deploy
    /// checked against development, cannot race the other.
    @_spi(StratusEngine) func modifySchema<T>(storageContainer: String, comparedWith other: String,
                                              _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T

    /// Deletes everything one environment of a container holds, in every database and for every
    /// user (zones, records, tombstones, words, references, asset references), and replaces its
    /// schema with the schema of `schemaSource` (the container's production) as the same
    /// transaction reads it, serialized with schema changes: CloudKit's "reset development
    /// environment". Change tokens of the environment taken before expire; nothing of another
    /// environment or container changes.
    @_spi(StratusEngine) func resetEnvironment(storageContainer: String, toSchemaOf schemaSource: String) throws

    // MARK: Users

    /// Entries of a container's user directory (both environments share it): those of `logins`,
    /// or every entry when `nil`, in login order.
    @_spi(StratusEngine) func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry]

    /// Saves entries of a container's user directory (replacing those with the same login) and
    /// removes entries by login, in one transaction. The entries were checked by the caller.
    ///
    /// - Throws: `constraintViolation` when two logins would have the same user record name.
    @_spi(StratusEngine) func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws

    /// Entries of a container's user directory that have one of the address keys `addressKeys`
    /// (``UserDirectoryEntry/StoredAddress/key``) or one of `userRecordNames`, with their
    /// addresses, name and discoverability as far as the connection may read them (on
    /// PostgreSQL with row-level security, another user's only while discoverable). Which of
    /// them a caller finds is the core's rule.
    @_spi(StratusEngine) func findUsers(containerIdentifier: String, addressKeys: [String], userRecordNames: [String]) throws -> [UserDirectoryEntry]

    /// Records, in one transaction, whether `login` is discoverable, keeping the rest of its
    /// entry; a login without an entry gets one naming `userRecordName`, without roles.
    @_spi(StratusEngine) func saveUserDiscoverability(containerIdentifier: String, login: String, userRecordName: String, isDiscoverable: Bool) throws

    // MARK: Sharing

    /// The share whose URL token is `token` in one environment of a container (any owner's),
    /// from the index write transactions keep (``RecordWriteTransaction/indexShare(_:zoneName:token:members:)``).
    @_spi(StratusEngine) func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry?

    /// The shares whose index names the user record name `member` as a participant who
    /// accepted, in one environment of a container, from the same index, in any order. The
    /// index's acceptance is the participant's own (on PostgreSQL, row-level security lets no
    /// member's role give it), so a share record that says more reaches nothing.
    @_spi(StratusEngine) func indexedShares(acceptedBy member: String, storageContainer: String) throws -> [ShareIndexEntry]

    // MARK: Diagnostics

    /// How the store would run a query: the indexes it reads and its own account of the plan.
    /// Engines that cannot tell answer an empty plan (the default).
    @_spi(StratusEngine) func explainQuery(_ query: CompiledQuery, in database: DatabaseContext) throws -> QueryPlan

    /// How many records of each record type one zone holds, counted by the store.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    @_spi(StratusEngine) func countRecordsByType(in database: DatabaseContext, zoneID: RecordZone.ID) throws -> [String: Int]

    // MARK: Zones

    /// The zones of a database with their capabilities, by name. The default zone is always
    /// present, except in the shared database, which has none.
    @_spi(StratusEngine) func fetchZones(in database: DatabaseContext) throws -> [RecordZone]

    /// The zones among `zoneIDs` that the database has (the default zone always, except in
    /// the shared database), each under the ID the store keeps it by (its owner
    /// `__defaultOwner__` where the database's user owns it), in any order. The default
    /// implementation filters ``fetchZones(in:)``; engines read the named zones alone, so that
    /// fetching one zone costs the same in a database of a million.
    @_spi(StratusEngine) func fetchZones(_ zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> [RecordZone]

    /// Creates and deletes zones in one transaction; each item succeeds or fails alone.
    ///
    /// Saving a zone that exists answers it as stored. Deleting a zone deletes its records
    /// and its change history in the same transaction; later writes to it fail with
    /// `zoneNotFound`, and the deletion is a change of the database. Zone IDs were checked by
    /// the caller; item failures (a missing zone, the default zone) come back per item.
    /// `notify` runs last in the transaction with its outcome and the transaction as a
    /// ``RecordWriteTransaction`` (for its subscription and notification calls): the
    /// notifications it appends commit with the zones' changes, or not at all. The share index
    /// entries of deleted zones are still there when it runs (it tells their participants),
    /// and are removed after it.
    @_spi(StratusEngine) func modifyZones(
        saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext,
        notify: (_ outcome: ZoneModifyOutcome, _ transaction: any RecordWriteTransaction) throws -> Void
    ) throws -> ZoneModifyOutcome

    // MARK: Change history

    /// Reads one zone's changes after a position, oldest first, in one snapshot.
    ///
    /// Change positions must follow commit order: a reader that asks again from the answered
    /// position sees every later change once, also while others write. The default zone's
    /// history is empty until its first write.
    ///
    /// - Throws: `zoneNotFound` for a missing zone; `invalidArguments` for a zone without the
    ///   `fetchChanges` capability; `changeTokenExpired` for a position from another life of
    ///   the zone, ahead of its history, or before its retained history (tombstones compacted).
    @_spi(StratusEngine) func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch

    /// Reads a database's zone changes (zones created, written to or deleted) after a
    /// position, oldest first.
    ///
    /// - Throws: `changeTokenExpired` as ``fetchZoneChanges(_:in:)`` does.
    @_spi(StratusEngine) func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch

    /// The position a job last recorded with ``RecordWriteTransaction/saveJobProgress(_:position:text:)``, if any.
    @_spi(StratusEngine) func jobProgress(_ job: String) throws -> Int64?

    /// The text position a job last recorded with ``RecordWriteTransaction/saveJobProgress(_:position:text:)``,
    /// if it recorded one.
    @_spi(StratusEngine) func jobProgressText(_ job: String) throws -> String?

    /// Forgets a finished job's position.
    @_spi(StratusEngine) func removeJobProgress(_ job: String) throws

    /// Every database the store holds with its zones and their record counts by type, in one
    /// snapshot, and (without zones) the databases that hold only subscriptions. Databases that
    /// never held a zone, a record or a subscription are not listed.
    @_spi(StratusEngine) func inventory() throws -> StoreInventory

    /// Checks the store's own consistency (its files, pages, indexes, and that it holds the
    /// content of every asset a record names) and answers what is wrong, empty when nothing is,
    /// in ``IntegrityProblem``'s forms.
    @_spi(StratusEngine) func checkIntegrity() throws -> [String]

    /// Removes record and zone tombstones of a database that were deleted before `cutoff`.
    ///
    /// Positions before the newest removed tombstone expire: reading from them would miss
    /// deletions. Engines may also compact on their own, keeping at least their configured
    /// retention.
    @_spi(StratusEngine) func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction

    // MARK: Subscriptions and notifications (see SubscriptionStorage.swift)

    /// The subscriptions of a database: every subscriber's when `subscriber` is `nil`, and the
    /// version they were read at, in one snapshot.
    @_spi(StratusEngine) func fetchSubscriptions(in database: DatabaseContext, subscriber: String?) throws -> SubscriptionSet

    /// Saves (replacing those with the same subscriber and ID) and deletes subscriptions of
    /// the database's user in one transaction, and moves the database's subscription version.
    /// Answers the IDs to delete that existed. The subscriptions were checked by the caller.
    @_spi(StratusEngine) func modifySubscriptions(saving subscriptions: [StoredSubscription], deleting subscriptionIDs: [String], in database: DatabaseContext) throws -> Set<String>

    /// Reads a feed's notifications after a position, oldest first, in one snapshot. Positions
    /// follow commit order: a reader that asks again from the answered position sees every
    /// later notification once.
    ///
    /// - Throws: `changeTokenExpired` for a position of another store, ahead of the feed, or
    ///   before its retained part (compacted).
    @_spi(StratusEngine) func fetchNotifications(in feed: NotificationFeedID, after position: ChangePosition?, limit: Int) throws -> NotificationBatch

    /// Where a feed ends now: the position after its last notification.
    @_spi(StratusEngine) func notificationFeedEnd(_ feed: NotificationFeedID) throws -> ChangePosition

    /// Marks notifications of a feed read in one transaction, appending each mark's entry for
    /// the notifications not read before. Answers the sequences that exist in the feed.
    @_spi(StratusEngine) func markNotificationsRead(_ marks: [NotificationReadMark], in feed: NotificationFeedID) throws -> Set<Int64>

    /// Removes the notifications of every feed made before `cutoff`; positions before the
    /// newest removed expire. Answers how many went. Engines also compact on their own.
    @_spi(StratusEngine) func compactNotifications(createdBefore cutoff: Date) throws -> Int

    /// Opens a wake-up for readers that follow a feed live.
    @_spi(StratusEngine) func openNotificationWaiter(for feed: NotificationFeedID) throws -> any NotificationWaiter

    /// Checks, without writing, that the store would take this user's record writes: a dry
    /// run asks, so that it fails where the real run would instead of calling its input valid.
    /// Whether each record may be written (roles, row-level security) is the write's to say;
    /// this asks whether any write could be.
    ///
    /// ```swift
    /// try engine.checkWriteAccess(in: context)   // before a dry run reads its input
    /// ```
    ///
    /// - Throws: ``StratusError`` `permissionFailure` saying what access is missing, or
    ///   `serviceUnavailable` for a store that takes no writes now (a standby).
    @_spi(StratusEngine) func checkWriteAccess(in database: DatabaseContext) throws
}

extension StorageEngine {
    @_spi(StratusEngine) public func fetchZones(_ zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> [RecordZone] {
        let wanted = Set(zoneIDs.map(database.canonical))
        return try fetchZones(in: database).filter { wanted.contains($0.zoneID) }
    }

    @_spi(StratusEngine) public func fetchRecordTypeSchema(_ recordType: String, storageContainer: String) throws -> RecordTypeSchema? {
        try fetchSchema(storageContainer: storageContainer).recordType(recordType)
    }

    @_spi(StratusEngine) public var authenticatedUserName: String? { nil }

    @_spi(StratusEngine) public var preferredImportBatchSize: Int { 2_000 }

    @_spi(StratusEngine) public func checkWriteAccess(in database: DatabaseContext) throws {}

    @_spi(StratusEngine) public func explainQuery(_ query: CompiledQuery, in database: DatabaseContext) throws -> QueryPlan {
        QueryPlan(indexes: [], steps: [])
    }
}

/// Which database of which environment of which container, seen by which user: the scope of
/// every engine call.
///
/// Engines key what they store by ``storageContainer`` (each environment keeps its own data)
/// and ``storageOwner``, and take ``isCurrentUser(_:)`` zone owners as the current user's.
@_spi(StratusEngine)
public struct DatabaseContext: Hashable, Sendable, CustomStringConvertible {
    public let containerIdentifier: String
    public let environment: Container.Environment
    public let scope: Database.Scope
    /// The caller's login name; `nil` for a caller who is not signed in.
    public let userName: String?
    /// The caller's user record name (`_` and 32 hexadecimal digits unless the user directory
    /// says otherwise); `nil` for a caller who is not signed in.
    public let userRecordName: String?
    /// The custom security roles the user directory gives the caller.
    public let roles: Set<SecurityRole>
    /// Whether the caller administers the store (a copy between stores): security roles do not
    /// limit what it reads and writes.
    public let isAdministrator: Bool
    /// In the shared database, the owner (a user record name) whose shared zones this context
    /// reaches: engines then read and write that owner's private rows, while the caller stays
    /// the user (creator, modifier). `nil` for every other context; only the core's shared
    /// database makes one (``reachingSharedZones(of:)``), after deciding what the user reaches.
    public let sharedOwner: String?
    /// Whether reads must see every write committed so far, because the caller writes what it
    /// reads (an update or deletion by query): an engine that sends reads that may lag to a
    /// standby (PostgreSQL's `--read-store`) reads the store itself for such a context.
    public var readsLatestCommits = false

    /// A context for `userName`, whose record name is derived from it
    /// (``UserDirectoryEntry/derivedRecordName(containerIdentifier:login:)``) unless given.
    public init(
        containerIdentifier: String, environment: Container.Environment = .development, scope: Database.Scope,
        userName: String?, userRecordName: String? = nil, roles: Set<SecurityRole> = [], isAdministrator: Bool = false
    ) {
        self.containerIdentifier = containerIdentifier
        self.environment = environment
        self.scope = scope
        self.userName = userName
        self.userRecordName = userRecordName ?? userName.map { UserDirectoryEntry.derivedRecordName(containerIdentifier: containerIdentifier, login: $0) }
        self.roles = roles
        self.isAdministrator = isAdministrator
        self.sharedOwner = nil
    }

    private init(_ context: DatabaseContext, sharedOwner: String) {
        containerIdentifier = context.containerIdentifier
        environment = context.environment
        scope = context.scope
        userName = context.userName
        userRecordName = context.userRecordName
        roles = context.roles
        isAdministrator = context.isAdministrator
        self.sharedOwner = sharedOwner
        readsLatestCommits = context.readsLatestCommits
    }

    /// This shared-database context reaching the zones `owner` shares with its user: engines
    /// read and write `owner`'s private rows, and name the user as creator and modifier.
    ///
    /// ```swift
    /// let lists = sharedContext.reachingSharedZones(of: "_3f2a…")
    /// ```
    ///
    /// - Precondition: the context is the shared database's (a programmer error otherwise).
    public func reachingSharedZones(of owner: String) -> DatabaseContext {
        precondition(scope == .shared, "only the shared database reaches another user's zones")
        return DatabaseContext(self, sharedOwner: owner)
    }

    /// The context of an administrator reading or writing one stored database as its owner
    /// (`owner`: a user record name; empty for the public database): security roles do not
    /// limit it, as a store copy or a check over every record needs.
    ///
    /// ```swift
    /// let context = DatabaseContext.administrator(containerIdentifier: "app", environment: .development, scope: .private, owner: "_3f2a…")
    /// ```
    public static func administrator(containerIdentifier: String, environment: Container.Environment, scope: Database.Scope, owner: String) -> DatabaseContext {
        DatabaseContext(containerIdentifier: containerIdentifier, environment: environment, scope: scope, userName: nil,
                        userRecordName: owner.isEmpty ? nil : owner, isAdministrator: true)
    }

    /// What engines key the environment's data by: the container identifier itself for
    /// development (so stores made before environments existed hold development data), and a
    /// key no container identifier can be for production.
    public var storageContainer: String { environment.storageContainer(for: containerIdentifier) }

    /// Whose rows these are: everyone's in the public database, the user's own otherwise.
    /// Private (and shared) records of one user are invisible to another user.
    public var storageOwner: String { sharedOwner ?? (scope == .public ? "" : userRecordName ?? "") }

    /// Which database's rows these are: the owner's private database for a shared-database
    /// context that reaches an owner's zones (``sharedOwner``), else ``scope``.
    public var storageScope: Database.Scope { sharedOwner == nil ? scope : .private }

    /// A zone's owner as the rows of ``storageOwner`` key it: empty for the rows' owner's own
    /// zones (`__defaultOwner__`, the user's record name, or for a shared context the sharing
    /// owner's), else the owner's name.
    public func storedZoneOwner(_ zoneID: RecordZone.ID) -> String {
        if let sharedOwner { return zoneID.ownerName == sharedOwner ? "" : zoneID.ownerName }
        return isCurrentUser(zoneID.ownerName) ? "" : zoneID.ownerName
    }

    /// The user's record ID, as stored in creator and last-modifier system fields; `nil` when
    /// the caller is not signed in.
    public var userRecordID: Record.ID? { userRecordName.map { Record.ID(recordName: $0) } }

    /// Whether a zone owner name means the caller: `__defaultOwner__` or their record name.
    public func isCurrentUser(_ ownerName: String) -> Bool {
        ownerName == RecordZone.ID.currentUserDefaultOwner || (userRecordName != nil && ownerName == userRecordName)
    }

    public var description: String {
        "\(containerIdentifier)/\(scope.name)" + (environment == .production ? " (production)" : "") + (scope == .public ? "" : " (\(userRecordName ?? "no user"))")
    }
}

/// One page of query results and where the next page starts.
@_spi(StratusEngine)
public struct QueryPage: Sendable {
    /// The matching records, with only the query's desired keys.
    public var records: [Record]
    /// The position of the last record, when more records may follow.
    public var nextPosition: QueryPosition?

    public init(records: [Record], nextPosition: QueryPosition?) {
        self.records = records
        self.nextPosition = nextPosition
    }
}

/// A row's place in a query's order: its sort-key values and record name (the keyset).
@_spi(StratusEngine)
public struct QueryPosition: Hashable, Sendable, Codable {
    /// One value per sort key of the compiled query; `nil` where the record has no value.
    public var sortValues: [FieldValue?]
    public var recordName: String

    public init(sortValues: [FieldValue?], recordName: String) {
        self.sortValues = sortValues
        self.recordName = recordName
    }

    /// The position of `record` in the order of `query`: its values of the sort keys
    /// (``QueryRules/sortValue(of:for:declaredIn:)``, with the record type's `schema`, so that
    /// a value of another type than its field's declared one stands as missing) and, for a
    /// distance key, the distance its engine computed (`distances`, one per sort key, read
    /// only where the key is a distance).
    ///
    /// ```swift
    /// let position = QueryPosition(of: lastRecord, in: query, distances: [], schema: schema)
    /// ```
    public init(of record: Record, in query: CompiledQuery, distances: [Double?], schema: RecordTypeSchema?) {
        self.init(
            sortValues: query.sortKeys.indices.map { index in
                guard query.sortKeys[index].distanceFrom != nil else { return QueryRules.sortValue(of: record, for: query.sortKeys[index].key, declaredIn: schema) }
                return distances[index].map { .double($0) }
            },
            recordName: record.recordID.recordName)
    }
}

/// A Stratus extension: what a store holds, database by database (every container and user),
/// for tools that list or copy a whole store (`stratus info`, `stratus copy`).
///
/// ```swift
/// for database in try await container.storeInventory().databases { print(database.containerIdentifier, database.scope, database.zones.count) }
/// ```
public struct StoreInventory: Sendable {
    /// One database of one environment of one container, as one owner's (everyone's for the
    /// public database).
    public struct DatabaseEntry: Sendable {
        public var containerIdentifier: String
        public var environment: Container.Environment
        public var scope: Database.Scope
        /// The user record name of the user whose private (or shared) database this is; empty
        /// for the public database.
        public var owner: String
        public var zones: [ZoneEntry]

        /// The entry of a database an engine keys by `storageContainer`
        /// (``DatabaseContext/storageContainer``).
        public init(storageContainer: String, scope: Database.Scope, owner: String, zones: [ZoneEntry]) {
            (containerIdentifier, environment) = Container.Environment.split(storageContainer: storageContainer)
            self.scope = scope
            self.owner = owner
            self.zones = zones
        }
    }

    /// An engine's list of databases in the making, each in the order it is first named.
    ///
    /// ```swift
    /// var databases = StoreInventory.DatabaseList()
    /// databases.add(storageContainer: "default", scope: .public, owner: "", zone: entry)
    /// databases.add(storageContainer: "default", scope: .private, owner: "_5e…")   // subscriptions only
    /// ```
    @_spi(StratusEngine)
    public struct DatabaseList: Sendable {
        public private(set) var entries: [DatabaseEntry] = []
        private var positions: [String: Int] = [:]

        public init() {}

        /// Names a database (listed when first named) and, when given, one of its zones.
        public mutating func add(storageContainer: String, scope: Database.Scope, owner: String, zone: ZoneEntry? = nil) {
            let key = "\(storageContainer)\u{0}\(scope.rawValue)\u{0}\(owner)"
            let position: Int
            if let known = positions[key] {
                position = known
            } else {
                position = entries.count
                positions[key] = position
                entries.append(DatabaseEntry(storageContainer: storageContainer, scope: scope, owner: owner, zones: []))
            }
            if let zone { entries[position].zones.append(zone) }
        }
    }

    /// One zone with its capabilities and how many records of each type it holds.
    public struct ZoneEntry: Sendable {
        public var zone: RecordZone
        public var recordCounts: [String: Int]

        public init(zone: RecordZone, recordCounts: [String: Int]) {
            self.zone = zone
            self.recordCounts = recordCounts
        }
    }

    public var databases: [DatabaseEntry]
    /// The containers with record type schemas (in either environment).
    public var containersWithSchemas: [String]
    /// The store's size in bytes, when the engine knows it.
    public var sizeInBytes: Int64?
    /// The version of the engine's tables.
    public var schemaVersion: Int

    /// An inventory; `schemaStorageContainers` are the storage containers
    /// (``DatabaseContext/storageContainer``) that hold a schema.
    public init(databases: [DatabaseEntry], schemaStorageContainers: [String], sizeInBytes: Int64?, schemaVersion: Int) {
        self.databases = databases
        var containers: [String] = []
        for storageContainer in schemaStorageContainers {
            let identifier = Container.Environment.split(storageContainer: storageContainer).containerIdentifier
            if !containers.contains(identifier) { containers.append(identifier) }
        }
        self.containersWithSchemas = containers
        self.sizeInBytes = sizeInBytes
        self.schemaVersion = schemaVersion
    }
}
