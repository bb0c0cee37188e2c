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
///
/// Version 2 keeps a schema per environment (`container` holds
/// ``Stratus/DatabaseContext/storageContainer``), the roles schemas create, each container's
/// user directory, and names users by their user record names: upgrading moves the login names
/// owners, creators and modifiers held to the derived record names (``upgradeUserNames``).
///
/// Version 3 (the asset step) keeps asset content by its SHA-256, per owner: `asset_contents`
/// (one row per content) and `asset_chunks` (its bytes, 1 MiB a row), with `asset_refs` (which
/// records name which content) and `asset_holds` (content a writer is about to name). The
/// upgrade moves the `assets` rows of earlier versions (one per save, named by UUIDs) into that
/// form and rewrites the documents that named them (``PostgresEngine/upgradeAssetStore(on:)``).
///
/// Version 4 adds subscriptions and notification feeds (``subscriptions``): new tables only,
/// created with `IF NOT EXISTS`, so the step applies after any earlier one.
///
/// Version 5 keeps a pipeline source's position as text (`job_progress.position_text`), added
/// by the creation script when missing.
///
/// Version 6 keeps the role that saved a job's position (`job_progress.role`), and replaces the
/// row-level security of earlier versions, whose policies called a function that read the user
/// directory through the caller's `search_path` (a member's temporary table could stand in for
/// it) and let members change any public row: the upgrade applies ``PostgresRowSecurity`` again
/// for each group that policies of an earlier version name.
///
/// Version 7 changes no table: its row-level security keeps members from storing a field
/// document that is not a JSON object and from removing, retyping or indexing a development
/// schema's fields or storing a type in a form readers cannot decode; the upgrade applies it.
///
/// Version 8 changes no table: its row-level security also requires a record's exact field
/// text (`exact_fields`), which readers prefer, to be a JSON object, and keeps a member's
/// development growth within Stratus's schema limits; the upgrade applies it.
///
/// Version 9 changes no table: its `ix_` indexes hold the first
/// ``PostgresDialect/indexPrefixLength`` characters of string keys, and `record_tokens` the
/// first ``PostgresDialect/wordKeyLength`` bytes of words, so that long strings and words fit
/// a btree entry; the upgrade rebuilds the indexes and cuts the longer words stored before
/// (``PostgresEngine/boundIndexEntries(on:)``).
///
/// Version 11 changes no table: its `ix_` indexes hold a declared field's values of its type
/// only (a value of another type, left from before the field was declared so, sorts as
/// missing: ``StratusSQL/SQLDialect/declaredValue(_:family:)``); the upgrade rebuilds them.
///
/// Version 12 adds the share index (``shareIndex``: new tables, created on open, and an index of
/// records by parent), and its row-level security lets a member keep the index rows of its own
/// shares and an accepted participant reach the shared records; the upgrade applies it and
/// indexes the shares stored before it.
///
/// Version 13 adds what user discovery finds users by (``userDiscovery``: new tables, created on
/// open), and its row-level security lets a member read another user's addresses and name only
/// while that user is discoverable, and record its own discoverability; the upgrade applies it.
///
/// Version 14 changes no table: its row-level security lets a member's role keep a
/// participant's acceptance in the share index rows of its own shares, never give one (a
/// trigger); the upgrade applies it.
///
/// Version 15 changes no table: its row-level security keeps a participant's role from creating
/// a record under a name that stored records name as their parent (a trigger: records whose
/// parent was deleted would join the participant's hierarchy), and writes the tombstone of a
/// participant's raw-SQL deletion (a trigger); the upgrade applies it.
///
/// Version 16 changes no table: its row-level security lets a member's role read the shared
/// database subscriptions of the accepted participants of its shares, which its writes fire
/// (``SharedDatabaseNotifier``), and an accepted participant's role read the words,
/// references and asset content of the records it reaches; the upgrade applies it.
///
/// Version 17 changes no table: its row-level security gives the group `stratus_analyze()`,
/// which gathers the statistics of the records and their words as the tables' owner, so that a
/// member's engine keeps the planner's idea of the zones it fills up to date
/// (``PostgresEngine/analyzeIfGrown(_:)``); the upgrade applies it.
///
/// Version 18 keeps records' moves between share hierarchies (`hierarchy_moves`,
/// ``Stratus/HierarchyMove``): a new table, created by `CREATE … IF NOT EXISTS`, and a
/// tombstone's `left_roots` (the hierarchies its record was in), a column added by `ALTER
/// TABLE … IF NOT EXISTS`; its row-level security lets an accepted participant's role read the
/// moves and tombstones its zone changes hand it, never another share's; the upgrade applies it.
///
/// Version 19 changes no table: a record type stored with `"grants": {}` grants nothing (a
/// schema file's type without `GRANT` lines, as in CloudKit), where its row-level security gave
/// it CloudKit's defaults; no key still means the defaults. The upgrade applies the policies again,
/// and removes a `{}` stored before (only raw SQL could write one) so that it keeps its meaning.
///
/// Version 20 changes no table: a member moves a shared counter (a zone's or a database's change
/// sequence, a feed's place) forward by at most ``PostgresRowSecurity/counterStepLimit`` at once,
/// and adds a notification only at a place its feed has given out, so that no member's raw SQL
/// leaves the other writers without places. The upgrade applies the policies again.
///
/// Version 21 changes no table: its row-level security knows a zone-wide share by its name
/// (`cloudkit.zoneshare`), where it took every share without a root for one, so that a record
/// share restored without its root (CloudKit's JSON names the root in the root record, not in
/// the share) no longer gave its participants' roles the owner's whole zone; and a member who
/// is no participant of a zone learns nothing of its records' names from the trigger that
/// keeps participants from adopting records. The upgrade applies the policies again.
enum PostgresSchema {
    static let version = 21
    /// The version whose `ix_` indexes hold declared values only.
    static let declaredValueIndexVersion = 11
    /// The version the share index came with; stores below it have their shares indexed.
    static let shareIndexVersion = 12
    /// The version whose row-level security is ``PostgresRowSecurity``'s (10: no chunk is
    /// added to stored asset content; a public record keeps its name, zone and creator, and is
    /// retyped only into a type whose CREATE grant the member has).
    static let rowSecurityVersion = 21
    /// The version from which a record type stored with `"grants": {}` grants nothing.
    static let grantsNothingVersion = 19
    /// The version the asset step brought.
    static let assetStoreVersion = 3
    /// The version whose index entries are bounded (prefixes of long strings and words).
    static let boundedIndexVersion = 9

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
        ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS left_roots jsonb;
        CREATE INDEX IF NOT EXISTS tombstones_by_change ON tombstones(zone_id, change_seq);
        CREATE INDEX IF NOT EXISTS tombstones_by_deleted_at ON tombstones(deleted_at);
        CREATE TABLE IF NOT EXISTS hierarchy_moves(
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            change_seq bigint NOT NULL,
            moved_at double precision NOT NULL,
            left_roots jsonb NOT NULL,
            PRIMARY KEY(zone_id, record_name)
        );
        CREATE INDEX IF NOT EXISTS hierarchy_moves_by_change ON hierarchy_moves(zone_id, change_seq);
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
        ALTER TABLE job_progress ADD COLUMN IF NOT EXISTS role text COLLATE "C" NOT NULL DEFAULT CURRENT_USER;
        CREATE TABLE IF NOT EXISTS schema_roles(
            container text COLLATE "C" NOT NULL,
            role text COLLATE "C" NOT NULL,
            PRIMARY KEY(container, role)
        );
        CREATE TABLE IF NOT EXISTS user_directory(
            container text COLLATE "C" NOT NULL,
            login text COLLATE "C" NOT NULL,
            user_record_name text COLLATE "C" NOT NULL,
            roles text NOT NULL,
            PRIMARY KEY(container, login),
            UNIQUE(container, user_record_name)
        );
        CREATE INDEX IF NOT EXISTS user_directory_by_login ON user_directory(login, user_record_name);
        CREATE TABLE IF NOT EXISTS asset_contents(
            owner text COLLATE "C" NOT NULL,
            content_id text COLLATE "C" NOT NULL,
            size bigint NOT NULL,
            created_at double precision NOT NULL,
            PRIMARY KEY(owner, content_id)
        );
        CREATE TABLE IF NOT EXISTS asset_chunks(
            owner text COLLATE "C" NOT NULL,
            content_id text COLLATE "C" NOT NULL,
            chunk bigint NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY(owner, content_id, chunk)
        );
        CREATE TABLE IF NOT EXISTS asset_refs(
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            content_id text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            PRIMARY KEY(zone_id, record_name, content_id)
        );
        CREATE INDEX IF NOT EXISTS asset_refs_by_content ON asset_refs(owner, content_id);
        CREATE TABLE IF NOT EXISTS asset_holds(
            owner text COLLATE "C" NOT NULL,
            content_id text COLLATE "C" NOT NULL,
            holder text COLLATE "C" NOT NULL,
            held_at double precision NOT NULL,
            PRIMARY KEY(owner, content_id, holder)
        );
        """

    /// Version 2: the login names stored before (database and zone owners, record creators and
    /// modifiers, and the owner column of every owned row) become the users' derived record
    /// names (``Stratus/UserDirectoryEntry/derivedRecordName(containerIdentifier:login:)``,
    /// computed here with PostgreSQL's `sha256`). Names starting with `_` (CloudKit's user
    /// record names) and empty owners (the public database) stay. Zone rows and change numbers
    /// stay, so change tokens printed before go on.
    static let upgradeUserNames = """
        CREATE FUNCTION pg_temp.stratus_user_name(container text, login text) RETURNS text LANGUAGE sql IMMUTABLE AS
            $$ SELECT CASE WHEN login = '' OR left(login, 1) = '_' THEN login
                ELSE '_' || left(encode(sha256(convert_to(split_part(container, chr(31), 1), 'UTF8') || '\\x00'::bytea || convert_to(login, 'UTF8')), 'hex'), 32) END $$;
        UPDATE assets a SET owner = pg_temp.stratus_user_name(z.container, a.owner)
            FROM (SELECT DISTINCT ON (owner) owner, container FROM zones ORDER BY owner, container) z
            WHERE z.owner = a.owner AND a.owner <> '' AND left(a.owner, 1) <> '_';
        UPDATE records r SET owner = pg_temp.stratus_user_name(z.container, r.owner), created_by = pg_temp.stratus_user_name(z.container, r.created_by),
            modified_by = pg_temp.stratus_user_name(z.container, r.modified_by)
            FROM zones z WHERE z.zone_id = r.zone_id
            AND ((r.owner <> '' AND left(r.owner, 1) <> '_') OR left(r.created_by, 1) <> '_' OR left(r.modified_by, 1) <> '_');
        UPDATE tombstones t SET owner = pg_temp.stratus_user_name(z.container, t.owner) FROM zones z WHERE z.zone_id = t.zone_id AND t.owner <> '' AND left(t.owner, 1) <> '_';
        UPDATE refs t SET owner = pg_temp.stratus_user_name(z.container, t.owner) FROM zones z WHERE z.zone_id = t.zone_id AND t.owner <> '' AND left(t.owner, 1) <> '_';
        UPDATE record_tokens t SET owner = pg_temp.stratus_user_name(z.container, t.owner) FROM zones z WHERE z.zone_id = t.zone_id AND t.owner <> '' AND left(t.owner, 1) <> '_';
        UPDATE zones SET owner = pg_temp.stratus_user_name(container, owner), zone_owner = pg_temp.stratus_user_name(container, zone_owner)
            WHERE (owner <> '' AND left(owner, 1) <> '_') OR (zone_owner <> '' AND left(zone_owner, 1) <> '_');
        UPDATE database_history SET owner = pg_temp.stratus_user_name(container, owner) WHERE owner <> '' AND left(owner, 1) <> '_';
        UPDATE zone_tombstones SET owner = pg_temp.stratus_user_name(container, owner), zone_owner = pg_temp.stratus_user_name(container, zone_owner)
            WHERE (owner <> '' AND left(owner, 1) <> '_') OR (zone_owner <> '' AND left(zone_owner, 1) <> '_');
        DROP FUNCTION pg_temp.stratus_user_name(text, text);
        """

    /// Subscriptions and notification feeds (version 3), as SQLite's store keeps them: a
    /// database's subscriptions and their version (`subscription_state`), and each user's feed
    /// per container. A feed's row (`notification_feeds.seq`) is locked by the transaction that
    /// takes places in it until that transaction commits, so places follow commit order.
    static let subscriptions = """
        CREATE TABLE IF NOT EXISTS subscriptions(
            container text COLLATE "C" NOT NULL,
            db smallint NOT NULL,
            owner text COLLATE "C" NOT NULL,
            subscriber text COLLATE "C" NOT NULL,
            subscription_id text COLLATE "C" NOT NULL,
            record_type text COLLATE "C",
            zone_name text COLLATE "C",
            zone_owner text COLLATE "C",
            definition text NOT NULL,
            PRIMARY KEY(container, db, owner, subscriber, subscription_id)
        );
        CREATE TABLE IF NOT EXISTS subscription_state(
            container text COLLATE "C" NOT NULL,
            db smallint NOT NULL,
            owner text COLLATE "C" NOT NULL,
            version bigint NOT NULL DEFAULT 0,
            PRIMARY KEY(container, db, owner)
        );
        CREATE TABLE IF NOT EXISTS notification_feeds(
            container text COLLATE "C" NOT NULL,
            subscriber text COLLATE "C" NOT NULL,
            seq bigint NOT NULL DEFAULT 0,
            history_start bigint NOT NULL DEFAULT 0,
            PRIMARY KEY(container, subscriber)
        );
        CREATE TABLE IF NOT EXISTS notifications(
            container text COLLATE "C" NOT NULL,
            subscriber text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            created_at double precision NOT NULL,
            read boolean NOT NULL DEFAULT false,
            payload text NOT NULL,
            PRIMARY KEY(container, subscriber, seq)
        );
        """

    /// What user discovery finds users by (version 13), as SQLite's store keeps it: each
    /// login's name and whether others may find it (`user_identities`), and its addresses by the
    /// key lookups compare (`user_addresses`). Apart from `user_directory`, which every member
    /// reads, so that row-level security can hide an undiscoverable user's rows.
    static let userDiscovery = """
        CREATE TABLE IF NOT EXISTS user_identities(
            container text COLLATE "C" NOT NULL,
            login text COLLATE "C" NOT NULL,
            name_components text,
            discoverable boolean NOT NULL DEFAULT false,
            PRIMARY KEY(container, login)
        );
        CREATE TABLE IF NOT EXISTS user_addresses(
            container text COLLATE "C" NOT NULL,
            address_key text COLLATE "C" NOT NULL,
            login text COLLATE "C" NOT NULL,
            position integer NOT NULL,
            address text NOT NULL,
            PRIMARY KEY(container, address_key)
        );
        CREATE INDEX IF NOT EXISTS user_addresses_by_login ON user_addresses(container, login);
        """

    /// Where shares are found (version 12), as SQLite's store keeps them: `share_index` by URL
    /// token (with a record-level share's root), `share_members` by participant (whether
    /// accepted, whether read-write), each row naming the share by its owner's private database
    /// (container, owner), zone and record name. Row-level security reads them to let a
    /// participant's role reach the shared rows; `records_by_parent` serves its walk down a
    /// shared hierarchy.
    static let shareIndex = """
        CREATE TABLE IF NOT EXISTS share_index(
            container text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            zone_name text COLLATE "C" NOT NULL,
            share_name text COLLATE "C" NOT NULL,
            token text COLLATE "C" NOT NULL,
            root_name text COLLATE "C",
            PRIMARY KEY(container, owner, zone_name, share_name)
        );
        CREATE UNIQUE INDEX IF NOT EXISTS share_index_by_token ON share_index(container, token);
        CREATE TABLE IF NOT EXISTS share_members(
            container text COLLATE "C" NOT NULL,
            member text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            zone_name text COLLATE "C" NOT NULL,
            share_name text COLLATE "C" NOT NULL,
            accepted boolean NOT NULL,
            read_write boolean NOT NULL,
            PRIMARY KEY(container, member, owner, zone_name, share_name)
        );
        CREATE INDEX IF NOT EXISTS share_members_by_share ON share_members(container, owner, zone_name, share_name);
        CREATE INDEX IF NOT EXISTS records_by_parent ON records(zone_id, parent_name) WHERE parent_name IS NOT NULL;
        """

    /// The channel writers `NOTIFY` when they append to a feed; the payload names the store
    /// and the feed (see `PostgresEngine.feedChannelPayload`).
    static let notificationChannel = "stratus_notifications"

    /// The tables whose rows belong to a database owner (`owner`: empty for the public
    /// database), which row-level security restricts.
    static let ownedTables = ["zones", "records", "tombstones", "hierarchy_moves", "refs", "record_tokens", "database_history", "zone_tombstones",
                              "asset_contents", "asset_chunks", "asset_refs", "asset_holds",
                              "subscriptions", "subscription_state"]

    /// The record columns a row statement selects first, in the order they are decoded. The
    /// last modifier is NULL when it is the creator (as it mostly is): every column sent costs
    /// the server a conversion per row, and a long name the bytes besides.
    static let recordColumns = "r.record_name, r.record_type, r.created_at, r.created_by, r.modified_at, nullif(r.modified_by, r.created_by), r.change_tag, coalesce(r.exact_fields, r.fields::text), r.parent_name"
    /// ``recordColumns`` for a query, whose rows all have the type it names: the type is not
    /// sent (NULL), and its rows are decoded with the query's.
    static let queryRecordColumns = "r.record_name, NULL::text, r.created_at, r.created_by, r.modified_at, nullif(r.modified_by, r.created_by), r.change_tag, coalesce(r.exact_fields, r.fields::text), r.parent_name"
    static let recordColumnCount = 9
}
