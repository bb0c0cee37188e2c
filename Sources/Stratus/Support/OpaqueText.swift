import Foundation

/// The text form of Stratus's opaque values (query cursors, change tokens): a prefix that
/// names the kind, then the value's JSON in URL- and shell-safe base64.
///
/// ```swift
/// let text = OpaqueText.encode(cursor, prefix: "stc1_")
/// let back: QueryOperation.Cursor? = OpaqueText.decode(text, prefix: "stc1_")
/// ```
enum OpaqueText {
    static func encode<Value: Encodable>(_ value: Value, prefix: String) -> String {
        // Plain value types, and non-finite numbers written as text: encoding cannot fail.
        let data = try! JSONEncoder.stratusValues().encode(value)
        return prefix + data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The value, or `nil` when the text after `prefix` does not decode.
    static func decode<Value: Decodable>(_ text: String, prefix: String) -> Value? {
        guard text.hasPrefix(prefix) else { return nil }
        var base64 = String(text.dropFirst(prefix.count))
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return try? JSONDecoder.stratusValues().decode(Value.self, from: data)
    }
}
