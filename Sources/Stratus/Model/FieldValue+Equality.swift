import Foundation

// Stored values are equal only when they are the same bytes (see ``QueryRules``): Swift's own
// `String ==` treats canonically equivalent text as equal and `Double ==` treats 0.0 and -0.0
// as equal, so a save from one to the other would look unchanged and be dropped. Dates are
// instants (CloudKit keeps them as whole milliseconds), so -0.0 and 0.0 seconds are one date.
extension FieldValue {
    public static func == (lhs: FieldValue, rhs: FieldValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return sameScalars(a, b)
        case (.int64(let a), .int64(let b)): return a == b
        case (.double(let a), .double(let b)): return a.bitPattern == b.bitPattern
        case (.date(let a), .date(let b)): return sameInstant(a, b)
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.reference(let a), .reference(let b)): return a == b
        case (.location(let a), .location(let b)): return sameLocation(a, b)
        case (.asset(let a), .asset(let b)): return a == b
        case (.stringList(let a), .stringList(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameScalars($0, $1) }
        case (.int64List(let a), .int64List(let b)): return a == b
        case (.doubleList(let a), .doubleList(let b)): return a.map(\.bitPattern) == b.map(\.bitPattern)
        case (.dateList(let a), .dateList(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameInstant($0, $1) }
        case (.bytesList(let a), .bytesList(let b)): return a == b
        case (.referenceList(let a), .referenceList(let b)): return a == b
        case (.locationList(let a), .locationList(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameLocation($0, $1) }
        case (.assetList(let a), .assetList(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let s): hasher.combine(0); hashScalars(s, into: &hasher)
        case .int64(let i): hasher.combine(1); hasher.combine(i)
        case .double(let d): hasher.combine(2); hasher.combine(d.bitPattern)
        case .date(let d): hasher.combine(3); hasher.combine(Self.instantBits(d))
        case .bytes(let b): hasher.combine(4); hasher.combine(b)
        case .reference(let r): hasher.combine(5); hasher.combine(r)
        case .location(let l): hasher.combine(6); for d in Self.components(of: l) { hasher.combine(d.bitPattern) }
        case .asset(let a): hasher.combine(7); hasher.combine(a)
        case .stringList(let v): hasher.combine(8); hasher.combine(v.count); for s in v { hashScalars(s, into: &hasher) }
        case .int64List(let v): hasher.combine(9); hasher.combine(v)
        case .doubleList(let v): hasher.combine(10); hasher.combine(v.map(\.bitPattern))
        case .dateList(let v): hasher.combine(11); hasher.combine(v.map(Self.instantBits))
        case .bytesList(let v): hasher.combine(12); hasher.combine(v)
        case .referenceList(let v): hasher.combine(13); hasher.combine(v)
        case .locationList(let v): hasher.combine(14); for l in v { for d in Self.components(of: l) { hasher.combine(d.bitPattern) } }
        case .assetList(let v): hasher.combine(15); hasher.combine(v)
        }
    }

    /// Whether two strings are the same Unicode scalars (the same UTF-8 bytes).
    static func sameScalars(_ a: String, _ b: String) -> Bool {
        let (x, y) = (a.utf8, b.utf8)
        guard x.count == y.count else { return false }
        if let same = x.withContiguousStorageIfAvailable({ left in
            y.withContiguousStorageIfAvailable { right in left.elementsEqual(right) }
        }), let same { return same }
        return x.elementsEqual(y)
    }

    private func hashScalars(_ s: String, into hasher: inout Hasher) {
        hasher.combine(s.utf8.count)
        if s.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            for byte in s.utf8 { hasher.combine(byte) }
        }
    }

    private static func sameInstant(_ a: Date, _ b: Date) -> Bool {
        a.timeIntervalSinceReferenceDate == b.timeIntervalSinceReferenceDate
    }

    /// A date's seconds as bits, with -0.0 as 0.0 (one instant, one hash).
    private static func instantBits(_ date: Date) -> UInt64 {
        (date.timeIntervalSinceReferenceDate + 0.0).bitPattern
    }

    private static func sameLocation(_ a: Location, _ b: Location) -> Bool {
        components(of: a).map(\.bitPattern) == components(of: b).map(\.bitPattern)
    }

    private static func components(of l: Location) -> [Double] {
        [l.latitude, l.longitude, l.altitude, l.horizontalAccuracy, l.verticalAccuracy, l.course, l.speed, l.timestamp.timeIntervalSinceReferenceDate + 0.0]
    }
}
