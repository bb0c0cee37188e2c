import Foundation

extension QueryPredicate: CustomStringConvertible {
    /// The predicate as a canonical format string, which ``QueryPredicate/init(format:_:)`` parses
    /// back to an equal predicate.
    ///
    /// ```swift
    /// let p = try QueryPredicate(format: "age BETWEEN {20, 30} AND name BEGINSWITH %@", "Jim")
    /// print(p)                                  // age BETWEEN {20, 30} AND name BEGINSWITH "Jim"
    /// let back = try QueryPredicate(format: p.description)
    /// assert(back == p)
    /// ```
    ///
    /// Strings print double-quoted with `\\ \" \n \t \r \uXXXX` escapes, integers as integers,
    /// doubles always with a `.` or an exponent (`2.0`, `1e+20`) so they parse back as doubles,
    /// dates as `CAST(seconds since 2001-01-01, "NSDate")` at full precision, and field names that
    /// are reserved words with a leading `#` (`#now`). Values `NSPredicate` has no literal for use
    /// these Stratus extensions, which only Stratus parses:
    ///
    /// - `REFERENCE("recordName")`, `REFERENCE("recordName", "zoneName")`,
    ///   `REFERENCE("recordName", "zoneName", "ownerName")`: a reference (its delete action is not
    ///   part of a query and is always `.none`); omitted parts are the default zone and owner.
    /// - `LOCATION(latitude, longitude)` for a point with ``Location``'s default properties, or
    ///   `LOCATION(latitude, longitude, altitude, horizontalAccuracy, verticalAccuracy, course, speed,
    ///   timestamp)` with the timestamp in seconds since 2001-01-01.
    /// - `BYTES("base64")`: bytes.
    /// - `CAST("inf", "NSNumber")`, `CAST("-inf", "NSNumber")`, `CAST("nan", "NSNumber")`: doubles
    ///   with no literal (`NSPredicate` also reads these).
    ///
    /// A predicate round-trips when it comes from the parser or the builder. Hand-built values
    /// that neither produces can print to something that parses differently or not at all: an
    /// empty `.and([])` prints `TRUEPREDICATE`, nested `.and`s flatten, a reference with action
    /// `.deleteSelf` comes back with `.none`, a one-word `.tokens` with `allTokens: true` comes
    /// back with `false` (the same search), and list values in `.compare` (printed as `{…}`) and
    /// assets (printed as `ASSET("…")`), which queries cannot compare, are rejected.
    public var description: String {
        switch self {
        case .all: return "TRUEPREDICATE"
        case .none: return "FALSEPREDICATE"
        case .and(let parts):
            if parts.isEmpty { return "TRUEPREDICATE" }
            return parts.map { part in
                if case .and = part { return "(\(part))" }
                return part.description
            }.joined(separator: " AND ")
        case .not(let inner): return "NOT (\(inner))"
        case .condition(let condition): return condition.description
        }
    }
}

extension QueryPredicate {
    /// The predicate's format string, as `NSPredicate.predicateFormat`: ``description``'s
    /// canonical form, which ``QueryPredicate/init(format:_:)`` parses back to an equal predicate.
    ///
    /// ```swift
    /// let p = try QueryPredicate(format: "title BEGINSWITH %@ AND rank >= %d", "Buy", 2)
    /// print(p.predicateFormat)                          // title BEGINSWITH "Buy" AND rank >= 2
    /// let back = try QueryPredicate(format: p.predicateFormat)
    /// assert(back == p)
    /// ```
    public var predicateFormat: String { description }
}

extension Condition: CustomStringConvertible {
    /// The condition in the canonical format of ``QueryPredicate/description``.
    ///
    /// ```swift
    /// print(Condition.listContains(.field("tags"), .string("red")))   // tags CONTAINS "red"
    /// ```
    public var description: String {
        typealias F = PredicateFormatter
        switch self {
        case .compare(let key, let op, let value):
            return "\(F.key(key)) \(op.rawValue) \(F.literal(value))"
        case .between(let key, let low, let high):
            return "\(F.key(key)) BETWEEN {\(F.literal(low)), \(F.literal(high))}"
        case .in(let key, let values):
            return "\(F.key(key)) IN \(F.set(values))"
        case .beginsWith(let key, let prefix):
            return "\(F.key(key)) BEGINSWITH \(F.quoted(prefix))"
        case .listContains(let key, let value):
            return "\(F.key(key)) CONTAINS \(F.literal(value))"
        case .listContainsAny(let key, let values):
            return "ANY \(F.key(key)) IN \(F.set(values))"
        case .listAnyBeginsWith(let key, let prefix):
            return "ANY \(F.key(key)) BEGINSWITH \(F.quoted(prefix))"
        case .tokens(let words, let allTokens):
            // "All words" has no syntax of its own: it is what one-word searches joined by AND mean.
            if allTokens && words.count > 1 {
                return words.map { "self CONTAINS \(F.quoted($0))" }.joined(separator: " AND ")
            }
            return "self CONTAINS \(F.quoted(words.joined(separator: " ")))"
        case .distance(let key, let origin, let op, let kilometers):
            return "distanceToLocation:fromLocation:(\(F.key(key)), \(F.location(origin))) \(op.rawValue) \(F.number(kilometers))"
        case .hasParent(let present):
            return "\(F.key(.parent)) \(present ? "!=" : "==") nil"
        }
    }
}

/// The literal syntax ``QueryPredicate/description`` prints and ``PredicateParser`` reads.
enum PredicateFormatter {
    /// A key as written in a format string; reserved words get `#` so they read as names.
    static func key(_ key: QueryKey) -> String {
        let name = key.description
        return PredicateParser.Keyword(rawValue: name.lowercased()) == nil ? name : "#" + name
    }

    static func literal(_ value: FieldValue) -> String {
        switch value {
        case .string(let text): quoted(text)
        case .int64(let number): String(number)
        case .double(let number): self.number(number)
        case .date(let date): self.date(date)
        case .bytes(let data): "BYTES(\(quoted(data.base64EncodedString())))"
        case .reference(let reference): self.reference(reference)
        case .location(let location): self.location(location)
        case .asset(let asset): "ASSET(\(quoted(asset.storedIdentifier ?? asset.contentURL?.path ?? "")))"
        case .stringList, .int64List, .doubleList, .dateList, .bytesList, .referenceList, .locationList, .assetList:
            set(PredicateParser.listElements(of: value) ?? [])
        }
    }

    static func set(_ values: [FieldValue]) -> String {
        "{" + values.map(literal).joined(separator: ", ") + "}"
    }

    /// A double that parses back as the same double: Swift's shortest round-trip spelling always
    /// has a `.` or an exponent; values without a literal go through `CAST`.
    static func number(_ number: Double) -> String {
        if number.isNaN { return "CAST(\"nan\", \"NSNumber\")" }
        if number.isInfinite { return number < 0 ? "CAST(\"-inf\", \"NSNumber\")" : "CAST(\"inf\", \"NSNumber\")" }
        return number.description
    }

    static func date(_ date: Date) -> String {
        "CAST(\(number(date.timeIntervalSinceReferenceDate)), \"NSDate\")"
    }

    static func reference(_ reference: Record.Reference) -> String {
        let id = reference.recordID
        var parts = [quoted(id.recordName)]
        if id.zoneID.ownerName != RecordZone.ID.currentUserDefaultOwner {
            parts += [quoted(id.zoneID.zoneName), quoted(id.zoneID.ownerName)]
        } else if id.zoneID.zoneName != RecordZone.ID.defaultZoneName {
            parts.append(quoted(id.zoneID.zoneName))
        }
        return "REFERENCE(" + parts.joined(separator: ", ") + ")"
    }

    static func location(_ location: Location) -> String {
        if location == Location(latitude: location.latitude, longitude: location.longitude) {
            return "LOCATION(\(number(location.latitude)), \(number(location.longitude)))"
        }
        let parts = [
            location.latitude, location.longitude, location.altitude, location.horizontalAccuracy,
            location.verticalAccuracy, location.course, location.speed, location.timestamp.timeIntervalSinceReferenceDate,
        ]
        return "LOCATION(" + parts.map(number).joined(separator: ", ") + ")"
    }

    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.properties.generalCategory == .control {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    result += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
