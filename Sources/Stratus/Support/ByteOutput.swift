import Foundation

/// JSON (and CSV) text appended as UTF-8 bytes: no intermediate `String`s on the hot path.
/// Stored field documents (``FieldDocument``) and the transfer codecs write through it.
///
/// The bytes live in one buffer this value owns (hence not copyable): a record is some thirty
/// short appends, and an array's uniqueness and capacity checks and copy calls cost more than
/// the bytes themselves.
///
/// ```swift
/// var out = ByteOutput()
/// out.appendString("Milk")        // "Milk", quoted and escaped
/// let text = String(decoding: out.bytes, as: UTF8.self)
/// ```
@usableFromInline package struct ByteOutput: ~Copyable {
    // The small appends are inlinable: the transfer codecs call them across the module
    // boundary some thirty times a record. Without `@usableFromInline` on the type itself they
    // would still be calls there (Swift does not inline a package type's members otherwise).
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    /// How many bytes were appended.
    @usableFromInline package internal(set) var count = 0
    /// The first value that JSON cannot hold faithfully (a non-finite number, an asset without
    /// a file); it is written as `null` or `""` and reported here so strict callers can refuse.
    @usableFromInline package var problem: String?
    /// Whether doubles of magnitude 2^53 and above (every one a whole number) are written as
    /// their exact digits (`1152921504606846976.0`) rather than the shortest text that reads
    /// back as them (`1.152921504606847e+18`): a reader that keeps decimal numbers exactly
    /// (PostgreSQL's `jsonb`) then holds the double's own value.
    @usableFromInline package var writesExactWholeDoubles = false

    @usableFromInline package init(capacity: Int = 256) {
        self.capacity = Swift.max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes appended so far, valid until the next change.
    @inlinable package var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

    /// Forgets every byte from `mark` on, keeping the buffer.
    @usableFromInline package mutating func removeAll(from mark: Int = 0) {
        precondition(mark >= 0 && mark <= count, "mark outside the output")
        count = mark
    }

    /// Puts `pieces` (ranges of the bytes after `start`, which are all pieces) into the order
    /// given, with `separator` between them.
    @usableFromInline package mutating func arrange(_ pieces: UnsafeBufferPointer<Range<Int>>, after start: Int, separator: UInt8) {
        let end = count
        reserve(end - start + pieces.count)
        var to = end
        for (i, piece) in pieces.enumerated() {
            if i > 0 {
                base[to] = separator
                to += 1
            }
            (base + to).update(from: base + piece.lowerBound, count: piece.count)
            to += piece.count
        }
        // The arranged copy lies after the pieces; move it back over them.
        memmove(base + start, base + end, to - end)
        count = start + to - end
    }

    /// Makes room for `extra` more bytes.
    @inlinable @inline(__always)
    package mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(count + extra) }
    }

    @usableFromInline @inline(never)
    mutating func grow(_ needed: Int) {
        let newCapacity = Swift.max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Appends one member per entry of `fields` in key order, `separator` between them: the
    /// order that makes equal field sets write identical bytes. The dictionary's indexes are
    /// sorted in a temporary buffer, so no array of keys is built for the few keys a record
    /// usually has.
    ///
    /// ```swift
    /// out.appendInKeyOrder(fields, separator: UInt8(ascii: ",")) { key, value, out in out.appendString(key) }
    /// ```
    @usableFromInline package mutating func appendInKeyOrder<Value>(_ fields: [String: Value], separator: UInt8, _ member: (String, Value, inout ByteOutput) -> Void) {
        let count = fields.count
        guard count > 0 else { return }
        guard count <= 32 else {
            // Insertion sort is quadratic; many keys are sorted the ordinary way.
            for (place, key) in fields.keys.sorted().enumerated() {
                if place > 0 { append(separator) }
                member(key, fields[key]!, &self)
            }
            return
        }
        withUnsafeTemporaryAllocation(of: Dictionary<String, Value>.Index.self, capacity: count) { order in
            var index = fields.startIndex
            for place in 0..<count {
                (order.baseAddress! + place).initialize(to: index)
                fields.formIndex(after: &index)
            }
            for place in 1..<count {
                let moving = order[place]
                let key = fields[moving].key
                var to = place
                while to > 0 && key < fields[order[to - 1]].key {
                    order[to] = order[to - 1]
                    to -= 1
                }
                order[to] = moving
            }
            for place in 0..<count {
                if place > 0 { append(separator) }
                let (key, value) = fields[order[place]]
                member(key, value, &self)
            }
            _ = order.deinitialize()
        }
    }

    /// Appends a JSON array, each element written by `element`.
    ///
    /// ```swift
    /// out.appendArray(tags) { tag, out in out.appendString(tag) }   // ["a","b"]
    /// ```
    @inlinable package mutating func appendArray<T>(_ values: [T], _ element: (T, inout ByteOutput) -> Void) {
        append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { append(UInt8(ascii: ",")) }
            element(v, &self)
        }
        append(UInt8(ascii: "]"))
    }

    @inlinable @inline(__always)
    package mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inlinable @inline(__always)
    package mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inlinable @inline(__always)
    package mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    @usableFromInline package mutating func appendRaw(_ text: String) {
        // A borrowed string's bytes, without the copy that `withUTF8` needs.
        if text.utf8.withContiguousStorageIfAvailable({ append($0) }) != nil { return }
        var text = text
        text.withUTF8 { append($0) }
    }

    /// Appends a JSON string literal, escaping quotes, backslashes and control characters: the
    /// one JSON string escaper (``JSONText`` has its rules, ``JSONCursor`` reads them back).
    @usableFromInline package mutating func appendString(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ appendString(utf8: $0) }) != nil { return }
        var text = text
        text.withUTF8 { appendString(utf8: $0) }
    }

    /// ``appendString(_:)`` of a string's UTF-8 bytes, which must be valid UTF-8.
    @usableFromInline package mutating func appendString(utf8: UnsafeBufferPointer<UInt8>) {
        reserve(utf8.count + 2)
        base[count] = UInt8(ascii: "\"")
        count += 1
        var run = 0
        for i in Self.plainPrefixLength(utf8)..<utf8.count {
            let b = utf8[i]
            guard b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 else { continue }
            if run < i { append(UnsafeBufferPointer(rebasing: utf8[run..<i])) }
            run = i + 1
            switch b {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            default:
                append("\\u00")
                append(Self.hexDigits[Int(b >> 4)])
                append(Self.hexDigits[Int(b & 0xF)])
            }
        }
        if run < utf8.count { append(UnsafeBufferPointer(rebasing: utf8[run...])) }
        append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// How many leading bytes need no escape: whole 8-byte words are tested at once
    /// (``JSONText/escapeMask(_:)``), up to the first byte that needs one.
    @inline(__always)
    private static func plainPrefixLength(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        guard let start = utf8.baseAddress else { return 0 }
        var i = 0
        while i + 8 <= utf8.count {
            let special = JSONText.escapeMask(UnsafeRawPointer(start + i).loadUnaligned(as: UInt64.self))
            if special != 0 { return i + special.trailingZeroBitCount >> 3 }
            i += 8
        }
        return i
    }

    @usableFromInline package mutating func appendInt(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        appendUnsigned(value.magnitude)
    }

    /// Appends the decimal digits of `value`, with leading zeros up to `width` digits.
    @usableFromInline package mutating func appendUnsigned(_ value: UInt64, width: Int = 1) {
        // The digits are counted by comparison and written two at a time: a record's
        // timestamps are three numbers of 13 digits, and dividing by 10 twice per digit was
        // a tenth of the JSON writer's own time.
        var digits = 1
        var power: UInt64 = 10
        while value >= power && digits < 20 {
            digits += 1
            if digits < 20 { power &*= 10 }
        }
        let total = Swift.max(digits, width)
        reserve(total)
        let pairs: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        var magnitude = value
        var i = count + total
        while magnitude >= 100 {
            let pair = Int(magnitude % 100) &* 2
            magnitude /= 100
            i -= 2
            base[i] = pairs.utf8Start[pair]
            base[i + 1] = pairs.utf8Start[pair + 1]
        }
        if magnitude >= 10 {
            let pair = Int(magnitude) &* 2
            i -= 2
            base[i] = pairs.utf8Start[pair]
            base[i + 1] = pairs.utf8Start[pair + 1]
        } else {
            i -= 1
            base[i] = UInt8(ascii: "0") &+ UInt8(magnitude)
        }
        while i > count {
            i -= 1
            base[i] = UInt8(ascii: "0")
        }
        count += total
    }

    /// Appends the shortest text that reads back as the same `Double` (`2.0`, `1e-05`).
    @usableFromInline package mutating func appendDouble(_ value: Double, field: String) {
        guard value.isFinite else {
            if problem == nil { problem = "field '\(field)' holds a non-finite number, which JSON cannot hold" }
            append("null")
            return
        }
        appendFiniteDouble(value)
    }

    /// Appends the shortest text of a finite `Double`, as Swift prints it.
    @usableFromInline package mutating func appendFiniteDouble(_ value: Double) {
        // Whole numbers below 2^53 print as their digits and ".0" (dates on whole seconds,
        // counts kept as doubles); writing them so skips the shortest-digits search.
        if value.magnitude < 0x1p53, value == value.rounded(.towardZero), !(value == 0 && value.sign == .minus) {
            appendInt(Int64(value))
            append(".0")
            return
        }
        if writesExactWholeDoubles && value.magnitude >= 0x1p53 {
            appendRaw(Self.exactDigits(ofWhole: value))
            append(".0")
            return
        }
        appendRaw(value.description)
    }

    /// The exact decimal digits of a finite whole double (sign included).
    ///
    /// ```swift
    /// ByteOutput.exactDigits(ofWhole: 0x1p60)   // "1152921504606846976"
    /// ```
    package static func exactDigits(ofWhole value: Double) -> String {
        precondition(value.isFinite && value == value.rounded(.towardZero), "a finite whole number")
        let sign = value.sign == .minus && value != 0 ? "-" : ""
        if value.magnitude < 0x1p63 { return sign + String(UInt64(value.magnitude)) }
        // significand × 2^shift, in base 10^9 limbs (least significant first).
        var limbs: [UInt64] = []
        var significand = UInt64(1) << 52 | value.significandBitPattern
        while significand > 0 { limbs.append(significand % 1_000_000_000); significand /= 1_000_000_000 }
        var shift = Int(value.exponent) - 52
        while shift > 0 {
            let step = Swift.min(shift, 32)
            var carry: UInt64 = 0
            for i in limbs.indices {
                let product = limbs[i] << UInt64(step) + carry
                limbs[i] = product % 1_000_000_000
                carry = product / 1_000_000_000
            }
            while carry > 0 { limbs.append(carry % 1_000_000_000); carry /= 1_000_000_000 }
            shift -= step
        }
        var text = String(limbs.last!)
        for limb in limbs.dropLast().reversed() {
            let digits = String(limb)
            text += String(repeating: "0", count: 9 - digits.count) + digits
        }
        return sign + text
    }

    /// Appends `data` in base64, in quotes unless `quoted` is false.
    @usableFromInline package mutating func appendBase64(_ data: Data, quoted: Bool = true) {
        if quoted { append(UInt8(ascii: "\"")) }
        let length = Base64.encodedCount(data.count)
        reserve(length)
        Base64.encode(data, to: base + count)
        count += length
        if quoted { append(UInt8(ascii: "\"")) }
    }

    /// The sorted field keys of the last record written here (see ``RecordJSONWriter``).
    @usableFromInline package var fieldOrder: [String] = []

    /// The last timestamp written with a fraction, and its text (see `appendTimestamp` in the
    /// transfer codecs). A record's creation and modification dates are mostly one `Date`, and
    /// the records of one save share it, so this one entry saves most of the decimal work on
    /// such dates.
    @usableFromInline package var lastFraction: (seconds: UInt64, text: [UInt8]) = (Double.nan.bitPattern, [])
}
