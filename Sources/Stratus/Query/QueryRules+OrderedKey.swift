import Foundation

extension QueryRules {
    /// Calls `body` with bytes that order as ``sortOrder(_:_:)`` orders values, compared as
    /// unsigned bytes with a shorter prefix first (SQLite's BLOB order, `memcmp`), and answers
    /// true; false (and `body` is not called) for a value without an order, which sorts as
    /// missing. Not generic, so that an engine's per-row call needs no type metadata.
    ///
    /// An engine that sorts by a field no schema declares, whose values may be of any family,
    /// orders by this one key instead of a family rank and a value (one expression per row).
    ///
    /// ```swift
    /// QueryRules.withOrderedKey(of: .int64(2)) { key in sqlite3_result_blob(context, key.baseAddress, Int32(key.count), transient) }
    /// ```
    ///
    /// The key is the family's rank (one byte), then:
    /// - numbers: the value rounded to a double (8 bytes, order-preserving), then how far an
    ///   integer lies from that double (8 bytes), so that integers above 2⁵³ and doubles
    ///   compare exactly; `-0.0` is `0.0`;
    /// - timestamps: seconds since 2001 as an order-preserving double;
    /// - strings, and references by record name: the UTF-8 bytes, which order as Unicode
    ///   scalar values do.
    @_spi(StratusEngine)
    @discardableResult
    public static func withOrderedKey(of value: FieldValue, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        switch value {
        case .int64(let integer):
            let rounded = Double(integer)
            // Doubles at and above 2⁶³ hold no Int64, so the distance is taken from 2⁶³ itself.
            let distance = rounded >= 0x1p63 ? (integer &- Int64.max) &- 1 : integer - Int64(rounded)
            numberKey(rounded, distance: distance, body)
        case .double(let double):
            numberKey(double, distance: 0, body)
        case .date(let date):
            withUnsafeTemporaryAllocation(byteCount: 9, alignment: 1) { key in
                key[0] = UInt8(OrderedFamily.timestamp.rawValue)
                storeOrdered(date.timeIntervalSinceReferenceDate, into: key, at: 1)
                body(UnsafeRawBufferPointer(key))
            }
        case .string(let text):
            textKey(text, family: .string, body)
        case .reference(let reference):
            textKey(reference.recordID.recordName, family: .reference, body)
        default:
            return false
        }
        return true
    }

    /// ``withOrderedKey(of:_:)`` as an array (`nil` for a value without an order): a
    /// position's key to bind as a parameter.
    ///
    /// ```swift
    /// let low = QueryRules.orderedKey(of: .int64(2))!, high = QueryRules.orderedKey(of: .double(2.5))!
    /// low.lexicographicallyPrecedes(high)   // true: 2 < 2.5
    /// ```
    @_spi(StratusEngine)
    public static func orderedKey(of value: FieldValue) -> [UInt8]? {
        var key: [UInt8]?
        withOrderedKey(of: value) { key = Array($0) }
        return key
    }

    private static func numberKey(_ double: Double, distance: Int64, _ body: (UnsafeRawBufferPointer) -> Void) {
        withUnsafeTemporaryAllocation(byteCount: 17, alignment: 1) { key in
            key[0] = UInt8(OrderedFamily.number.rawValue)
            storeOrdered(double, into: key, at: 1)
            key.storeBytes(of: (UInt64(bitPattern: distance) ^ (1 << 63)).bigEndian, toByteOffset: 9, as: UInt64.self)
            body(UnsafeRawBufferPointer(key))
        }
    }

    private static func textKey(_ text: String, family: OrderedFamily, _ body: (UnsafeRawBufferPointer) -> Void) {
        var text = text
        text.withUTF8 { utf8 in
            withUnsafeTemporaryAllocation(byteCount: utf8.count + 1, alignment: 1) { key in
                key[0] = UInt8(family.rawValue)
                if let base = utf8.baseAddress { UnsafeMutableRawBufferPointer(rebasing: key[1...]).copyMemory(from: UnsafeRawBufferPointer(start: base, count: utf8.count)) }
                body(UnsafeRawBufferPointer(key))
            }
        }
    }

    /// A double's bits made to order as unsigned big-endian bytes: positive values with the
    /// sign bit set, negative ones with every bit flipped. Zero has one key, and NaN sorts
    /// above every number, as ``compare(_:_:)`` has it against an integer.
    private static func storeOrdered(_ double: Double, into key: UnsafeMutableRawBufferPointer, at offset: Int) {
        let canonical = double.isNaN ? Double.nan : (double == 0 ? 0 : double)
        let bits = canonical.bitPattern
        let ordered = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        key.storeBytes(of: ordered.bigEndian, toByteOffset: offset, as: UInt64.self)
    }
}
