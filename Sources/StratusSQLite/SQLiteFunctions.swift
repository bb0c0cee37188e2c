import CSQLite
import Foundation
@_spi(StratusEngine) import Stratus

/// SQL functions Stratus registers on each connection. They serve queries and writes only and
/// never appear in the schema, so the `sqlite3` shell can still open, check and change a store.
enum SQLiteFunctions {
    static func register(on handle: OpaquePointer?) {
        sqlite3_create_function_v2(handle, "stratus_has_tokens", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, hasTokens, nil, nil, nil)
        sqlite3_create_function_v2(handle, orderKeyFunction, 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, orderKey, nil, nil, nil)
        sqlite3_create_function_v2(handle, equalityKeyFunction, 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, equalityKey, nil, nil, nil)
        sqlite3_create_function_v2(handle, "stratus_merge_fields", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil, mergeFields, nil, nil, nil)
    }

    /// `stratus_merge_fields(fields, changes, maximum)`: the stored document with the changed
    /// fields written over it (``FieldDocument/merging(_:into:)``); NULL for a document of more
    /// than `maximum` bytes or that holds more than fields (which an `UPDATE OR IGNORE` of the
    /// NOT NULL column then skips). A document that is not one fails the statement, as reading
    /// it would.
    private static let mergeFields: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, values in
        guard let values, let stored = textArgument(values[0]), let changes = textArgument(values[1]) else {
            sqlite3_result_error(context, "stratus_merge_fields takes a stored document and changes", -1)
            return
        }
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

    /// `stratus_order_key(fields, 'name')`: the field's ``Stratus/QueryRules/withOrderedKey(of:_:)``
    /// as a BLOB, NULL when it is missing or has no order. One call reads the document once,
    /// where a family rank and a guarded value took three `json_extract` calls per row.
    static let orderKeyFunction = "stratus_order_key"

    /// `stratus_equality_key(fields, 'name')`: what string equality compares for the field,
    /// as ``SQLiteDialect/equalityValue(_:)`` computes it (the folded copy, else the string with
    /// A–Z lowercased), NULL when the field holds no string: the comparison is then its own type
    /// guard. For scans only; indexes keep the `json_extract` expression the shell can read.
    static let equalityKeyFunction = "stratus_equality_key"

    private static let orderKey: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, values in
        guard let values, let document = textArgument(values[0]), let name = textArgument(values[1]) else {
            sqlite3_result_null(context)
            return
        }
        do {
            guard let value = try FieldDocument.orderedValue(ofField: name, inStoredDocument: document).map(SQLiteDialect.upToNUL) else {
                sqlite3_result_null(context)
                return
            }
            QueryRules.withOrderedKey(of: value) { key in
                sqlite3_result_blob(context, key.baseAddress, Int32(key.count), stratus_sqlite_transient())
            }
        } catch {
            sqlite3_result_error(context, "\(error)", -1)
        }
    }

    private static let equalityKey: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, values in
        guard let values, let document = textArgument(values[0]), let name = textArgument(values[1]) else {
            sqlite3_result_null(context)
            return
        }
        do {
            let isString = try FieldDocument.withEqualityText(ofField: name, inStoredDocument: document) { whole, isFolded in
                let text = SQLiteDialect.upToNUL(whole)
                guard let base = text.baseAddress, !text.isEmpty else {
                    // A null pointer would answer NULL, not the empty string.
                    sqlite3_result_text(context, "", 0, stratus_sqlite_transient())
                    return
                }
                if isFolded || !text.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
                    sqlite3_result_text(context, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(text.count), stratus_sqlite_transient())
                    return
                }
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: text.count) { lowered in
                    for (index, byte) in text.enumerated() {
                        lowered[index] = CChar(bitPattern: QueryRules.asciiLowercased(byte))
                    }
                    sqlite3_result_text(context, lowered.baseAddress, Int32(text.count), stratus_sqlite_transient())
                }
            }
            if !isString { sqlite3_result_null(context) }
        } catch {
            sqlite3_result_error(context, "\(error)", -1)
        }
    }

    /// A TEXT argument's UTF-8 bytes (valid until the function returns); nil for NULL.
    private static func textArgument(_ value: OpaquePointer?) -> UnsafeBufferPointer<UInt8>? {
        guard let text = sqlite3_value_text(value) else { return nil }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value)))
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
