/// The store's tables. One row per record: system columns plus the field document
/// (``Stratus/FieldDocument``). Zones carry the change sequence that every write and delete
/// advances; deletes leave tombstones; `.deleteSelf` references are kept in `refs` so that
/// cascades find their sources through an index. Change tracking adds each zone's
/// capabilities and history start (`zone_state`), each database's zone-change sequence
/// (`database_history`), deleted zones (`zone_tombstones`), and the store's identity and
/// zone row allocator (`store_info`: zone rows are never reused).
///
/// Every index costs every write, so a record pays only for the two that the store cannot work
/// without: its name (fetches, saves) and its change sequence (change tracking). Everything
/// else is indexed where a record type schema declares it, as in CloudKit's schema:
/// - version 2 dropped the creation- and modification-date indexes that version 1 kept for
///   every record type (``Stratus/RecordTypeSchema/indexableSystemFields``);
/// - version 3 dropped the record-type index (a type's records are listed through the name
///   index unless its schema declares `recordName`), and string equality compares
///   `coalesce($.key[2], lower($.key[1]))`, so documents no longer carry an ASCII lowercase
///   copy of each string; the schema indexes are rebuilt for the new expression on upgrade.
enum SQLiteSchema {
    static let version: Int64 = 3

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
        CREATE TABLE IF NOT EXISTS records(
            zone_id INTEGER NOT NULL REFERENCES zones(zone_id),
            record_name TEXT NOT NULL,
            record_type TEXT NOT NULL,
            created_at REAL NOT NULL,
            created_by TEXT NOT NULL,
            modified_at REAL NOT NULL,
            modified_by TEXT NOT NULL,
            change_tag TEXT NOT NULL,
            change_seq INTEGER NOT NULL,
            fields TEXT NOT NULL,
            parent_name TEXT
        );
        CREATE UNIQUE INDEX IF NOT EXISTS records_by_name ON records(zone_id, record_name);
        CREATE INDEX IF NOT EXISTS records_by_change ON records(zone_id, change_seq);
        CREATE TABLE IF NOT EXISTS tombstones(
            zone_id INTEGER NOT NULL,
            record_name TEXT NOT NULL,
            record_type TEXT NOT NULL,
            change_seq INTEGER NOT NULL,
            deleted_at REAL NOT NULL,
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

    /// Record type schemas and the word index of searchable fields. Indexes declared by
    /// schemas are expression indexes on `records`, named `ix_<hash of their definition>`.
    static let indexing = """
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
        """

    /// Every table and index the statements above create.
    static let objectNames: Set<String> = {
        var names: Set<String> = []
        for statement in [create, indexing] {
            var rest = Substring(statement)
            while let range = rest.range(of: "IF NOT EXISTS ") {
                rest = rest[range.upperBound...]
                names.insert(String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }))
            }
        }
        return names
    }()

    /// What opening a store of an earlier version runs, after the statements above (the
    /// engine then rebuilds the schema indexes, whose expressions changed in version 3).
    static func upgrade(from version: Int64) -> String {
        var statements = ""
        if version < 2 { statements += "DROP INDEX IF EXISTS records_by_created; DROP INDEX IF EXISTS records_by_modified;" }
        if version < 3 { statements += "DROP INDEX IF EXISTS records_by_type;" }
        return statements
    }

    static let recordColumns = "r.record_name, r.record_type, r.created_at, r.created_by, r.modified_at, r.modified_by, r.change_tag, r.fields, r.parent_name"
    static let recordColumnCount: Int32 = 9
}
