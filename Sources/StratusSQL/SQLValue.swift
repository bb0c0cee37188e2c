import Foundation

/// A value bound to a statement parameter, in the types SQL engines share.
package enum SQLValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// A piece of SQL and the values its `?` placeholders take, in order.
///
/// ```swift
/// let condition = SQLFragment(sql: "r.record_name = ?", parameters: [.text("todo-1")])
/// ```
package struct SQLFragment: Hashable, Sendable {
    package var sql: String
    package var parameters: [SQLValue]

    package init(sql: String, parameters: [SQLValue] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}
