/// A hash that is the same in every process and on every run (Swift's `Hasher` is seeded per
/// process), for names and fingerprints that are stored or compared across processes.
///
/// ```swift
/// let name = "ix_" + StableHash.hex(of: Array(definition.utf8))
/// ```
public enum StableHash {
    /// FNV-1a (64-bit) of `bytes`, in hexadecimal.
    public static func hex<Bytes: Sequence>(of bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
