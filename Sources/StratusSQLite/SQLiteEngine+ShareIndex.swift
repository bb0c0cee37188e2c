import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteWriteTransaction {
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, rootRecordName: String?, members: [ShareIndexMember]) throws {
        try removeShareFromIndex(shareRecordName, zoneName: zoneName)
        let share: [SQLValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        try SQLiteEngine.insertShareIndexRows(share, token: token, rootRecordName: rootRecordName, members: members, on: connection)
    }

    func subscribedShareMembers(inZone zoneName: String) throws -> [ShareIndexAcceptance] {
        let select = try connection.statement("""
            SELECT m.share_name, i.root_name, m.member FROM share_members m
            JOIN share_index i ON i.container = m.container AND i.owner = m.owner AND i.zone_name = m.zone_name AND i.share_name = m.share_name
            WHERE m.container = ? AND m.owner = ? AND m.zone_name = ? AND m.accepted = 1
                AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.container = m.container AND s.db = \(Database.Scope.shared.rawValue) AND s.owner = m.member)
            """)
        try select.bind([.text(context.storageContainer), .text(context.storageOwner), .text(zoneName)])
        defer { select.reset() }
        var found: [ShareIndexAcceptance] = []
        while try select.step() {
            found.append(ShareIndexAcceptance(zoneName: zoneName, shareRecordName: select.text(0) ?? "", rootRecordName: select.text(1), member: select.text(2) ?? ""))
        }
        return found
    }

    func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws {
        let share: [SQLValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        for table in ["share_index", "share_members"] {
            let delete = try connection.statement("DELETE FROM \(table) WHERE container = ? AND owner = ? AND zone_name = ? AND share_name = ?")
            try delete.bind(share)
            try delete.step()
            delete.reset()
        }
    }
}

extension SQLiteEngine {
    /// Inserts the index rows of the share `share` names (container, owner, zone name, record
    /// name). A token another share of the container holds (two restored shares with one URL)
    /// stays that share's.
    static func insertShareIndexRows(_ share: [SQLValue], token: String, rootRecordName: String?, members: [ShareIndexMember], on connection: SQLiteConnection) throws {
        let insert = try connection.statement("INSERT OR IGNORE INTO share_index(container, owner, zone_name, share_name, token, root_name) VALUES (?, ?, ?, ?, ?, ?)")
        try insert.bind(share + [.text(token), rootRecordName.map { .text($0) } ?? .null])
        try insert.step()
        insert.reset()
        let member = try connection.statement("INSERT OR IGNORE INTO share_members(container, owner, zone_name, share_name, member, accepted, read_write) VALUES (?, ?, ?, ?, ?, ?, ?)")
        for entry in members {
            member.reset()
            try member.bind(share + [.text(entry.userRecordName), .integer(entry.isAccepted ? 1 : 0), .integer(entry.mayWrite ? 1 : 0)])
            try member.step()
        }
        member.reset()
    }

    /// Version 11's step: the shares an earlier version stored (in zones of private databases)
    /// go into the share index, so that their URLs and participants find them.
    func indexStoredShares(on connection: SQLiteConnection) throws {
        let select = try connection.uncachedStatement("""
            SELECT z.container, z.owner, z.zone_name, r.record_name, r.fields FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE r.record_type = ? AND z.db = ? AND z.zone_owner = ''
            """)
        try select.bind([.text(Record.SystemType.share), .integer(Int64(Database.Scope.private.rawValue))])
        var shares: [(share: [SQLValue], indexing: ShareIndexing)] = []
        while try select.step() {
            let document = try FieldDocument.decodeStoredDocument(select.text(4) ?? "{}", zoneID: .default) { _ in nil }
            guard let indexing = ShareIndexing(shareExtras: document.jsonExtras) else { continue }
            shares.append(([.text(select.text(0) ?? ""), .text(select.text(1) ?? ""), .text(select.text(2) ?? ""), .text(select.text(3) ?? "")], indexing))
        }
        select.reset()
        for (share, indexing) in shares {
            try Self.insertShareIndexRows(share, token: indexing.token, rootRecordName: indexing.rootRecordName, members: indexing.members, on: connection)
        }
    }

    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? {
        try readTransaction { connection in
            let select = try connection.statement("SELECT owner, zone_name, share_name FROM share_index WHERE container = ? AND token = ?")
            try select.bind([.text(storageContainer), .text(token)])
            defer { select.reset() }
            guard try select.step() else { return nil }
            return ShareIndexEntry(owner: select.text(0) ?? "", zoneName: select.text(1) ?? "", shareRecordName: select.text(2) ?? "")
        }
    }

    @_spi(StratusEngine) public func indexedShares(acceptedBy member: String, storageContainer: String) throws -> [ShareIndexEntry] {
        try readTransaction { connection in
            let select = try connection.statement("SELECT owner, zone_name, share_name FROM share_members WHERE container = ? AND member = ? AND accepted = 1")
            try select.bind([.text(storageContainer), .text(member)])
            defer { select.reset() }
            var entries: [ShareIndexEntry] = []
            while try select.step() {
                entries.append(ShareIndexEntry(owner: select.text(0) ?? "", zoneName: select.text(1) ?? "", shareRecordName: select.text(2) ?? ""))
            }
            return entries
        }
    }
}
