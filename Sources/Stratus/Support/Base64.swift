import Foundation

/// Standard base64 (RFC 4648 §4), straight between bytes and `Data`, without the `String`
/// that Foundation's coder needs on the way.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// The decoded bytes, or nil when the text is not base64. Padding may be left out.
    package static func decode(_ text: UnsafeBufferPointer<UInt8>) -> Data? {
        var count = text.count
        if count > 0 && text[count - 1] == UInt8(ascii: "=") {
            guard count % 4 == 0 else { return nil }
            count -= 1
            if text[count - 1] == UInt8(ascii: "=") { count -= 1 }
        }
        if count % 4 == 1 { return nil }
        let outputCount = count / 4 * 3 + (count % 4 == 0 ? 0 : count % 4 - 1)
        var data = Data(count: outputCount)
        let ok = values.withUnsafeBufferPointer { table -> Bool in
            data.withUnsafeMutableBytes { raw -> Bool in
                let out = raw.bindMemory(to: UInt8.self)
                var i = 0, o = 0
                while i + 4 <= count {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])], c = table[Int(text[i + 2])], d = table[Int(text[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 { return false }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = b << 4 | c >> 2
                    out[o + 2] = c << 6 | d
                    i += 4
                    o += 3
                }
                let rest = count - i
                if rest >= 2 {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])]
                    let c = rest == 3 ? table[Int(text[i + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 { return false }
                    // Bits that fall off the end must be zero, so each byte string has one text.
                    if rest == 2 && b & 0x0F != 0 { return false }
                    if rest == 3 && c & 0x03 != 0 { return false }
                    out[o] = a << 2 | b >> 4
                    if rest == 3 { out[o + 1] = b << 4 | c >> 2 }
                }
                return true
            }
        }
        return ok ? data : nil
    }

    /// How many bytes the padded base64 text of `count` bytes has.
    package static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Writes the padded base64 text of `data` (``encodedCount(_:)`` bytes) at `out`.
    package static func encode(_ data: Data, to out: UnsafeMutablePointer<UInt8>) {
        let count = data.count
        guard count > 0 else { return }
        alphabet.withUnsafeBufferPointer { letters in
            data.withUnsafeBytes { raw in
                let input = raw.bindMemory(to: UInt8.self)
                var i = 0, o = 0
                while i + 3 <= count {
                    let a = input[i], b = input[i + 1], c = input[i + 2]
                    out[o] = letters[Int(a >> 2)]
                    out[o + 1] = letters[Int((a & 0x03) << 4 | b >> 4)]
                    out[o + 2] = letters[Int((b & 0x0F) << 2 | c >> 6)]
                    out[o + 3] = letters[Int(c & 0x3F)]
                    i += 3
                    o += 4
                }
                if i < count {
                    let a = input[i]
                    let b: UInt8 = i + 1 < count ? input[i + 1] : 0
                    out[o] = letters[Int(a >> 2)]
                    out[o + 1] = letters[Int((a & 0x03) << 4 | b >> 4)]
                    out[o + 2] = i + 1 < count ? letters[Int((b & 0x0F) << 2)] : UInt8(ascii: "=")
                    out[o + 3] = UInt8(ascii: "=")
                }
            }
        }
    }
}
