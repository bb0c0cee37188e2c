import Foundation

/// A geographic location stored in a `LOCATION` field, with the properties of `CLLocation`.
///
/// ```swift
/// record["place"] = Location(latitude: 52.52, longitude: 13.405)
/// ```
public struct Location: Hashable, Sendable, Codable {
    /// Degrees north of the equator (negative: south).
    public var latitude: Double
    /// Degrees east of the prime meridian (negative: west).
    public var longitude: Double
    /// Metres above sea level.
    public var altitude: Double
    /// Radius of uncertainty in metres; negative means the coordinate is invalid, as in CoreLocation.
    public var horizontalAccuracy: Double
    /// Uncertainty of the altitude in metres; negative when the altitude is invalid.
    public var verticalAccuracy: Double
    /// Degrees clockwise from true north; negative when unknown.
    public var course: Double
    /// Metres per second; negative when unknown.
    public var speed: Double
    /// When the location was determined.
    public var timestamp: Date

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
    public func distance(from other: Location) -> Double {
        let radius = 6_371_008.8
        let p1 = latitude * .pi / 180, p2 = other.latitude * .pi / 180
        let dp = p2 - p1, dl = (other.longitude - longitude) * .pi / 180
        let a = sin(dp / 2) * sin(dp / 2) + cos(p1) * cos(p2) * sin(dl / 2) * sin(dl / 2)
        return 2 * radius * atan2(a.squareRoot(), (1 - a).squareRoot())
    }
}
