import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteWriteTransaction {
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, members: [String]) throws {
        try removeShareFromIndex(shareRecordName, zoneName: zoneName)
        let share: [SQLValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        let insert = try connection.statement("INSERT INTO share_index(container, owner, zone_name, share_name, token) VALUES (?, ?, ?, ?, ?)")
        try insert.bind(share + [.text(token)])
        try insert.step()
        insert.reset()
        let member = try connection.statement("INSERT OR IGNORE INTO share_members(container, owner, zone_name, share_name, member) VALUES (?, ?, ?, ?, ?)")
        for name in members {
            member.reset()
            try member.bind(share + [.text(name)])
            try member.step()
        }
        member.reset()
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
    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? {
        try readTransaction { connection in
            let select = try connection.statement("SELECT owner, zone_name, share_name FROM share_index WHERE container = ? AND token = ?")
            try select.bind([.text(storageContainer), .text(token)])
            defer { select.reset() }
            guard try select.step() else { return nil }
            return ShareIndexEntry(owner: select.text(0) ?? "", zoneName: select.text(1) ?? "", shareRecordName: select.text(2) ?? "")
        }
    }

    @_spi(StratusEngine) public func indexedShares(member: String, storageContainer: String) throws -> [ShareIndexEntry] {
        try readTransaction { connection in
            let select = try connection.statement("SELECT owner, zone_name, share_name FROM share_members WHERE container = ? AND member = ?")
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
