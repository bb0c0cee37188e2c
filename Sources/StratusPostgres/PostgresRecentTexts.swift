import Foundation
@_spi(StratusEngine) import Stratus

/// ``Stratus/RecentRowTexts`` read from PostgreSQL's text columns.
typealias PostgresRecentTexts = RecentRowTexts

extension RecentRowTexts {
    /// The record type in text column `column` (`""` for NULL).
    mutating func recordType(_ row: PostgresRow, column: Int) throws -> String {
        try row.withBytes(column) { recordType($0) }
    }

    /// The user record ID named in text column `column` (an empty name for NULL).
    mutating func user(_ row: PostgresRow, column: Int) throws -> Record.ID {
        try row.withBytes(column) { user($0) }
    }
}
