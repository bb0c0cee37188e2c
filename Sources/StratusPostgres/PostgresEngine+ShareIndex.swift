import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresWriteTransaction {
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, members: [String]) throws {
        try removeShareFromIndex(shareRecordName, zoneName: zoneName)
        let share: [PostgresValue] = [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName), .text(shareRecordName)]
        _ = try connection.execute("INSERT INTO share_index(container, owner, zone_name, share_name, token) VALUES ($1, $2, $3, $4, $5)", share + [.text(token)])
        for member in Set(members) {
            _ = try connection.execute("INSERT INTO share_members(container, owner, zone_name, share_name, member) VALUES ($1, $2, $3, $4, $5)", share + [.text(member)])
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
    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? {
        try readTransaction(mayLag: false) { connection in
            guard let row = try connection.query("SELECT owner, zone_name, share_name FROM share_index WHERE container = $1 AND token = $2",
                                                 [.text(storageContainer), .text(token)]).first else { return nil }
            return ShareIndexEntry(owner: try row.text(0) ?? "", zoneName: try row.text(1) ?? "", shareRecordName: try row.text(2) ?? "")
        }
    }

    @_spi(StratusEngine) public func indexedShares(member: String, storageContainer: String) throws -> [ShareIndexEntry] {
        try readTransaction(mayLag: false) { connection in
            try connection.query("SELECT owner, zone_name, share_name FROM share_members WHERE container = $1 AND member = $2",
                                 [.text(storageContainer), .text(member)]).map { row in
                ShareIndexEntry(owner: try row.text(0) ?? "", zoneName: try row.text(1) ?? "", shareRecordName: try row.text(2) ?? "")
            }
        }
    }
}
