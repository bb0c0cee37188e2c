import Foundation
import Synchronization

/// A record type's schema as every engine stores it: one JSON text per type, keys sorted so
/// that equal schemas are equal texts.
///
/// Every query page and write transaction reads its type's schema, so a text decoded once is
/// kept (by the text itself, which changes whenever the schema does) and handed out again:
/// comparing a text costs less than decoding it.
///
/// ```swift
/// let text = try StoredRecordTypeSchema.text(of: schema)
/// let same = try StoredRecordTypeSchema.schema(from: text)
/// ```
@_spi(StratusEngine)
public enum StoredRecordTypeSchema {
    /// The stored text of `schema`.
    public static func text(of schema: RecordTypeSchema) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(schema), as: UTF8.self)
    }

    /// The schema a stored text describes.
    ///
    /// - Throws: `badDatabase` when the text does not decode (a damaged or foreign store).
    public static func schema(from text: String) throws -> RecordTypeSchema {
        if let known = decoded.withLock({ $0[text] }) { return known }
        let schema: RecordTypeSchema
        do {
            schema = try JSONDecoder().decode(RecordTypeSchema.self, from: Data(text.utf8))
        } catch {
            throw StratusError(.badDatabase, "a stored record type schema does not decode: \(error)")
        }
        decoded.withLock { known in
            // Bounded: a process that sees many schemas (a long-lived server with many
            // containers, schemas changed often) starts over rather than growing.
            if known.count >= 256 { known.removeAll() }
            known[text] = schema
        }
        return schema
    }

    private static let decoded = Mutex<[String: RecordTypeSchema]>([:])
}
