import Foundation
@_spi(StratusEngine) import Stratus

/// The row-level security that makes each Stratus user a PostgreSQL role (``PostgresEngine/enableRowLevelSecurity(group:)``):
/// the SQL the tables' owner runs once, and again whenever it wants the policies of this version.
///
/// A member of the group reaches the public database's rows and the private rows owned by the
/// user record names the user directory gives its login, and writes only what is its own:
///
/// - records: in its private databases anything; in the public database new records it
///   creates itself, and changes and deletions of records it created or whose type's grants
///   let it write (`_world`, `_icloud`, `_creator` or a custom role the directory gives it,
///   CloudKit's defaults for a type made without naming grants), and of records a `.deleteSelf`
///   reference ties to a record that is gone (cascades);
/// - a record's words, `.deleteSelf` references and asset references: only for records it
///   last wrote, and deleted for records that are gone;
/// - user discovery: its own name and addresses, and those of users who are discoverable; of
///   its own entry, only whether it is discoverable;
/// - subscriptions: its own; zones, tombstones and histories of the public database: no
///   deletions (tombstones aside, which compaction removes), no zone but the default one, no
///   zone tombstones, and in shared bookkeeping rows only counters that grow (a trigger);
/// - development schemas: new types and fields without indexes, in the form Stratus reads;
///   never grants, nor a stored field removed, retyped or indexed (a trigger); `job_progress`:
///   its own jobs' rows;
/// - a record's field document: a JSON object (a policy), so that no member's row makes every
///   read of its type fail;
/// - the share index: the rows of its own shares, where it keeps a participant's acceptance
///   and gives none (a trigger: only the participant accepts, through the tables' owner);
/// - a participant's deletion of a shared record: its tombstone and the owner's zone and
///   database change positions, written by a trigger (the participant's role writes none of
///   the owner's bookkeeping), so that the owner's change feeds report it;
/// - a shared zone's records: no record created under a name that stored records name as
///   their parent (a trigger: they left the share with their parent, and only the owner brings
///   them into a hierarchy again).
///
/// Policies hold their expressions, not calls of functions: PostgreSQL resolves every name in
/// them once, when the policy is created, so nothing a member creates later (a temporary table
/// named like a Stratus table, a function or operator in a schema it may write, its own
/// `search_path`) can stand in for a name, and the planner evaluates the directory lookup once
/// per statement instead of once per row. The script resolves names with `search_path` set to
/// `pg_catalog, pg_temp` and names every Stratus table with its schema; the triggers' functions
/// carry that setting themselves.
enum PostgresRowSecurity {
    /// The policies of this version on each table, by name (earlier versions' names are dropped).
    static let policyNames = ["stratus_read", "stratus_insert", "stratus_update", "stratus_delete"]
    /// The single policy of every owned table before version 6, and the function it called.
    static let retiredPolicy = "stratus_owner"

    /// The script, as `users row-security --print` shows it: one transaction.
    static func script(group: String, schema: String) throws -> String {
        // Quiet: run again, or for the first time, its DROP … IF EXISTS lines would each print a
        // NOTICE in psql (the --print form).
        "BEGIN;\nSET LOCAL client_min_messages = warning;\n" + (try statements(group: group, schema: schema)) + "COMMIT;\n"
    }

    /// The statements, for a transaction of their own; they set `search_path` for the rest of it
    /// (`SET LOCAL`).
    static func statements(group: String, schema: String) throws -> String {
        let g = try PostgresConnection.quoteIdentifier(group)
        let s = try PostgresConnection.quoteIdentifier(schema)
        let sql = SQL(schema: s)
        var out = """
            -- Stratus row-level security for the members of \(g) (run by the role that owns the tables).
            -- Every name below is resolved now: functions and operators in pg_catalog, tables by their schema.
            SET LOCAL search_path = pg_catalog, pg_temp;

            """
        // Policies of earlier versions called stratus_owns, which read the directory through the
        // caller's search_path; it goes with them (at the end).
        for table in PostgresSchema.ownedTables {
            out += "DROP POLICY IF EXISTS \(retiredPolicy) ON \(s).\(table);\n"
        }
        for policy in ["stratus_subscriber", "stratus_subscriber_update", "stratus_subscriber_delete"] {
            out += "DROP POLICY IF EXISTS \(policy) ON \(s).notifications;\n"
        }
        out += "\n"
        out += try triggerFunctions(s)
        out += """
            GRANT USAGE ON SCHEMA \(s) TO \(g);
            GRANT EXECUTE ON FUNCTION \(s).stratus_analyze() TO \(g);
            GRANT SELECT ON \(s).meta, \(s).record_types, \(s).schema_roles, \(s).user_directory TO \(g);
            GRANT USAGE, SELECT ON SEQUENCE \(s).zone_ids TO \(g);
            -- Development schemas grow as users save; production's (its key holds U+001F) only by the administrator's deploy.
            GRANT INSERT, UPDATE ON \(s).record_types TO \(g);
            ALTER TABLE \(s).record_types ENABLE ROW LEVEL SECURITY;
            DROP POLICY IF EXISTS stratus_read ON \(s).record_types;
            CREATE POLICY stratus_read ON \(s).record_types FOR SELECT TO \(g) USING (true);
            DROP POLICY IF EXISTS stratus_grow ON \(s).record_types;
            CREATE POLICY stratus_grow ON \(s).record_types FOR INSERT TO \(g) WITH CHECK (strpos(container, chr(31)) = 0);
            DROP POLICY IF EXISTS stratus_grow_update ON \(s).record_types;
            CREATE POLICY stratus_grow_update ON \(s).record_types FOR UPDATE TO \(g) USING (strpos(container, chr(31)) = 0) WITH CHECK (strpos(container, chr(31)) = 0);
            DROP TRIGGER IF EXISTS stratus_keep_grants ON \(s).record_types;
            CREATE TRIGGER stratus_keep_grants BEFORE INSERT OR UPDATE ON \(s).record_types FOR EACH ROW EXECUTE FUNCTION \(s).stratus_keep_grants();
            -- Pipelines' positions: each role its own jobs.
            GRANT SELECT, INSERT, UPDATE, DELETE ON \(s).job_progress TO \(g);
            ALTER TABLE \(s).job_progress ENABLE ROW LEVEL SECURITY;
            DROP POLICY IF EXISTS stratus_own_jobs ON \(s).job_progress;
            CREATE POLICY stratus_own_jobs ON \(s).job_progress TO \(g) USING (role = CURRENT_USER::text) WITH CHECK (role = CURRENT_USER::text);
            -- Writers append to any user's feed (a public record can fire anyone's subscription); a feed's
            -- counters only grow, its notifications are read and changed by their subscriber only.
            GRANT SELECT, INSERT, UPDATE ON \(s).notification_feeds TO \(g);
            DROP TRIGGER IF EXISTS stratus_counters_only ON \(s).notification_feeds;
            CREATE TRIGGER stratus_counters_only BEFORE INSERT OR UPDATE ON \(s).notification_feeds FOR EACH ROW EXECUTE FUNCTION \(s).stratus_counters_only('seq', 'history_start<=seq');
            GRANT SELECT, INSERT, UPDATE, DELETE ON \(s).notifications TO \(g);
            ALTER TABLE \(s).notifications ENABLE ROW LEVEL SECURITY;
            DROP POLICY IF EXISTS stratus_append ON \(s).notifications;
            -- Only at places its feed has given out: a writer takes them from the feed's counter first, and
            -- a row put ahead of the counter would take the place of the next writer's notification.
            CREATE POLICY stratus_append ON \(s).notifications FOR INSERT TO \(g) WITH CHECK (notifications.seq <= (SELECT f.seq FROM \(s).notification_feeds f
                WHERE f.container = notifications.container AND f.subscriber = notifications.subscriber));

            """
        // A subscriber marks its notifications read; one moved past its feed's counter would take
        // the place of the next writer's.
        out += policies(on: "notifications", group: g, schema: s, read: sql.mine("notifications.subscriber"),
                        insert: nil, update: sql.mine("notifications.subscriber"),
                        updateCheck: "\(sql.mine("notifications.subscriber")) AND notifications.seq <= (SELECT f.seq FROM \(s).notification_feeds f WHERE f.container = notifications.container AND f.subscriber = notifications.subscriber)",
                        delete: sql.mine("notifications.subscriber"))
        // User discovery: a member reads its own name and addresses and those of discoverable
        // users, never an undiscoverable user's, and records its own discoverability (the
        // column grants leave the rest of its entry to the tables' owner).
        out += """
            GRANT SELECT ON \(s).user_identities, \(s).user_addresses TO \(g);
            GRANT INSERT (container, login, discoverable), UPDATE (discoverable) ON \(s).user_identities TO \(g);
            ALTER TABLE \(s).user_identities ENABLE ROW LEVEL SECURITY;
            ALTER TABLE \(s).user_addresses ENABLE ROW LEVEL SECURITY;

            """
        let myIdentity = "user_identities.login = CURRENT_USER::text"
        out += policies(on: "user_identities", group: g, schema: s, read: "(user_identities.discoverable OR \(myIdentity))",
                        insert: myIdentity, update: myIdentity, delete: nil)
        out += policies(on: "user_addresses", group: g, schema: s, read: """
            (user_addresses.login = CURRENT_USER::text OR EXISTS (SELECT 1 FROM \(s).user_identities i
                WHERE i.container = user_addresses.container AND i.login = user_addresses.login AND i.discoverable))
            """, insert: nil, update: nil, delete: nil)
        // The share index: an owner keeps its own shares' rows; a participant reads those that
        // name it, and through the views below reaches the rows of the shares it accepted.
        for table in ["share_index", "share_members"] {
            out += """
                GRANT SELECT, INSERT, UPDATE, DELETE ON \(s).\(table) TO \(g);
                ALTER TABLE \(s).\(table) ENABLE ROW LEVEL SECURITY;

                """
            let own = sql.mine("\(table).owner")
            let read = table == "share_members" ? "\(own) OR \(sql.mine("share_members.member"))" : "\(own) OR \(sql.namesMe("share_index"))"
            out += policies(on: table, group: g, schema: s, read: read, insert: own, update: own, delete: own)
        }
        out += """
            DROP TRIGGER IF EXISTS stratus_keep_acceptance ON \(s).share_members;
            CREATE TRIGGER stratus_keep_acceptance BEFORE INSERT OR UPDATE ON \(s).share_members FOR EACH ROW EXECUTE FUNCTION \(s).stratus_keep_acceptance();

            """
        out += sql.sharedReachViews(group: g)
        for table in PostgresSchema.ownedTables {
            let rule = sql.rule(for: table)
            out += """
                GRANT SELECT, INSERT, UPDATE, DELETE ON \(s).\(table) TO \(g);
                ALTER TABLE \(s).\(table) ENABLE ROW LEVEL SECURITY;

                """
            out += policies(on: table, group: g, schema: s, read: rule.read, insert: rule.insert, update: rule.update, updateCheck: rule.updateCheck, delete: rule.delete)
            if table == "records" {
                out += """
                    DROP TRIGGER IF EXISTS stratus_keep_record_identity ON \(s).records;
                    CREATE TRIGGER stratus_keep_record_identity BEFORE UPDATE ON \(s).records FOR EACH ROW EXECUTE FUNCTION \(s).stratus_keep_record_identity();
                    DROP TRIGGER IF EXISTS stratus_participant_tombstone ON \(s).records;
                    CREATE TRIGGER stratus_participant_tombstone AFTER DELETE ON \(s).records FOR EACH ROW
                        WHEN (OLD.owner <> '') EXECUTE FUNCTION \(s).stratus_participant_tombstone();
                    DROP TRIGGER IF EXISTS stratus_adopt_no_records ON \(s).records;
                    CREATE TRIGGER stratus_adopt_no_records BEFORE INSERT ON \(s).records FOR EACH ROW
                        WHEN (NEW.owner <> '' AND NEW.created_by <> NEW.owner) EXECUTE FUNCTION \(s).stratus_adopt_no_records();

                    """
            }
            if let counters = rule.counters {
                out += """
                    DROP TRIGGER IF EXISTS stratus_counters_only ON \(s).\(table);
                    CREATE TRIGGER stratus_counters_only BEFORE INSERT OR UPDATE ON \(s).\(table) FOR EACH ROW EXECUTE FUNCTION \(s).stratus_counters_only(\(counters.map { "'\($0)'" }.joined(separator: ", ")));

                    """
            }
        }
        // Last, once no policy of this script's calls it.
        return out + "DROP FUNCTION IF EXISTS \(s).stratus_owns(text);\n"
    }

    /// `CREATE POLICY` statements for one table (`nil`: no policy for that command, which
    /// row-level security then refuses).
    private static func policies(on table: String, group: String, schema: String, read: String, insert: String?, update: String?,
                                 updateCheck: String? = nil, delete: String?) -> String {
        var out = ""
        let target = "\(schema).\(table)"
        for name in policyNames { out += "DROP POLICY IF EXISTS \(name) ON \(target);\n" }
        out += "CREATE POLICY stratus_read ON \(target) FOR SELECT TO \(group) USING (\(read));\n"
        if let insert { out += "CREATE POLICY stratus_insert ON \(target) FOR INSERT TO \(group) WITH CHECK (\(insert));\n" }
        if let update { out += "CREATE POLICY stratus_update ON \(target) FOR UPDATE TO \(group) USING (\(update)) WITH CHECK (\(updateCheck ?? update));\n" }
        if let delete { out += "CREATE POLICY stratus_delete ON \(target) FOR DELETE TO \(group) USING (\(delete));\n" }
        return out + "\n"
    }

    /// The triggers' functions: `search_path` fixed to `pg_catalog, pg_temp` (the temporary
    /// schema last, so that no temporary table stands in for anything) and every table named
    /// with its schema. The tables' owner (and a superuser) passes; a member changes no keys.
    /// The most a member's update moves a counter (a change sequence, a feed's place) forward:
    /// more than any one write takes, and 2^32 updates short of a 64-bit counter's end.
    static let counterStepLimit: Int64 = 1 << 31

    private static func triggerFunctions(_ s: String) throws -> String {
        let sql = SQL(schema: s)
        let fieldTypes = FieldType.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        let limits = ContainerSchema.Limits()
        // The fields a schema file counts: those CloudKit declares itself are left out.
        let systemNames = SystemField.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        let shareNames = ContainerSchema.shareFields.map { "'\($0.name)'" }.joined(separator: ", ")
        func counted(_ field: String, of type: String) -> String {
            "NOT ((\(field) ->> 'name') IN (\(systemNames)) OR (\(type) = '\(RecordTypeUserRecord)' AND \(field) ->> 'name' = '\(ContainerSchema.usersRolesField.name)')"
                + " OR (\(type) = '\(Record.SystemType.share)' AND \(field) ->> 'name' IN (\(shareNames))))"
        }
        return """
        -- Shared bookkeeping rows (the public database's zone and history, feeds, asset content): a member only moves their counters forward.
        CREATE OR REPLACE FUNCTION \(s).stratus_counters_only() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $stratus$
        -- Each argument names a counter: `c` is a count writers add to (a write moves it by what it
        -- wrote, so a leap towards its end, or a new row that starts near it, would leave every
        -- other writer of the row nothing to count with); `c<=d` a position that never passes the
        -- row's counter d (a history's start); `c+` a position copied from elsewhere (a zone's place in
        -- its database's history), which writers set from its source, up or down.
        DECLARE
            before jsonb := CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) END;
            after jsonb := to_jsonb(NEW);
            rest_before jsonb := before;
            rest_after jsonb := after;
            spec text;
            counter text;
            bound text;
            moved numeric;
        BEGIN
            IF pg_has_role(CURRENT_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
                RETURN NEW;
            END IF;
            FOR i IN 0 .. TG_NARGS - 1 LOOP
                spec := TG_ARGV[i];
                counter := rtrim(split_part(spec, '<=', 1), '+');
                bound := nullif(split_part(spec, '<=', 2), '');
                moved := (after ->> counter)::numeric - coalesce((before ->> counter)::numeric, 0);
                IF before IS NOT NULL AND moved < 0 AND right(spec, 1) <> '+' THEN
                    RAISE EXCEPTION 'role % may not move %.% back', CURRENT_USER, TG_TABLE_NAME, counter USING ERRCODE = '42501';
                END IF;
                IF bound IS NOT NULL THEN
                    IF (after ->> counter)::numeric > (after ->> bound)::numeric THEN
                        RAISE EXCEPTION 'role % may not move %.% past %', CURRENT_USER, TG_TABLE_NAME, counter, bound USING ERRCODE = '42501';
                    END IF;
                ELSIF right(spec, 1) <> '+' AND moved > \(counterStepLimit) THEN
                    RAISE EXCEPTION 'role % may not move %.% forward by more than \(counterStepLimit) at once', CURRENT_USER, TG_TABLE_NAME, counter USING ERRCODE = '42501';
                END IF;
                rest_before := rest_before - counter;
                rest_after := rest_after - counter;
            END LOOP;
            IF before IS NOT NULL AND rest_before IS DISTINCT FROM rest_after THEN
                RAISE EXCEPTION 'role % may change only the counters of %', CURRENT_USER, TG_TABLE_NAME USING ERRCODE = '42501';
            END IF;
            RETURN NEW;
        END
        $stratus$;
        -- Development schemas: a member adds types and fields; grants stay the administrator's.
        CREATE OR REPLACE FUNCTION \(s).stratus_keep_grants() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $stratus$
        DECLARE
            stored text;
            new_schema jsonb;
            old_schema jsonb;
            new_fields bigint;
        BEGIN
            IF pg_has_role(CURRENT_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
                RETURN NEW;
            END IF;
            IF TG_OP = 'UPDATE' THEN
                IF NEW.container IS DISTINCT FROM OLD.container OR NEW.record_type IS DISTINCT FROM OLD.record_type THEN
                    RAISE EXCEPTION 'role % may not rename record type %', CURRENT_USER, OLD.record_type USING ERRCODE = '42501';
                END IF;
                stored := OLD.schema;
            ELSE
                -- An insert that meets a stored type updates it (ON CONFLICT): its grants are the stored ones.
                SELECT t.schema INTO stored FROM \(s).record_types t WHERE t.container = NEW.container AND t.record_type = NEW.record_type;
                -- The Users type comes with CloudKit's grants, which a member's first user record writes.
                IF stored IS NULL AND NEW.record_type = '\(RecordTypeUserRecord)' THEN
                    stored := '{"grants": \(SQL.usersGrants)}';
                END IF;
            END IF;
            -- Stored as checked: jsonb keeps a repeated key's last value, Stratus's reader its first.
            new_schema := NEW.schema::jsonb;
            NEW.schema := new_schema::text;
            -- A schema without grants has the type's defaults ('{}' grants nothing).
            IF coalesce(new_schema -> 'grants', CASE WHEN NEW.record_type = '\(RecordTypeUserRecord)' THEN '\(SQL.usersGrants)' ELSE '\(SQL.defaultGrants)' END::jsonb)
               IS DISTINCT FROM coalesce(stored::jsonb -> 'grants', CASE WHEN NEW.record_type = '\(RecordTypeUserRecord)' THEN '\(SQL.usersGrants)' ELSE '\(SQL.defaultGrants)' END::jsonb) THEN
                RAISE EXCEPTION 'role % may not change the grants of record type %: grants, indexes and production schemas are changed by the role that owns the tables (run schema deploy or schema import as that role)', CURRENT_USER, NEW.record_type USING ERRCODE = '42501';
            END IF;
            -- A type every reader decodes: Stratus's form, each field once, with a type Stratus knows.
            IF jsonb_typeof(new_schema) IS DISTINCT FROM 'object' OR new_schema ->> 'recordType' IS DISTINCT FROM NEW.record_type
               OR jsonb_typeof(new_schema -> 'fields') IS DISTINCT FROM 'array'
               OR EXISTS (SELECT 1 FROM jsonb_object_keys(new_schema) k WHERE k NOT IN ('recordType', 'fields', 'compoundIndexes', 'grants'))
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(new_schema -> 'fields') n(f)
                          WHERE jsonb_typeof(n.f) IS DISTINCT FROM 'object' OR jsonb_typeof(n.f -> 'name') IS DISTINCT FROM 'string'
                             OR (n.f ->> 'type') IN (\(fieldTypes)) IS NOT TRUE OR jsonb_typeof(n.f -> 'indexes') IS DISTINCT FROM 'number'
                             OR EXISTS (SELECT 1 FROM jsonb_each(n.f) e WHERE e.key NOT IN ('name', 'type', 'indexes', 'isEncrypted', 'isNumber', 'numberWithoutPreferredType')
                                        OR (e.key NOT IN ('name', 'type', 'indexes') AND jsonb_typeof(e.value) <> 'boolean')))
               OR (SELECT count(*) <> count(DISTINCT n.f ->> 'name') FROM jsonb_array_elements(new_schema -> 'fields') n(f)) THEN
                RAISE EXCEPTION 'role % may not store record type % in a form Stratus does not read', CURRENT_USER, NEW.record_type USING ERRCODE = '42501';
            END IF;
            -- Development grows: every stored field stays as it is, new fields come without indexes,
            -- compound indexes stay (CloudKit never changes a field's type).
            old_schema := coalesce(stored::jsonb, '{}'::jsonb);
            IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(old_schema -> 'fields', '[]'::jsonb)) o(f)
                       WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(new_schema -> 'fields') n(f) WHERE n.f = o.f))
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(new_schema -> 'fields') n(f)
                          WHERE (n.f ->> 'indexes')::numeric <> 0
                            AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(old_schema -> 'fields', '[]'::jsonb)) o(f) WHERE o.f = n.f))
               OR coalesce(new_schema -> 'compoundIndexes', '[]'::jsonb) IS DISTINCT FROM coalesce(old_schema -> 'compoundIndexes', '[]'::jsonb) THEN
                RAISE EXCEPTION 'role % may only add fields without indexes to record type %: removing, retyping or indexing a field is the administrator''s', CURRENT_USER, NEW.record_type USING ERRCODE = '42501';
            END IF;
            -- Stratus's limits on a schema, which development growth keeps so that every schema
            -- exports to a file that reads back: record types, fields per type, fields in all.
            IF stored IS NULL AND NEW.record_type <> '\(RecordTypeUserRecord)'
               AND (SELECT count(*) FROM \(s).record_types t WHERE t.container = NEW.container AND t.record_type <> '\(RecordTypeUserRecord)') >= \(limits.recordTypes) THEN
                RAISE EXCEPTION 'role % may not add record type %: a schema holds at most \(limits.recordTypes) record types', CURRENT_USER, NEW.record_type USING ERRCODE = '42501';
            END IF;
            SELECT count(*) INTO new_fields FROM jsonb_array_elements(new_schema -> 'fields') n(f) WHERE \(counted("n.f", of: "NEW.record_type"));
            IF new_fields > (SELECT count(*) FROM jsonb_array_elements(coalesce(old_schema -> 'fields', '[]'::jsonb)) o(f) WHERE \(counted("o.f", of: "NEW.record_type")))
               AND (new_fields > \(limits.fieldsPerRecordType)
                    OR new_fields + (SELECT count(*) FROM \(s).record_types t, jsonb_array_elements(t.schema::jsonb -> 'fields') o(f)
                                     WHERE t.container = NEW.container AND t.record_type <> NEW.record_type AND \(counted("o.f", of: "t.record_type"))) > \(limits.fields)) THEN
                RAISE EXCEPTION 'role % may not add fields to record type %: a record type holds at most \(limits.fieldsPerRecordType) fields, and a schema \(limits.fields) in all', CURRENT_USER, NEW.record_type USING ERRCODE = '42501';
            END IF;
            RETURN NEW;
        END
        $stratus$;
        -- A participant's acceptance is theirs to give: a member's role keeps an acceptance in its shares' index rows, never gives one
        -- (accepting changes the owner's share record, which runs as the tables' owner, for the participant).
        CREATE OR REPLACE FUNCTION \(s).stratus_keep_acceptance() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $stratus$
        BEGIN
            IF pg_has_role(CURRENT_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
                RETURN NEW;
            END IF;
            IF NEW.accepted AND NOT EXISTS (SELECT 1 FROM \(s).share_members m WHERE m.container = NEW.container AND m.member = NEW.member AND m.owner = NEW.owner
                                            AND m.zone_name = NEW.zone_name AND m.share_name = NEW.share_name AND m.accepted) THEN
                RAISE EXCEPTION 'role % may not mark % accepted in share %: a participant accepts a share themselves', CURRENT_USER, NEW.member, NEW.share_name USING ERRCODE = '42501';
            END IF;
            RETURN NEW;
        END
        $stratus$;
        -- A participant creates no record under a name that stored records name as their parent: those records left the share
        -- when their parent was deleted, and a record made under its name would bring them into the hierarchy it joins, which is the
        -- owner's to shape. A zone shared as a whole, and a share's root, bring in nothing its participants do not reach. Security
        -- definer, to see the records the participant does not; who acts is the session's role (CURRENT_USER is the definer here).
        -- The trigger's WHEN leaves out the rows a participant cannot insert (public ones, and those created by their owner).
        CREATE OR REPLACE FUNCTION \(s).stratus_adopt_no_records() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $stratus$
        BEGIN
            IF pg_has_role(SESSION_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE')
               OR NEW.owner IN (SELECT d.user_record_name FROM \(s).user_directory d WHERE d.login = SESSION_USER::text) THEN
                RETURN NEW;
            END IF;
            -- Only a row a participant who may write in the zone could write is judged here: any other is the policy's to
            -- answer, as for every name, so that the records of a zone not shared with the role stay unseen (their names
            -- included). The row names its writer (the policy requires a participant's own name), and the session's role
            -- counts too: a session that took a participant's role (SET ROLE) is judged as that participant.
            IF NOT EXISTS (SELECT 1 FROM \(s).share_members m
                           JOIN \(s).zones z ON z.container = m.container AND z.db = \(Database.Scope.private.rawValue) AND z.owner = m.owner AND z.zone_name = m.zone_name AND z.zone_owner = ''
                           WHERE z.zone_id = NEW.zone_id AND m.accepted AND m.read_write
                               AND (m.member = NEW.modified_by OR m.member = NEW.created_by
                                    OR m.member IN (SELECT d.user_record_name FROM \(s).user_directory d WHERE d.login = SESSION_USER::text))) THEN
                RETURN NEW;
            END IF;
            IF EXISTS (SELECT 1 FROM \(s).records c WHERE c.zone_id = NEW.zone_id AND c.parent_name = NEW.record_name)
               AND NOT EXISTS (SELECT 1 FROM \(s).records r WHERE r.zone_id = NEW.zone_id AND r.record_name = NEW.record_name)
               AND NOT EXISTS (SELECT 1 FROM \(s).share_index i
                               JOIN \(s).zones z ON z.container = i.container AND z.db = \(Database.Scope.private.rawValue) AND z.owner = i.owner AND z.zone_name = i.zone_name AND z.zone_owner = ''
                               WHERE z.zone_id = NEW.zone_id AND (i.share_name = '\(Share.zoneWideShareName)' OR i.root_name = NEW.record_name)) THEN
                RAISE EXCEPTION 'role % may not create record %: it is not in a hierarchy shared with it', SESSION_USER, NEW.record_name USING ERRCODE = '42501';
            END IF;
            RETURN NEW;
        END
        $stratus$;
        REVOKE ALL ON FUNCTION \(s).stratus_adopt_no_records() FROM PUBLIC;
        -- A participant's deletion of a shared record, with raw SQL, is a change of the owner's zone as Stratus's own deletion is: the
        -- database writes its tombstone at the zone's next change position and marks the zone changed in the owner's database (which
        -- the participant's role may not write), and removes what was derived from the row, so that the owner's devices learn of it.
        -- The tables' owner (Stratus acting for a participant writes the tombstone itself) and a row's owner pass.
        CREATE OR REPLACE FUNCTION \(s).stratus_participant_tombstone() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $stratus$
        DECLARE
            zone record;
            database_change bigint;
        BEGIN
            IF pg_has_role(SESSION_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE')
               OR OLD.owner IN (SELECT d.user_record_name FROM \(s).user_directory d WHERE d.login = SESSION_USER::text) THEN
                RETURN OLD;
            END IF;
            UPDATE \(s).zones SET change_seq = change_seq + 1 WHERE zone_id = OLD.zone_id RETURNING container, db, owner, change_seq INTO zone;
            INSERT INTO \(s).tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at)
                VALUES (OLD.zone_id, OLD.record_name, OLD.owner, OLD.record_type, zone.change_seq, extract(epoch FROM clock_timestamp()) - \(Int(Date.timeIntervalBetween1970AndReferenceDate)))
                ON CONFLICT (zone_id, record_name) DO UPDATE SET record_type = excluded.record_type, change_seq = excluded.change_seq, deleted_at = excluded.deleted_at, left_roots = NULL;
            INSERT INTO \(s).database_history(container, db, owner, change_seq) VALUES (zone.container, zone.db, zone.owner, 1)
                ON CONFLICT (container, db, owner) DO UPDATE SET change_seq = database_history.change_seq + 1 RETURNING change_seq INTO database_change;
            UPDATE \(s).zones SET db_change_seq = database_change WHERE zone_id = OLD.zone_id;
            DELETE FROM \(s).refs WHERE zone_id = OLD.zone_id AND source_name = OLD.record_name;
            DELETE FROM \(s).record_tokens WHERE zone_id = OLD.zone_id AND record_name = OLD.record_name;
            DELETE FROM \(s).asset_refs WHERE zone_id = OLD.zone_id AND record_name = OLD.record_name;
            RETURN OLD;
        END
        $stratus$;
        REVOKE ALL ON FUNCTION \(s).stratus_participant_tombstone() FROM PUBLIC;
        -- Statistics of the records and their words, gathered as the tables' owner (ANALYZE is the owner's): a member's engine calls
        -- it after its inserts grew a zone (PostgresEngine.analyzeIfGrown), so that the planner knows the zone before autovacuum does.
        -- Its settings are the owner's (a member's statistics target, cost delay or lock wait would change what every user's
        -- plans read, or how long the tables stay locked against schema changes); one analysis at a time, the others skip.
        CREATE OR REPLACE FUNCTION \(s).stratus_analyze() RETURNS void LANGUAGE plpgsql SECURITY DEFINER
            SET search_path = pg_catalog, pg_temp SET default_statistics_target FROM CURRENT SET vacuum_cost_delay = 0 SET lock_timeout = '200ms' AS $stratus$
        BEGIN
            IF pg_try_advisory_xact_lock(\(PostgresEngine.analysisLock)) THEN
                ANALYZE \(PostgresEngine.analyzedColumns(schema: s));
            END IF;
        END
        $stratus$;
        REVOKE ALL ON FUNCTION \(s).stratus_analyze() FROM PUBLIC;
        -- A public record keeps its name, zone and creator; a member retypes one only into a type whose CREATE grant it has.
        -- A private record another user shares keeps its name, zone, owner, creation and type: a participant changes its values.
        CREATE OR REPLACE FUNCTION \(s).stratus_keep_record_identity() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $stratus$
        BEGIN
            IF pg_has_role(CURRENT_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
                RETURN NEW;
            END IF;
            IF OLD.owner <> '' THEN
                IF OLD.owner IN (\(sql.myNames)) THEN
                    RETURN NEW;
                END IF;
                IF NEW.zone_id IS DISTINCT FROM OLD.zone_id OR NEW.record_name IS DISTINCT FROM OLD.record_name OR NEW.owner IS DISTINCT FROM OLD.owner
                   OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.record_type IS DISTINCT FROM OLD.record_type THEN
                    RAISE EXCEPTION 'role % may not change the name, zone, creation or type of record %, which another user shares with it', CURRENT_USER, OLD.record_name USING ERRCODE = '42501';
                END IF;
                RETURN NEW;
            END IF;
            IF NEW.zone_id IS DISTINCT FROM OLD.zone_id OR NEW.record_name IS DISTINCT FROM OLD.record_name OR NEW.owner IS DISTINCT FROM OLD.owner THEN
                RAISE EXCEPTION 'role % may not rename or move record %', CURRENT_USER, OLD.record_name USING ERRCODE = '42501';
            END IF;
            IF NEW.created_by IS DISTINCT FROM OLD.created_by THEN
                RAISE EXCEPTION 'role % may not change who created record %', CURRENT_USER, OLD.record_name USING ERRCODE = '42501';
            END IF;
            IF NEW.record_type IS DISTINCT FROM OLD.record_type
               AND NOT (\(sql.granted(.create, row: "NEW", creator: false)) OR \(sql.ownUserRecord("NEW"))) THEN
                RAISE EXCEPTION 'role % may not make record % a record of type %: the type does not grant it CREATE', CURRENT_USER, OLD.record_name, NEW.record_type USING ERRCODE = '42501';
            END IF;
            RETURN NEW;
        END
        $stratus$;

        """
    }

    /// Pieces of policy expressions for the store in schema `schema` (quoted).
    struct SQL {
        let schema: String

        /// The user record names the directory gives the connected role, in any container.
        var myNames: String { "SELECT d.user_record_name FROM \(schema).user_directory d WHERE d.login = CURRENT_USER::text" }

        /// `column` names one of the connected role's user record names.
        func mine(_ column: String) -> String { "\(column) IN (\(myNames))" }

        /// The row of `table` belongs to the public database (empty owner), or to the role.
        func publicOrMine(_ table: String) -> String { "(\(table).owner = '' OR \(mine("\(table).owner")))" }

        // MARK: Shares

        /// The share of the `share_index` row `table` names the role as a participant.
        func namesMe(_ table: String) -> String {
            """
            EXISTS (SELECT 1 FROM \(schema).share_members m WHERE m.container = \(table).container AND m.owner = \(table).owner
                    AND m.zone_name = \(table).zone_name AND m.share_name = \(table).share_name AND \(mine("m.member")))
            """
        }

        /// What the role reaches as an accepted participant, as two views the tables' owner
        /// owns: they read the tables as their owner (past row-level security, so that a policy
        /// on `records` may walk `records`' parents without recursing into itself) and answer
        /// only the connected role's part (`CURRENT_USER` is the role in a view), behind a
        /// security barrier so that no function of the caller's sees a row the view leaves out.
        ///
        /// - `shared_zones_reached`: each share naming the role, by its zone (`zone_id`), share
        ///   (`cloudkit.zoneshare`: zone-wide), root (`NULL` for a zone-wide share, and for a
        ///   record share whose root is not known, which reaches nothing but itself), whether the
        ///   role accepted it and whether it may write;
        /// - `shared_records_reached`: each record of an accepted record-level share's hierarchy
        ///   (the root, and records whose `parent_name` chain leads to it), and the share record
        ///   of each share naming the role (read-only: an invitee reads what it is invited to).
        func sharedReachViews(group: String) -> String {
            let privateScope = Database.Scope.private.rawValue
            return """
                CREATE OR REPLACE VIEW \(schema).shared_zones_reached WITH (security_barrier) AS
                    SELECT z.zone_id, m.share_name, i.root_name, m.accepted, m.read_write
                    FROM \(schema).share_members m
                    JOIN \(schema).share_index i ON i.container = m.container AND i.owner = m.owner AND i.zone_name = m.zone_name AND i.share_name = m.share_name
                    JOIN \(schema).zones z ON z.container = m.container AND z.db = \(privateScope) AND z.owner = m.owner AND z.zone_name = m.zone_name AND z.zone_owner = ''
                    WHERE \(mine("m.member"));
                CREATE OR REPLACE VIEW \(schema).shared_records_reached WITH (security_barrier) AS
                    WITH RECURSIVE reach(zone_id, record_name, read_write) AS (
                        SELECT v.zone_id, v.root_name, v.read_write FROM \(schema).shared_zones_reached v WHERE v.accepted AND v.root_name IS NOT NULL
                        UNION
                        SELECT r.zone_id, r.record_name, reach.read_write FROM \(schema).records r
                        JOIN reach ON r.zone_id = reach.zone_id AND r.parent_name = reach.record_name
                    )
                    SELECT reach.zone_id, reach.record_name, reach.read_write FROM reach
                    UNION ALL
                    SELECT v.zone_id, v.share_name, false FROM \(schema).shared_zones_reached v;
                GRANT SELECT ON \(schema).shared_zones_reached, \(schema).shared_records_reached TO \(group);

                """
        }

        /// The row `row` of `records` (or of a table keyed by zone) lies in a zone the role
        /// accepted a zone-wide share of (`writable`: with `.readWrite`).
        func inSharedZone(_ row: String, writable: Bool) -> String {
            "\(row).zone_id IN (SELECT v.zone_id FROM \(schema).shared_zones_reached v WHERE v.accepted AND v.share_name = '\(Share.zoneWideShareName)'\(writable ? " AND v.read_write" : ""))"
        }

        /// The record `name` of `row`'s zone is one the role reaches through a record-level share
        /// (`writable`: with `.readWrite`).
        func inSharedHierarchy(_ row: String, name: String, writable: Bool) -> String {
            "(\(row).zone_id, \(row).\(name)) IN (SELECT x.zone_id, x.record_name FROM \(schema).shared_records_reached x\(writable ? " WHERE x.read_write" : ""))"
        }

        /// A participant's read of a row of `row` (a table keyed by zone) that belongs to the
        /// record in its column `name`: in a zone shared as a whole, or in a shared hierarchy.
        func sharedRowReadable(_ row: String, name: String) -> String {
            "(\(inSharedZone(row, writable: false)) OR \(inSharedHierarchy(row, name: name, writable: false)))"
        }

        /// Asset content (`asset_contents` or `asset_chunks` row `row`) that a record the role
        /// reaches as a participant names: what a participant's read of it hands out.
        func namedBySharedRecord(_ row: String) -> String {
            """
            EXISTS (SELECT 1 FROM \(schema).asset_refs a WHERE a.owner = \(row).owner AND a.content_id = \(row).content_id
                AND \(sharedRowReadable("a", name: "record_name")))
            """
        }

        /// A participant's read of `records` row `row`: in a zone shared as a whole, or in a
        /// shared hierarchy.
        func sharedRecordReadable(_ row: String) -> String {
            "(\(inSharedZone(row, writable: false)) OR \(inSharedHierarchy(row, name: "record_name", writable: false)))"
        }

        /// A read-write participant's change or deletion of the stored row `row`: not a share
        /// (its owner's), and in a zone or hierarchy shared with write permission.
        func sharedRecordWritable(_ row: String) -> String {
            "(\(row).record_type <> '\(Record.SystemType.share)' AND (\(inSharedZone(row, writable: true)) OR \(inSharedHierarchy(row, name: "record_name", writable: true))))"
        }

        /// Where a read-write participant's new or changed row `row` may go: not a share, last
        /// modified by the role, and in a zone shared with write permission, or under a record of
        /// such a hierarchy (its `parent_name`), or as the root of one.
        func sharedRecordPlacement(_ row: String) -> String {
            """
            (\(row).record_type <> '\(Record.SystemType.share)' AND \(mine("\(row).modified_by")) AND (\(inSharedZone(row, writable: true))
                OR \(inSharedHierarchy(row, name: "parent_name", writable: true))
                OR (\(row).zone_id, \(row).record_name) IN (SELECT v.zone_id, v.root_name FROM \(schema).shared_zones_reached v WHERE v.accepted AND v.read_write)))
            """
        }

        /// `publicRule` for a public row, the role's own rows otherwise.
        func ownedOr(_ table: String, public publicRule: String) -> String {
            "CASE WHEN \(table).owner = '' THEN \(publicRule) ELSE \(mine("\(table).owner")) END"
        }

        /// The grants of the `Users` type before any schema names it (CloudKit's), as its schema
        /// would store them.
        static var usersGrants: String {
            let grants = ContainerSchema.defaultUsersRecordType.grants.sorted { $0.key.name < $1.key.name }
            return "{" + grants.map { "\"\($0.key.name)\": \($0.value.rawValue)" }.joined(separator: ", ") + "}"
        }

        /// CloudKit's defaults for a type made without naming grants, which its schema stores
        /// as no `grants` key (`{}`: a type that grants nothing).
        static var defaultGrants: String {
            let grants = RecordTypeSchema.publicDatabaseGrants.sorted { $0.key.name < $1.key.name }
            return "{" + grants.map { "\"\($0.key.name)\": \($0.value.rawValue)" }.joined(separator: ", ") + "}"
        }

        /// The record `row` (a `records` row in the public database) is one the type's grants let
        /// the connected role do `permission` with: through `_world`, `_icloud` or a custom role
        /// the container's directory gives its login, or, with `creator`, through `_creator` on
        /// a record it created. A type stored without a `grants` key, or not stored, has CloudKit's
        /// defaults (the `Users` type CloudKit's grants for it); one stored with `{}` grants nothing.
        func granted(_ permission: RecordPermissions, row: String, creator: Bool) -> String {
            let p = permission.rawValue
            let bits = { (role: String) in "coalesce((x.g ->> \(role))::int, 0)" }
            return """
                EXISTS (SELECT 1 FROM \(schema).zones z
                    JOIN \(schema).user_directory d ON d.container = split_part(z.container, chr(31), 1) AND d.login = CURRENT_USER::text
                    LEFT JOIN \(schema).record_types t ON t.container = z.container AND t.record_type = \(row).record_type
                    CROSS JOIN LATERAL (SELECT coalesce(t.schema::jsonb -> 'grants',
                        CASE WHEN \(row).record_type = '\(RecordTypeUserRecord)' THEN '\(Self.usersGrants)'::jsonb ELSE '\(Self.defaultGrants)'::jsonb END) AS g) x
                    WHERE z.zone_id = \(row).zone_id
                    AND (((\(bits("'_world'")) | \(bits("'_icloud'"))) & \(p)) <> 0\(creator ? "\n        OR (\(row).created_by = d.user_record_name AND (\(bits("'_creator'")) & \(p)) <> 0)" : "")
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(d.roles::jsonb) AS r(role) WHERE (\(bits("r.role")) & \(p)) <> 0)))
                """
        }

        /// The role's own user record (type `Users`, named by its user record name), which the
        /// system makes at its first fetch or save although no grant lets anyone create a `Users`
        /// record (``Stratus/CurrentUserRecord``).
        func ownUserRecord(_ row: String) -> String {
            "(\(row).record_type = '\(RecordTypeUserRecord)' AND \(mine("\(row).record_name")))"
        }

        /// A public record that a `.deleteSelf` reference ties to a record that is gone: a
        /// cascade deletes it, whoever deleted the target (the record's writer chose to hold it).
        /// The target is gone when its tombstone is there (the table's own rows cannot be read in
        /// its policy; a tombstone names a record that is gone, which its policy checks).
        func cascaded(_ row: String) -> String {
            """
            EXISTS (SELECT 1 FROM \(schema).refs f JOIN \(schema).tombstones t ON t.zone_id = f.zone_id AND t.record_name = f.target_name
                    WHERE f.zone_id = \(row).zone_id AND f.source_name = \(row).record_name)
            """
        }

        /// A row kept for a record (`column` names it) that the role wrote last.
        func forRecordIWrote(_ table: String, _ column: String) -> String {
            "EXISTS (SELECT 1 FROM \(schema).records r WHERE r.zone_id = \(table).zone_id AND r.record_name = \(table).\(column) AND \(mine("r.modified_by")))"
        }

        /// A row kept for a record that is gone, or that the role wrote last.
        func forRecordGoneOrMine(_ table: String, _ column: String) -> String {
            "NOT EXISTS (SELECT 1 FROM \(schema).records r WHERE r.zone_id = \(table).zone_id AND r.record_name = \(table).\(column) AND NOT \(mine("r.modified_by")))"
        }

        /// What a member may do with the rows of an owned table.
        struct Rule {
            var read: String
            var insert: String?
            var update: String?
            var updateCheck: String?
            var delete: String?
            /// Columns a member may only increase, as ``stratus_counters_only`` reads them (`c`, `c<=d`,
            /// `c+`; a trigger refuses any other change; empty: every change); nil: no trigger.
            var counters: [String]?
        }

        /// The row of `table` belongs to the shared database of an accepted participant of one
        /// of the role's shares: the subscriptions the role's writes in its shared zones fire.
        func participantsSharedDatabase(_ table: String) -> String {
            """
            (\(table).db = \(Database.Scope.shared.rawValue) AND EXISTS (SELECT 1 FROM \(schema).share_members m
                WHERE m.container = \(table).container AND m.member = \(table).owner AND m.accepted AND \(mine("m.owner"))))
            """
        }

        /// A row of a zone's (`zone_id`) belongs to the zone's database: its owner is the zone's.
        /// Without it a member could put its rows into another user's zone, which that user's
        /// role does not see but the tables' owner (a copy) does.
        func inItsZone(_ table: String) -> String {
            "EXISTS (SELECT 1 FROM \(schema).zones z WHERE z.zone_id = \(table).zone_id AND z.owner = \(table).owner)"
        }

        func rule(for table: String) -> Rule {
            let own = mine("\(table).owner")
            let read = publicOrMine(table)
            switch table {
            case "records":
                let write = granted(.write, row: table, creator: true)
                // Readers take the exact text when there is one (`exact_fields`, for what jsonb
                // cannot hold), so it must be an object too; `json` reads what `jsonb` refuses.
                let document = "jsonb_typeof(records.fields) = 'object' AND (records.exact_fields IS NULL OR json_typeof(records.exact_fields::json) = 'object')"
                // An accepted participant reads the shared records, and with `.readWrite` writes
                // them as itself (never the share record, which is its owner's).
                let owned = ownedOr(table, public: "\(mine("records.created_by")) AND (\(granted(.create, row: table, creator: false)) OR \(ownUserRecord(table)))")
                let sharedInsert = "(\(sharedRecordPlacement(table)) AND \(mine("records.created_by")))"
                return Rule(read: "(\(read) OR \(sharedRecordReadable(table)))",
                            insert: "((\(owned)) OR \(sharedInsert)) AND \(inItsZone(table)) AND \(document)",
                            update: "((\(ownedOr(table, public: write))) OR \(sharedRecordWritable(table)))",
                            updateCheck: "((\(ownedOr(table, public: write))) OR \(sharedRecordPlacement(table))) AND \(inItsZone(table)) AND \(document)",
                            delete: "((\(ownedOr(table, public: "(\(write) OR \(cascaded(table)))"))) OR \(sharedRecordWritable(table)))")
            case "refs", "record_tokens", "asset_refs":
                let column = table == "refs" ? "source_name" : "record_name"
                let write = "(\(ownedOr(table, public: forRecordIWrote(table, column)))) AND \(inItsZone(table))"
                // A participant reads those of the records it reaches: the words its queries
                // match, the references, the assets its reads hand out.
                return Rule(read: "(\(read) OR \(sharedRowReadable(table, name: column)))", insert: write, update: write,
                            delete: ownedOr(table, public: forRecordGoneOrMine(table, column)))
            case "tombstones":
                // A tombstone in the public database names a record that is gone; compaction removes old ones.
                // A participant reads a shared zone's, as the shared database hands them out.
                let gone = "NOT EXISTS (SELECT 1 FROM \(schema).records r WHERE r.zone_id = tombstones.zone_id AND r.record_name = tombstones.record_name)"
                let write = "(\(ownedOr(table, public: gone))) AND \(inItsZone(table))"
                // A participant reads a shared zone's, as the shared database hands them out: in a
                // zone shared record by record those of its hierarchies (and those whose
                // hierarchies are unknown: tombstones of older versions, raw-SQL deletions).
                let sharedZone = "tombstones.zone_id IN (SELECT v.zone_id FROM \(schema).shared_zones_reached v WHERE v.accepted)"
                let ofMyHierarchies = """
                    (tombstones.left_roots IS NULL OR \(inSharedZone("tombstones", writable: false))
                        OR tombstones.left_roots ?| ARRAY(SELECT v.root_name FROM \(schema).shared_zones_reached v
                            WHERE v.accepted AND v.zone_id = tombstones.zone_id AND v.root_name IS NOT NULL))
                    """
                return Rule(read: "(\(read) OR (\(sharedZone) AND \(ofMyHierarchies)))", insert: write, update: write, delete: read)
            case "hierarchy_moves":
                // Written by the zone's owner (shares are in private zones). A participant reads
                // the moves of the records it reaches now, and of those that left a hierarchy
                // of its own: what its zone changes hand it, never another share's.
                let write = "\(own) AND \(inItsZone(table))"
                let leftMine = """
                    hierarchy_moves.left_roots ?| ARRAY(SELECT v.root_name FROM \(schema).shared_zones_reached v
                        WHERE v.accepted AND v.zone_id = hierarchy_moves.zone_id AND v.root_name IS NOT NULL)
                    """
                return Rule(read: "(\(read) OR \(sharedRowReadable(table, name: "record_name")) OR (\(leftMine)))", insert: write, update: write, delete: own)
            case "zones":
                // A participant reads the zones of the shares naming it (an invitee finds the share).
                let created = ownedOr(table, public: "zones.zone_name = '\(RecordZone.ID.default.zoneName)' AND zones.zone_owner = ''")
                let sharedZone = "zones.zone_id IN (SELECT v.zone_id FROM \(schema).shared_zones_reached v)"
                return Rule(read: "(\(read) OR \(sharedZone))", insert: created, update: read, delete: own, counters: ["change_seq", "history_start<=change_seq", "db_change_seq+"])
            case "database_history":
                return Rule(read: read, insert: read, update: read, delete: own, counters: ["change_seq", "history_start<=change_seq"])
            case "subscription_state":
                return Rule(read: "(\(read) OR \(participantsSharedDatabase(table)))", insert: read, update: read, delete: own, counters: ["version"])
            case "zone_tombstones":
                // Zones of the public database are never deleted.
                return Rule(read: read, insert: own, update: own, delete: own)
            case "subscriptions":
                let write = "\(mine("subscriptions.subscriber")) AND \(read)"
                return Rule(read: "(\(read) OR \(participantsSharedDatabase(table)))", insert: write, update: write, delete: write)
            case "asset_contents":
                // Content is shared by the public database's writers (keyed by its SHA-256); content no
                // record names and no writer holds is collected by whoever released it.
                let unreferenced = """
                    NOT EXISTS (SELECT 1 FROM \(schema).asset_refs a WHERE a.owner = asset_contents.owner AND a.content_id = asset_contents.content_id)
                        AND NOT EXISTS (SELECT 1 FROM \(schema).asset_holds h WHERE h.owner = asset_contents.owner AND h.content_id = asset_contents.content_id)
                    """
                // Writers lock public content they are about to name (FOR SHARE, which checks the
                // update policy); the trigger lets no member change it.
                return Rule(read: "(\(read) OR \(namedBySharedRecord(table)))", insert: read, update: read, delete: ownedOr(table, public: unreferenced), counters: [])
            case "asset_chunks":
                let orphaned = "NOT EXISTS (SELECT 1 FROM \(schema).asset_contents c WHERE c.owner = asset_chunks.owner AND c.content_id = asset_chunks.content_id)"
                // Chunks go in before their content's row, in the writer's transaction: a chunk
                // added to content already stored would change the bytes every reader gets.
                return Rule(read: "(\(read) OR \(namedBySharedRecord(table)))", insert: "(\(read)) AND \(orphaned)", update: own, delete: ownedOr(table, public: orphaned))
            default:
                // asset_holds: a writer's claim on content; collection removes those of writers that are gone.
                return Rule(read: read, insert: read, update: read, delete: read)
            }
        }
    }
}
