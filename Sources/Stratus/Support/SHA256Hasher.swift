/// SHA-256 (FIPS 180-4) over a stream of bytes: asset content is hashed as it is copied, a
/// chunk at a time, never held whole. Stratus needs no cryptography package for it.
///
/// ```swift
/// var hasher = SHA256Hasher()
/// hasher.update(UnsafeRawBufferPointer(chunk))
/// let hex = hasher.finalize().hexadecimal     // "ba7816bf8f01cfea…" for "abc"
/// ```
package struct SHA256Hasher: Sendable {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)
    /// Bytes of an unfinished block.
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    package init() {}

    /// The 32-byte digest of `message`.
    ///
    /// ```swift
    /// let digest = SHA256Hasher.digest(Array("abc".utf8))
    /// ```
    package static func digest(_ message: [UInt8]) -> Digest {
        var hasher = SHA256Hasher()
        message.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// Hashes more bytes.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var start = bytes.baseAddress, bytes.count > 0 else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if !pending.isEmpty {
            let take = min(64 - pending.count, remaining)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: start, count: take))
            start += take
            remaining -= take
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { compress(blocks: $0.baseAddress!, count: 1) }
            pending.removeAll(keepingCapacity: true)
        }
        let blocks = remaining / 64
        if blocks > 0 {
            compress(blocks: start, count: blocks)
            start += blocks * 64
            remaining -= blocks * 64
        }
        if remaining > 0 { pending.append(contentsOf: UnsafeRawBufferPointer(start: start, count: remaining)) }
    }

    /// The digest of everything hashed. The hasher is spent afterwards.
    package mutating func finalize() -> Digest {
        let bitLength = length &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        tail.withUnsafeBytes { compress(blocks: $0.baseAddress!, count: $0.count / 64) }
        pending = []
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for word in [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7] {
            bytes.append(UInt8(truncatingIfNeeded: word >> 24))
            bytes.append(UInt8(truncatingIfNeeded: word >> 16))
            bytes.append(UInt8(truncatingIfNeeded: word >> 8))
            bytes.append(UInt8(truncatingIfNeeded: word))
        }
        return Digest(bytes: bytes)
    }

    /// A SHA-256 digest.
    package struct Digest: Hashable, Sendable {
        /// The 32 bytes.
        package let bytes: [UInt8]

        /// The digest in lowercase hexadecimal: 64 characters.
        package var hexadecimal: String {
            let digits = Array("0123456789abcdef".utf8)
            var text: [UInt8] = []
            text.reserveCapacity(64)
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0xF)])
            }
            return String(decoding: text, as: UTF8.self)
        }

        /// Whether `text` has the form of ``hexadecimal``: 64 lowercase hexadecimal digits.
        package static func isHexadecimal(_ text: String) -> Bool {
            text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        }
    }

    // MARK: - Compression

    @inline(__always) private static func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    /// Runs the compression function over `count` consecutive 64-byte blocks.
    private mutating func compress(blocks: UnsafeRawPointer, count: Int) {
        var (h0, h1, h2, h3, h4, h5, h6, h7) = state
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            let w = w.baseAddress!
            for block in 0..<count {
                let p = blocks + block * 64
                for i in 0..<16 { w[i] = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
                for i in 16..<64 {
                    let a = w[i - 15], b = w[i - 2]
                    let s0 = Self.rotate(a, 7) ^ Self.rotate(a, 18) ^ (a >> 3)
                    let s1 = Self.rotate(b, 17) ^ Self.rotate(b, 19) ^ (b >> 10)
                    w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
                }
                var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                Self.roundConstants.withUnsafeBufferPointer { k in
                    for i in 0..<64 {
                        let s1 = Self.rotate(e, 6) ^ Self.rotate(e, 11) ^ Self.rotate(e, 25)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                        let s0 = Self.rotate(a, 2) ^ Self.rotate(a, 13) ^ Self.rotate(a, 22)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = s0 &+ majority
                        h = g; g = f; f = e; e = d &+ t1
                        d = c; c = b; b = a; a = t1 &+ t2
                    }
                }
                h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d; h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
            }
        }
        state = (h0, h1, h2, h3, h4, h5, h6, h7)
    }

    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]
}
