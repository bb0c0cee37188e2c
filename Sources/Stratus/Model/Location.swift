import Foundation

/// A geographic location stored in a `LOCATION` field, with the properties of `CLLocation`.
///
/// A class, as `CLLocation` is: immutable, equal by value (`==`, `isEqual(_:)`, hashing),
/// archived with `NSSecureCoding`, encoded with `Codable`, and extensible with a
/// `convenience init` as ported code extends `CLLocation`.
///
/// ```swift
/// record["place"] = Location(latitude: 52.52, longitude: 13.405)
/// ```
public final class Location: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// Degrees north of the equator (negative: south).
    public let latitude: Double
    /// Degrees east of the prime meridian (negative: west).
    public let longitude: Double
    /// Metres above sea level.
    public let altitude: Double
    /// Radius of uncertainty in metres; negative means the coordinate is invalid, as in CoreLocation.
    public let horizontalAccuracy: Double
    /// Uncertainty of the altitude in metres; negative when the altitude is invalid.
    public let verticalAccuracy: Double
    /// Degrees clockwise from true north; negative when unknown.
    public let course: Double
    /// Metres per second; negative when unknown.
    public let speed: Double
    /// When the location was determined.
    public let timestamp: Date

    /// A location at `latitude` and `longitude`; the other properties default as `CLLocation`'s
    /// coordinate initialiser sets them.
    ///
    /// ```swift
    /// let berlin = Location(latitude: 52.52, longitude: 13.405)
    /// let measured = Location(latitude: 52.52, longitude: 13.405, altitude: 34, horizontalAccuracy: 5, timestamp: Date())
    /// ```
    public init(
        latitude: Double, longitude: Double, altitude: Double = 0,
        horizontalAccuracy: Double = 0, verticalAccuracy: Double = -1,
        course: Double = -1, speed: Double = -1,
        timestamp: Date = Date(timeIntervalSinceReferenceDate: 0)
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.course = course
        self.speed = speed
        self.timestamp = timestamp
    }

    /// Great-circle distance in metres (haversine on a sphere of CoreLocation's mean radius).
    ///
    /// ```swift
    /// let metres = Location(latitude: 52.52, longitude: 13.405).distance(from: Location(latitude: 48.14, longitude: 11.58))
    /// ```
    public func distance(from other: Location) -> Double {
        let radius = 6_371_008.8
        let p1 = latitude * .pi / 180, p2 = other.latitude * .pi / 180
        let dp = p2 - p1, dl = (other.longitude - longitude) * .pi / 180
        let a = sin(dp / 2) * sin(dp / 2) + cos(p1) * cos(p2) * sin(dl / 2) * sin(dl / 2)
        return 2 * radius * atan2(a.squareRoot(), (1 - a).squareRoot())
    }

    /// Whether `object` is a location with the same coordinate, accuracies, course, speed and
    /// timestamp.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? Location else { return false }
        return self === other
            || (latitude == other.latitude && longitude == other.longitude && altitude == other.altitude
                && horizontalAccuracy == other.horizontalAccuracy && verticalAccuracy == other.verticalAccuracy
                && course == other.course && speed == other.speed && timestamp == other.timestamp)
    }

    public override var hash: Int {
        var hasher = Hasher()
        for number in [latitude, longitude, altitude, horizontalAccuracy, verticalAccuracy, course, speed] { hasher.combine(number) }
        hasher.combine(timestamp)
        return hasher.finalize()
    }

    /// CoreLocation's form: `<+52.52000000,+13.40500000> +/- 0.00m (speed -1.00 mps / course -1.00) @ …`.
    public override var description: String {
        func signed(_ degrees: Double) -> String { (degrees >= 0 ? "+" : "") + String(format: "%.8f", degrees) }
        return "<\(signed(latitude)),\(signed(longitude))> +/- \(String(format: "%.2f", horizontalAccuracy))m "
            + "(speed \(String(format: "%.2f", speed)) mps / course \(String(format: "%.2f", course))) @ \(timestamp)"
    }

    // MARK: Codable, in the keys of the value type it was (cursors and archives written before read back)

    private enum CodingKeys: String, CodingKey {
        case latitude, longitude, altitude, horizontalAccuracy, verticalAccuracy, course, speed, timestamp
    }

    /// Reads a location that ``encode(to:)`` wrote.
    public convenience init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(latitude: try c.decode(Double.self, forKey: .latitude), longitude: try c.decode(Double.self, forKey: .longitude),
                  altitude: try c.decode(Double.self, forKey: .altitude),
                  horizontalAccuracy: try c.decode(Double.self, forKey: .horizontalAccuracy),
                  verticalAccuracy: try c.decode(Double.self, forKey: .verticalAccuracy),
                  course: try c.decode(Double.self, forKey: .course), speed: try c.decode(Double.self, forKey: .speed),
                  timestamp: try c.decode(Date.self, forKey: .timestamp))
    }

    /// Writes every property.
    ///
    /// ```swift
    /// let json = try JSONEncoder().encode(Location(latitude: 52.52, longitude: 13.405))
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(latitude, forKey: .latitude)
        try c.encode(longitude, forKey: .longitude)
        try c.encode(altitude, forKey: .altitude)
        try c.encode(horizontalAccuracy, forKey: .horizontalAccuracy)
        try c.encode(verticalAccuracy, forKey: .verticalAccuracy)
        try c.encode(course, forKey: .course)
        try c.encode(speed, forKey: .speed)
        try c.encode(timestamp, forKey: .timestamp)
    }

    // MARK: NSSecureCoding, as apps archive CLLocations

    public static var supportsSecureCoding: Bool { true }

    private static let archiveKeys = ["StratusLatitude", "StratusLongitude", "StratusAltitude", "StratusHorizontalAccuracy",
                                      "StratusVerticalAccuracy", "StratusCourse", "StratusSpeed", "StratusTimestamp"]

    /// Writes the location (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: place, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        let numbers = [latitude, longitude, altitude, horizontalAccuracy, verticalAccuracy, course, speed, timestamp.timeIntervalSinceReferenceDate]
        for (number, key) in zip(numbers, Self.archiveKeys) { coder.encode(number, forKey: key) }
    }

    /// Reads a location written by ``encode(with:)``; `nil` when the archive holds no location.
    ///
    /// ```swift
    /// let place = try NSKeyedUnarchiver.unarchivedObject(ofClass: Location.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard Self.archiveKeys.allSatisfy(coder.containsValue(forKey:)) else { return nil }
        let n = Self.archiveKeys.map { coder.decodeDouble(forKey: $0) }
        self.init(latitude: n[0], longitude: n[1], altitude: n[2], horizontalAccuracy: n[3], verticalAccuracy: n[4],
                  course: n[5], speed: n[6], timestamp: Date(timeIntervalSinceReferenceDate: n[7]))
    }

    /// The location itself: locations are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
