import CSQLite
import Foundation
@_spi(StratusEngine) import Stratus

/// SQL functions Stratus registers on each connection. They serve queries and writes only and
/// never appear in the schema, so the `sqlite3` shell can still open, check and change a store.
enum SQLiteFunctions {
    static func register(on handle: OpaquePointer?) {
        sqlite3_create_function_v2(handle, "stratus_has_tokens", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, hasTokens, nil, nil, nil)
        sqlite3_create_function_v2(handle, "stratus_merge_fields", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, mergeFields, nil, nil, nil)
    }

    /// `stratus_merge_fields(fields, changes, maximum)`: the stored document with the changed
    /// fields written over it (``FieldDocument/merging(_:into:)``); NULL for a document of more
    /// than `maximum` bytes or that holds more than fields (which an `UPDATE OR IGNORE` of the
    /// NOT NULL column then skips). A document that is not one fails the statement, as reading
    /// it would.
    private static let mergeFields: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, values in
        guard let values, let storedText = sqlite3_value_text(values[0]), let changesText = sqlite3_value_text(values[1]) else {
            sqlite3_result_error(context, "stratus_merge_fields takes a stored document and changes", -1)
            return
        }
        let stored = UnsafeBufferPointer(start: storedText, count: Int(sqlite3_value_bytes(values[0])))
        let changes = UnsafeBufferPointer(start: changesText, count: Int(sqlite3_value_bytes(values[1])))
        guard stored.count <= sqlite3_value_int64(values[2]) else {
            sqlite3_result_null(context)
            return
        }
        var out = ByteOutput(capacity: stored.count + changes.count)
        do throws(StratusError) {
            guard try FieldDocument.merging(changes, into: stored, out: &out) else {
                sqlite3_result_null(context)
                return
            }
        } catch {
            sqlite3_result_error(context, error.message, -1)
            return
        }
        let merged = out.bytes
        sqlite3_result_text(context, UnsafeRawPointer(merged.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(merged.count), stratus_sqlite_transient())
    }

    /// `stratus_has_tokens(fields, 'word word', all)`: whether the words of the record's string
    /// fields include any (or, with `all` = 1, every) of the space-separated search words.
    /// Used by `self CONTAINS` when the record type declares no searchable field.
    private static let hasTokens: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, values in
        guard let values, let fieldsText = sqlite3_value_text(values[0]), let wantedText = sqlite3_value_text(values[1]) else {
            sqlite3_result_int(context, 0)
            return
        }
        let wanted = String(cString: wantedText).split(separator: " ").map(String.init)
        let requireAll = sqlite3_value_int(values[2]) != 0
        guard !wanted.isEmpty, let fields = try? FieldDocument.decode(String(cString: fieldsText), zoneID: .default, assetURL: { _ in nil }) else {
            sqlite3_result_int(context, 0)
            return
        }
        let words = TextSearch.words(of: fields)
        let matched = requireAll ? wanted.allSatisfy(words.contains) : wanted.contains(where: words.contains)
        sqlite3_result_int(context, matched ? 1 : 0)
    }
}
