import Foundation

/// The store's tables in PostgreSQL: the same logical schema as the SQLite store's, with the
/// field document as `jsonb` so that conditions read typed values without parsing text.
///
/// Every key leads with the zone (`zone_id`, which stands for the container, database, owner
/// and zone), so that a PostgreSQL-compatible distributed engine (Citus) can distribute every
/// table by it and keep a zone's records, history and indexes together; `zones` itself is
/// found by its natural key (container, database, owner, zone name and owner). Text that is
/// compared or sorted uses the "C" collation: Stratus orders strings by Unicode scalar values
/// (``Stratus/QueryRules``), which is UTF-8 byte order, whatever the database's locale.
///
/// Tables are created in the connection's current schema (the first of its `search_path`).
/// `meta` holds the schema version and the store's identity; upgrades run under an advisory
/// lock, so that two processes starting on an empty database do not race.
enum PostgresSchema {
    /// Version 2 keeps a pipeline source's position as text (`job_progress.position_text`).
    static let version = 2

    /// The key of the advisory lock taken while the tables are created or upgraded.
    static let migrationLock: Int64 = 0x5354_5241_5455_5331   // "STRATUS1"

    static let create = """
        CREATE TABLE IF NOT EXISTS meta(
            key text COLLATE "C" PRIMARY KEY,
            value text NOT NULL
        );
        CREATE SEQUENCE IF NOT EXISTS zone_ids;
        CREATE TABLE IF NOT EXISTS zones(
            zone_id bigint PRIMARY KEY DEFAULT nextval('zone_ids'),
            container text COLLATE "C" NOT NULL,
            db smallint NOT NULL,
            owner text COLLATE "C" NOT NULL,
            zone_name text COLLATE "C" NOT NULL,
            zone_owner text COLLATE "C" NOT NULL,
            change_seq bigint NOT NULL DEFAULT 0,
            capabilities integer NOT NULL,
            history_start bigint NOT NULL DEFAULT 0,
            db_change_seq bigint NOT NULL DEFAULT 0,
            created_at double precision NOT NULL,
            UNIQUE(container, db, owner, zone_name, zone_owner)
        );
        CREATE INDEX IF NOT EXISTS zones_by_db_change ON zones(container, db, owner, db_change_seq);
        CREATE TABLE IF NOT EXISTS records(
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            created_at double precision NOT NULL,
            created_by text COLLATE "C" NOT NULL,
            modified_at double precision NOT NULL,
            modified_by text COLLATE "C" NOT NULL,
            change_tag text NOT NULL,
            change_seq bigint NOT NULL,
            fields jsonb NOT NULL,
            exact_fields text,
            parent_name text COLLATE "C",
            PRIMARY KEY(zone_id, record_name)
        );
        CREATE INDEX IF NOT EXISTS records_by_change ON records(zone_id, change_seq);
        CREATE TABLE IF NOT EXISTS tombstones(
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            change_seq bigint NOT NULL,
            deleted_at double precision NOT NULL,
            PRIMARY KEY(zone_id, record_name)
        );
        CREATE INDEX IF NOT EXISTS tombstones_by_change ON tombstones(zone_id, change_seq);
        CREATE INDEX IF NOT EXISTS tombstones_by_deleted_at ON tombstones(deleted_at);
        CREATE TABLE IF NOT EXISTS refs(
            zone_id bigint NOT NULL,
            target_name text COLLATE "C" NOT NULL,
            source_name text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            PRIMARY KEY(zone_id, target_name, source_name)
        );
        CREATE INDEX IF NOT EXISTS refs_by_source ON refs(zone_id, source_name);
        CREATE TABLE IF NOT EXISTS record_tokens(
            zone_id bigint NOT NULL,
            token text COLLATE "C" NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            PRIMARY KEY(zone_id, token, record_name)
        );
        CREATE INDEX IF NOT EXISTS record_tokens_by_record ON record_tokens(zone_id, record_name);
        CREATE TABLE IF NOT EXISTS record_types(
            container text COLLATE "C" NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            schema text NOT NULL,
            PRIMARY KEY(container, record_type)
        );
        CREATE TABLE IF NOT EXISTS database_history(
            container text COLLATE "C" NOT NULL,
            db smallint NOT NULL,
            owner text COLLATE "C" NOT NULL,
            change_seq bigint NOT NULL DEFAULT 0,
            history_start bigint NOT NULL DEFAULT 0,
            PRIMARY KEY(container, db, owner)
        );
        CREATE TABLE IF NOT EXISTS zone_tombstones(
            container text COLLATE "C" NOT NULL,
            db smallint NOT NULL,
            owner text COLLATE "C" NOT NULL,
            zone_name text COLLATE "C" NOT NULL,
            zone_owner text COLLATE "C" NOT NULL,
            db_change_seq bigint NOT NULL,
            deleted_at double precision NOT NULL,
            PRIMARY KEY(container, db, owner, zone_name, zone_owner)
        );
        CREATE INDEX IF NOT EXISTS zone_tombstones_by_change ON zone_tombstones(container, db, owner, db_change_seq);
        CREATE TABLE IF NOT EXISTS job_progress(
            job text COLLATE "C" PRIMARY KEY,
            position bigint NOT NULL,
            updated_at double precision NOT NULL
        );
        ALTER TABLE job_progress ADD COLUMN IF NOT EXISTS position_text text;
        CREATE TABLE IF NOT EXISTS assets(
            asset_id text COLLATE "C" PRIMARY KEY,
            owner text COLLATE "C" NOT NULL,
            size bigint NOT NULL,
            content bytea NOT NULL
        );
        """

    /// The tables whose rows belong to a database owner (`owner`: empty for the public
    /// database), which row-level security restricts.
    static let ownedTables = ["zones", "records", "tombstones", "refs", "record_tokens", "database_history", "zone_tombstones", "assets"]

    /// The SQL an administrator (the role that owns the store's tables) runs once so that each
    /// Stratus user is a PostgreSQL role, member of `group`, which reaches the public database's
    /// rows and its own private rows and nothing else, even with raw SQL: the rows of another
    /// user's private database are not there for it. The group gets the privileges the engine
    /// needs (no superuser, no table ownership); schemas are saved by the administrator.
    static func rowLevelSecurity(group: String, schema: String) throws -> String {
        let role = try PostgresConnection.quoteIdentifier(group)
        let schemaName = try PostgresConnection.quoteIdentifier(schema)
        var sql = """
            -- A private row is visible to the role whose name is its owner; public rows (owner '') to every user.
            CREATE OR REPLACE FUNCTION stratus_owns(owner text) RETURNS boolean
                LANGUAGE sql STABLE AS $$ SELECT owner = '' OR owner = current_user::text $$;
            GRANT USAGE ON SCHEMA \(schemaName) TO \(role);
            GRANT SELECT ON meta, record_types TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON job_progress TO \(role);
            GRANT USAGE, SELECT ON SEQUENCE zone_ids TO \(role);

            """
        for table in ownedTables {
            sql += """
                GRANT SELECT, INSERT, UPDATE, DELETE ON \(table) TO \(role);
                ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY;
                DROP POLICY IF EXISTS stratus_owner ON \(table);
                CREATE POLICY stratus_owner ON \(table) TO \(role) USING (stratus_owns(owner)) WITH CHECK (stratus_owns(owner));

                """
        }
        return sql
    }

    /// The record columns a row statement selects first, in the order they are decoded.
    static let recordColumns = "r.record_name, r.record_type, r.created_at, r.created_by, r.modified_at, r.modified_by, r.change_tag, coalesce(r.exact_fields, r.fields::text), r.parent_name"
    static let recordColumnCount = 9
}
