import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresWriteTransaction {
    /// Members' rows are changed in place, not deleted and inserted again: row-level security
    /// lets a member's role keep a participant's acceptance in its own shares' rows, never
    /// give one (``PostgresRowSecurity``).
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, rootRecordName: String?, members: [ShareIndexMember]) throws {
        let share: [PostgresValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        _ = try connection.execute("DELETE FROM share_index WHERE container = $1 AND owner = $2 AND zone_name = $3 AND share_name = $4", share)
        _ = try connection.execute("DELETE FROM share_members WHERE container = $1 AND owner = $2 AND zone_name = $3 AND share_name = $4 AND NOT (member = ANY($5::text[]))",
                                   share + [.textArray(members.map(\.userRecordName))])
        try PostgresEngine.insertShareIndexRows(share, token: token, rootRecordName: rootRecordName, members: members, on: connection)
    }

    func subscribedShareMembers(inZone zoneName: String) throws -> [ShareIndexAcceptance] {
        try connection.query("""
            SELECT m.share_name, i.root_name, m.member FROM share_members m
            JOIN share_index i ON i.container = m.container AND i.owner = m.owner AND i.zone_name = m.zone_name AND i.share_name = m.share_name
            WHERE m.container = $1 AND m.owner = $2 AND m.zone_name = $3 AND m.accepted
                AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.container = m.container AND s.db = \(Database.Scope.shared.rawValue) AND s.owner = m.member)
            """, [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName)]).map { row in
            ShareIndexAcceptance(zoneName: zoneName, shareRecordName: try row.text(0) ?? "", rootRecordName: try row.text(1), member: try row.text(2) ?? "")
        }
    }

    func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws {
        let share: [PostgresValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        for table in ["share_index", "share_members"] {
            _ = try connection.execute("DELETE FROM \(table) WHERE container = $1 AND owner = $2 AND zone_name = $3 AND share_name = $4", share)
        }
    }
}

extension PostgresEngine {
    /// Inserts the index rows of the share `share` names (container, owner, zone name, record
    /// name), and updates its members' rows that are there. A token another share of the
    /// container holds (two restored shares with one URL) stays that share's.
    static func insertShareIndexRows(_ share: [PostgresValue], token: String, rootRecordName: String?, members: [ShareIndexMember], on connection: PostgresConnection) throws {
        _ = try connection.execute("INSERT INTO share_index(container, owner, zone_name, share_name, token, root_name) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                                   share + [.text(token), rootRecordName.map { .text($0) } ?? .null])
        for member in members {
            _ = try connection.execute("""
                INSERT INTO share_members(container, owner, zone_name, share_name, member, accepted, read_write) VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (container, member, owner, zone_name, share_name) DO UPDATE SET accepted = excluded.accepted, read_write = excluded.read_write
                """, share + [.text(member.userRecordName), .bool(member.isAccepted), .bool(member.mayWrite)])
        }
    }

    /// Version 12's step: the shares an earlier version stored (in zones of private databases)
    /// go into the share index, so that their URLs and participants find them.
    static func indexStoredShares(on connection: PostgresConnection) throws {
        let rows = try connection.query("""
            SELECT z.container, z.owner, z.zone_name, r.record_name, coalesce(r.exact_fields, r.fields::text) FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE r.record_type = $1 AND z.db = $2 AND z.zone_owner = ''
            """, [.text(Record.SystemType.share), .int64(Int64(Database.Scope.private.rawValue))])
        for row in rows {
            let document = try FieldDocument.decodeStoredDocument(try row.text(4) ?? "{}", zoneID: .default) { _ in nil }
            guard let indexing = ShareIndexing(shareExtras: document.jsonExtras) else { continue }
            let share: [PostgresValue] = [.text(try row.text(0) ?? ""), .text(try row.text(1) ?? ""), .text(try row.text(2) ?? ""), .text(try row.text(3) ?? "")]
            try Self.insertShareIndexRows(share, token: indexing.token, rootRecordName: indexing.rootRecordName, members: indexing.members, on: connection)
        }
    }

    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? {
        try readTransaction(mayLag: false) { connection in
            guard let row = try connection.query("SELECT owner, zone_name, share_name FROM share_index WHERE container = $1 AND token = $2",
                                                 [.text(storageContainer), .text(token)]).first else { return nil }
            return ShareIndexEntry(owner: try row.text(0) ?? "", zoneName: try row.text(1) ?? "", shareRecordName: try row.text(2) ?? "")
        }
    }

    @_spi(StratusEngine) public func indexedShares(acceptedBy member: String, storageContainer: String) throws -> [ShareIndexEntry] {
        try readTransaction(mayLag: false) { connection in
            try connection.query("SELECT owner, zone_name, share_name FROM share_members WHERE container = $1 AND member = $2 AND accepted",
                                 [.text(storageContainer), .text(member)]).map { row in
                ShareIndexEntry(owner: try row.text(0) ?? "", zoneName: try row.text(1) ?? "", shareRecordName: try row.text(2) ?? "")
            }
        }
    }
}
