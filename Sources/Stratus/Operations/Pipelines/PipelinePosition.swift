import Foundation

/// Where a pipeline's source is: what a resumed pipeline starts after.
///
/// A query's position is its cursor (`stc2_…`), a change feed's its change token (`stk1_…`),
/// and a source of items (record IDs, a file) the number of items it consumed. Positions are
/// immutable and serialize to short text, so that a job can keep one in a file or in the store.
///
/// ```swift
/// if case .query(let cursor)? = error.pipelinePosition { print("resume after", cursor.serialized) }
/// let position = try PipelinePosition(serialized: savedText)
/// ```
public enum PipelinePosition: Sendable, Hashable, CustomStringConvertible {
    /// A query's place: every record up to the cursor's is done.
    case query(QueryOperation.Cursor)
    /// A zone's change history: every change up to the token is done.
    case changes(ServerChangeToken)
    /// A list or a file: this many items from its start are done.
    case items(Int)

    static let itemsPrefix = "sti1_"

    /// The position as URL- and shell-safe text, for ``init(serialized:)``.
    public var serialized: String {
        switch self {
        case .query(let cursor): cursor.serialized
        case .changes(let token): token.serialized
        case .items(let count): Self.itemsPrefix + String(count)
        }
    }

    /// Reads a position from ``serialized`` text.
    ///
    /// ```swift
    /// let position = try PipelinePosition(serialized: "sti1_4000")   // .items(4000)
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the text is no position.
    public init(serialized text: String) throws {
        if text.hasPrefix(Self.itemsPrefix) {
            guard let count = Int(text.dropFirst(Self.itemsPrefix.count)), count >= 0 else {
                throw StratusError(.invalidArguments, "'\(text.prefix(24))' is not a pipeline position (a count of items after \(Self.itemsPrefix))")
            }
            self = .items(count)
        } else if text.hasPrefix(ServerChangeToken.prefix) {
            self = .changes(try ServerChangeToken(serialized: text))
        } else {
            self = .query(try QueryOperation.Cursor(serialized: text))
        }
    }

    public var description: String {
        switch self {
        case .query(let cursor): "query \(cursor.description)"
        case .changes: "change token"
        case .items(let count): "\(count) item(s)"
        }
    }
}
