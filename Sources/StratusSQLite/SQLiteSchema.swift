/// The store's tables. One row per record: system columns plus the field document
/// (``Stratus/FieldDocument``). Zones carry the change sequence that every write and delete
/// advances; deletes leave tombstones; `.deleteSelf` references are kept in `refs` so that
/// cascades find their sources through an index. Change tracking adds each zone's
/// capabilities and history start (`zone_state`), each database's zone-change sequence
/// (`database_history`), deleted zones (`zone_tombstones`), and the store's identity and
/// zone row allocator (`store_info`: zone rows are never reused).
///
/// Every index costs every write, so a record pays for one index only, its name (fetches,
/// saves), and the table itself is kept in change order per zone (change tracking); a record
/// with a `parent` pays for a second, by parent (version 13, for sharing). Everything
/// else is indexed where a record type schema declares it, as in CloudKit's schema:
/// - version 2 dropped the creation- and modification-date indexes that version 1 kept for
///   every record type (``Stratus/RecordTypeSchema/indexableSystemFields``);
/// - version 3 keys each record row by its place in its zone's change history
///   (``changeKey(zoneRow:sequence:)``) instead of a separate change-sequence index; dropped the
///   record-type index (a type's records are listed through the name index unless its schema
///   declares `recordName`); and string equality compares `coalesce($.key[2], lower($.key[1]))`,
///   so documents no longer carry an ASCII lowercase copy of each string. Opening an older store
///   rebuilds its records table and schema indexes (``upgrade(from:)``);
/// - version 4 folds case fully for string equality (``Stratus/QueryRules/equalityKey(_:)``:
///   `ß` is `ss`): documents with non-ASCII text get their folded copies again on upgrade;
/// - version 5 keeps a schema per environment (the `container` column of every table holds
///   ``Stratus/DatabaseContext/storageContainer``: the identifier itself for development), the
///   roles schemas create (`schema_roles`) and each container's user directory
///   (`user_directory`), and names users by their user record names: on upgrade, the login
///   names that database owners, zone owners, zone tombstones, database histories and
///   creator and modifier columns held become the derived record names
///   (``upgradeUserNames``);
/// - version 6 keeps asset content by its SHA-256 (`<store>.assets/sha256/<hex>`) with
///   `asset_refs` (which records name which content) and `asset_holds` (content a writer is
///   about to name); upgrading hashes the files of older stores (named by UUIDs) into that form
///   and rewrites the documents that named them (``SQLiteEngine/upgradeAssetStore(on:)``);
/// - version 7 adds subscriptions and notification feeds (``subscriptions``): new tables only,
///   created by `CREATE … IF NOT EXISTS` on open, so the step applies after any earlier one;
/// - version 8 keeps a pipeline source's position as text beside a job's numeric progress
///   (`job_progress.position_text`; ``addJobPositionText``);
/// - version 9 stores an empty `modified_by` where the last modifier is the creator (most
///   rows: 33 bytes less each). Rows written before keep the name, which reads the same, so
///   the step rewrites nothing; the version keeps older builds, which would read the empty
///   name as a user, from opening the store.
/// - version 10 indexes a declared field's values of its type only (a value of another type,
///   left from before the field was declared so, sorts as missing:
///   ``StratusSQL/SQLDialect/declaredValue(_:family:)``); the step rebuilds the `ix_` indexes.
/// - version 11 adds the share index (``shareIndex``): new tables, created by
///   `CREATE … IF NOT EXISTS` on open; the step indexes the shares stored before it.
/// - version 12 adds what user discovery finds users by (``userDiscovery``): new tables,
///   created by `CREATE … IF NOT EXISTS` on open; no step (every user starts undiscoverable,
///   without addresses).
/// - version 13 indexes records by parent (``recordsByParent``, partial: records with a parent
///   only), created by `CREATE … IF NOT EXISTS` on open; no step.
/// - version 14 keeps records' moves between share hierarchies (``hierarchyMoves``): a new
///   table, created by `CREATE … IF NOT EXISTS` on open, and a tombstone's `left_roots` (the
///   hierarchies its record was in), a column added on open; no step (moves and the roots of
///   deletions before it were not kept).
/// - version 15 changes no table: a record type stored with `"grants": {}` grants nothing (a
///   schema file's type without `GRANT` lines); the version keeps older builds, which would
///   read it as CloudKit's defaults and could store it so, from opening the store. The step
///   removes a `{}` stored before (only an edit could write one), which keeps its meaning.
enum SQLiteSchema {
    static let version: Int64 = 15
    /// The version from which a record type stored with `"grants": {}` grants nothing.
    static let grantsNothingVersion: Int64 = 15
    /// The version the share index came with; stores below it have their shares indexed.
    static let shareIndexVersion: Int64 = 11

    /// The application ID in the header of the stores this version makes ("STRA"), so that
    /// Stratus and `file(1)` tell them from other programs' databases.
    static let applicationID: Int32 = 0x5354_5241
    /// The version the asset step brought; stores below it are upgraded by it.
    static let assetStoreVersion: Int64 = 6

    /// Bits of a record's `change_key` that hold its zone's change sequence; the zone row is
    /// in the bits above. Rows of one zone thus lie together in change order, so that reading
    /// a zone's changes is a range of the table itself, and a write maintains one index (the
    /// record name) besides the table.
    static let sequenceBits: Int64 = 40
    /// The highest change sequence a zone can reach (about 1.1 × 10¹²).
    static let maximumSequence: Int64 = (1 << sequenceBits) - 1
    /// The highest zone row a store can allocate (8,388,607 zones over its life).
    static let maximumZoneRow: Int64 = (1 << (63 - sequenceBits)) - 1

    /// The `change_key` of the row written at `sequence` in the zone at `zoneRow`.
    static func changeKey(zoneRow: Int64, sequence: Int64) -> Int64 { zoneRow << sequenceBits | sequence }

    /// The records table; `change_key` is ``changeKey(zoneRow:sequence:)`` of the record's
    /// last write; `modified_by` is empty where the last modifier is the creator.
    static let recordsTableColumns = """
        change_key INTEGER PRIMARY KEY,
            zone_id INTEGER NOT NULL REFERENCES zones(zone_id),
            record_name TEXT NOT NULL,
            record_type TEXT NOT NULL,
            created_at REAL NOT NULL,
            created_by TEXT NOT NULL,
            modified_at REAL NOT NULL,
            modified_by TEXT NOT NULL,
            change_tag TEXT NOT NULL,
            fields TEXT NOT NULL,
            parent_name TEXT
        """

    static let create = """
        CREATE TABLE IF NOT EXISTS zones(
            zone_id INTEGER PRIMARY KEY,
            container TEXT NOT NULL,
            db INTEGER NOT NULL,
            owner TEXT NOT NULL,
            zone_name TEXT NOT NULL,
            zone_owner TEXT NOT NULL,
            change_seq INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            UNIQUE(container, db, owner, zone_name, zone_owner)
        );
        CREATE TABLE IF NOT EXISTS records(\(recordsTableColumns));
        CREATE UNIQUE INDEX IF NOT EXISTS records_by_name ON records(zone_id, record_name);
        \(recordsByParent)
        CREATE TABLE IF NOT EXISTS tombstones(
            zone_id INTEGER NOT NULL,
            record_name TEXT NOT NULL,
            record_type TEXT NOT NULL,
            change_seq INTEGER NOT NULL,
            deleted_at REAL NOT NULL,
            left_roots TEXT,
            PRIMARY KEY(zone_id, record_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS tombstones_by_change ON tombstones(zone_id, change_seq);
        CREATE TABLE IF NOT EXISTS refs(
            zone_id INTEGER NOT NULL,
            target_name TEXT NOT NULL,
            source_name TEXT NOT NULL,
            PRIMARY KEY(zone_id, target_name, source_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS refs_by_source ON refs(zone_id, source_name);
        CREATE TABLE IF NOT EXISTS store_info(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            store_uuid TEXT NOT NULL,
            last_zone_id INTEGER NOT NULL DEFAULT 0
        );
        INSERT OR IGNORE INTO store_info(id, store_uuid) VALUES (1, lower(hex(randomblob(16))));
        CREATE TABLE IF NOT EXISTS zone_state(
            zone_id INTEGER PRIMARY KEY,
            capabilities INTEGER NOT NULL,
            history_start INTEGER NOT NULL DEFAULT 0,
            db_change_seq INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE IF NOT EXISTS database_history(
            container TEXT NOT NULL,
            db INTEGER NOT NULL,
            owner TEXT NOT NULL,
            change_seq INTEGER NOT NULL DEFAULT 0,
            history_start INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(container, db, owner)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS zone_tombstones(
            container TEXT NOT NULL,
            db INTEGER NOT NULL,
            owner TEXT NOT NULL,
            zone_name TEXT NOT NULL,
            zone_owner TEXT NOT NULL,
            db_change_seq INTEGER NOT NULL,
            deleted_at REAL NOT NULL,
            PRIMARY KEY(container, db, owner, zone_name, zone_owner)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS zone_tombstones_by_change ON zone_tombstones(container, db, owner, db_change_seq);
        CREATE INDEX IF NOT EXISTS tombstones_by_deleted_at ON tombstones(deleted_at);
        """

    /// What user discovery finds users by (version 12), beside the directory: each login's name
    /// (``Stratus/UserDirectoryEntry/storedNameComponents(_:)``) and whether others may find
    /// it (`user_identities`), and its email addresses and phone numbers by the key lookups
    /// compare (`user_addresses`: an address finds one login per container).
    static let userDiscovery = """
        CREATE TABLE IF NOT EXISTS user_identities(
            container TEXT NOT NULL,
            login TEXT NOT NULL,
            name_components TEXT,
            discoverable INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(container, login)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS user_addresses(
            container TEXT NOT NULL,
            address_key TEXT NOT NULL,
            login TEXT NOT NULL,
            position INTEGER NOT NULL,
            address TEXT NOT NULL,
            PRIMARY KEY(container, address_key)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS user_addresses_by_login ON user_addresses(container, login);
        """

    /// Record type schemas and the word index of searchable fields. Indexes declared by
    /// schemas are expression indexes on `records`, named `ix_<hash of their definition>`.
    static let indexing = """
        CREATE TABLE IF NOT EXISTS job_progress(
            job TEXT PRIMARY KEY,
            position INTEGER NOT NULL,
            updated_at REAL NOT NULL,
            position_text TEXT
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS record_types(
            container TEXT NOT NULL,
            record_type TEXT NOT NULL,
            schema TEXT NOT NULL,
            PRIMARY KEY(container, record_type)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS record_tokens(
            zone_id INTEGER NOT NULL,
            token TEXT NOT NULL,
            record_name TEXT NOT NULL,
            PRIMARY KEY(zone_id, token, record_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS record_tokens_by_record ON record_tokens(zone_id, record_name);
        CREATE TABLE IF NOT EXISTS schema_roles(
            container TEXT NOT NULL,
            role TEXT NOT NULL,
            PRIMARY KEY(container, role)
        ) WITHOUT ROWID;
        """

    /// Each container's user directory: login → user record name and custom roles (a JSON
    /// array of role names). Both environments of a container share it.
    static let users = """
        CREATE TABLE IF NOT EXISTS user_directory(
            container TEXT NOT NULL,
            login TEXT NOT NULL,
            user_record_name TEXT NOT NULL,
            roles TEXT NOT NULL,
            PRIMARY KEY(container, login)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX IF NOT EXISTS user_directory_by_record_name ON user_directory(container, user_record_name);
        """

    /// Which records name which asset content (kept by every write, like `refs`), and content
    /// that writers hold while they store it and write the records naming it.
    static let assetTables = """
        CREATE TABLE IF NOT EXISTS asset_refs(
            content_id TEXT NOT NULL,
            zone_id INTEGER NOT NULL,
            record_name TEXT NOT NULL,
            PRIMARY KEY(content_id, zone_id, record_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS asset_refs_by_record ON asset_refs(zone_id, record_name);
        CREATE TABLE IF NOT EXISTS asset_holds(
            content_id TEXT NOT NULL,
            holder TEXT NOT NULL,
            held_at REAL NOT NULL,
            PRIMARY KEY(content_id, holder)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS asset_holds_by_holder ON asset_holds(holder);
        """

    /// Subscriptions and notification feeds (version 6). Subscriptions are keyed by their
    /// database (container, database, owner: empty for the public database) and subscriber;
    /// `subscription_state` holds each database's subscription version, which every change of
    /// its subscriptions moves. A feed (`notification_feeds`) is one user's in one container:
    /// `seq` is the last place taken (under the writer lock, so places follow commit order),
    /// `history_start` the newest place compaction removed.
    static let subscriptions = """
        CREATE TABLE IF NOT EXISTS subscriptions(
            container TEXT NOT NULL,
            db INTEGER NOT NULL,
            owner TEXT NOT NULL,
            subscriber TEXT NOT NULL,
            subscription_id TEXT NOT NULL,
            record_type TEXT,
            zone_name TEXT,
            zone_owner TEXT,
            definition TEXT NOT NULL,
            PRIMARY KEY(container, db, owner, subscriber, subscription_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS subscription_state(
            container TEXT NOT NULL,
            db INTEGER NOT NULL,
            owner TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(container, db, owner)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS notification_feeds(
            container TEXT NOT NULL,
            subscriber TEXT NOT NULL,
            seq INTEGER NOT NULL DEFAULT 0,
            history_start INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(container, subscriber)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS notifications(
            container TEXT NOT NULL,
            subscriber TEXT NOT NULL,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            read INTEGER NOT NULL DEFAULT 0,
            payload TEXT NOT NULL,
            PRIMARY KEY(container, subscriber, seq)
        ) WITHOUT ROWID;
        """

    /// Where shares are found (version 11): `share_index` by URL token (with a record-level
    /// share's root), `share_members` by participant (whether accepted, whether read-write),
    /// each row naming the share by its owner's private database (container, owner), zone and
    /// record name. Write transactions keep them with the share records.
    static let shareIndex = """
        CREATE TABLE IF NOT EXISTS share_index(
            container TEXT NOT NULL,
            owner TEXT NOT NULL,
            zone_name TEXT NOT NULL,
            share_name TEXT NOT NULL,
            token TEXT NOT NULL,
            root_name TEXT,
            PRIMARY KEY(container, owner, zone_name, share_name)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX IF NOT EXISTS share_index_by_token ON share_index(container, token);
        CREATE TABLE IF NOT EXISTS share_members(
            container TEXT NOT NULL,
            member TEXT NOT NULL,
            owner TEXT NOT NULL,
            zone_name TEXT NOT NULL,
            share_name TEXT NOT NULL,
            accepted INTEGER NOT NULL,
            read_write INTEGER NOT NULL,
            PRIMARY KEY(container, member, owner, zone_name, share_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS share_members_by_share ON share_members(container, owner, zone_name, share_name);
        """

    /// Records whose place in share hierarchies changed (version 14, ``Stratus/HierarchyMove``),
    /// at a change position of their zone, as tombstones are: the latest move of each record,
    /// with the roots of the hierarchies it left (a JSON array of names).
    static let hierarchyMoves = """
        CREATE TABLE IF NOT EXISTS hierarchy_moves(
            zone_id INTEGER NOT NULL,
            record_name TEXT NOT NULL,
            record_type TEXT NOT NULL,
            change_seq INTEGER NOT NULL,
            moved_at REAL NOT NULL,
            left_roots TEXT NOT NULL,
            PRIMARY KEY(zone_id, record_name)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS hierarchy_moves_by_change ON hierarchy_moves(zone_id, change_seq);
        """

    /// Every table and index the statements above create.
    static let objectNames: Set<String> = {
        var names: Set<String> = []
        for statement in [create, indexing, users, userDiscovery, assetTables, subscriptions, shareIndex, hierarchyMoves] {
            var rest = Substring(statement)
            while let range = rest.range(of: "IF NOT EXISTS ") {
                rest = rest[range.upperBound...]
                names.insert(String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }))
            }
        }
        return names
    }()

    /// What opening a store of an earlier version runs, after the statements above (the
    /// engine then rebuilds the schema indexes, whose expressions changed in version 3). A
    /// records table without `change_key` (`recordsAreKeyed` false: from before version 3, or
    /// from a development build of it) is copied into the keyed form, which also drops every
    /// old index on it.
    static func upgrade(recordsAreKeyed: Bool) -> String {
        guard !recordsAreKeyed else { return "" }
        return """
            CREATE TABLE records_v3(\(recordsTableColumns));
            INSERT INTO records_v3(change_key, zone_id, record_name, record_type, created_at, created_by, modified_at, modified_by, change_tag, fields, parent_name)
                SELECT (zone_id << \(sequenceBits)) | change_seq, zone_id, record_name, record_type, created_at, created_by, modified_at, modified_by, change_tag, fields, parent_name
                FROM records;
            DROP TABLE records;
            ALTER TABLE records_v3 RENAME TO records;
            CREATE UNIQUE INDEX records_by_name ON records(zone_id, record_name);
            \(recordsByParent)
            """
    }

    /// Records by `parent` (version 13), for the one question the shared database asks by
    /// parent: whether stored records name a record as their parent
    /// (``SQLiteEngine/hasChildRecords(of:in:)``). Partial: a record without a parent, most
    /// of them, pays nothing for it.
    static let recordsByParent = "CREATE INDEX IF NOT EXISTS records_by_parent ON records(zone_id, parent_name) WHERE parent_name IS NOT NULL;"

    /// The (table, column) pairs outside the records table that held login names before
    /// version 5; each of these tables has a `container` column (never production before version 5).
    static let userColumns: [(table: String, column: String)] = [
        ("zones", "owner"), ("zones", "zone_owner"), ("database_history", "owner"), ("zone_tombstones", "owner"), ("zone_tombstones", "zone_owner"),
    ]

    /// Whether a user name stored before version 5 was a login, which becomes its derived user
    /// record name: empty means the database's own user or the public database, and names
    /// starting with `_` are CloudKit's user record names (and `__defaultOwner__`), kept by
    /// imports.
    static func wasLogin(_ name: String) -> Bool { !name.isEmpty && !name.hasPrefix("_") }

    /// Version 8: the text position of a pipeline's source (a query cursor, a change token),
    /// committed with the batch it follows. Stores of earlier versions have the table without it.
    static let addJobPositionText = "ALTER TABLE job_progress ADD COLUMN position_text TEXT"

    /// The columns a record is read from (``SQLiteEngine/decodeRecord(_:zoneID:recent:)``).
    /// The modification date and modifier are NULL where they equal the creation date and
    /// creator (a modifier stored empty, or, before version 9, the creator's name again), as
    /// they do for every record saved once: 41 bytes less per row for a sort to carry through
    /// its temporary runs (a tenth of a whole sorted read's time).
    static let recordColumns = "r.record_name, r.record_type, r.created_at, r.created_by, nullif(r.modified_at, r.created_at), nullif(nullif(r.modified_by, ''), r.created_by), r.change_tag, r.fields, r.parent_name"
    static let recordColumnCount: Int32 = 9
}
