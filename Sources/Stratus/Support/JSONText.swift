/// Writes JSON text pieces; shared by the stored field document and the transfer codecs.
///
/// ```swift
/// var out = ""
/// JSONText.appendString("say \"hi\"", to: &out)   // "say \"hi\""
/// JSONText.appendDouble(2, to: &out)               // 2.0
/// ```
public enum JSONText {
    /// Appends `s` as a JSON string literal, escaping quotes, backslashes and control characters.
    public static func appendString(_ s: String, to out: inout String) {
        out += "\""
        let utf8 = s.utf8
        var plainStart = utf8.startIndex
        var index = plainStart
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                out += String(s[plainStart..<index])
                switch byte {
                case UInt8(ascii: "\""): out += "\\\""
                case UInt8(ascii: "\\"): out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                default:
                    let hex = String(byte, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
                plainStart = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        out += String(s[plainStart..<utf8.endIndex])
        out += "\""
    }

    /// Appends the shortest text that parses back to the same Double (`2.0`, `1e-05`).
    ///
    /// - Precondition: `d` is finite; JSON has no NaN or infinity (a programmer error).
    public static func appendDouble(_ d: Double, to out: inout String) {
        precondition(d.isFinite, "JSON cannot hold a non-finite number; validate values first")
        out += "\(d)"
    }

    /// Appends a JSON array, writing each element with `element`.
    public static func appendArray<T>(_ values: [T], to out: inout String, _ element: (T, inout String) -> Void) {
        out += "["
        for (i, v) in values.enumerated() {
            if i > 0 { out += "," }
            element(v, &out)
        }
        out += "]"
    }
}
