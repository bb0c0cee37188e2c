import Foundation

/// A geographic location stored in a `LOCATION` field, with the properties of `CLLocation`.
///
/// ```swift
/// record["place"] = Location(latitude: 52.52, longitude: 13.405)
/// ```
public struct Location: Hashable, Sendable, Codable {
    public var latitude: Double
    public var longitude: Double
    /// Metres above sea level.
    public var altitude: Double
    /// Radius of uncertainty in metres; negative means the coordinate is invalid, as in CoreLocation.
    public var horizontalAccuracy: Double
    public var verticalAccuracy: Double
    /// Degrees clockwise from true north; negative when unknown.
    public var course: Double
    /// Metres per second; negative when unknown.
    public var speed: Double
    public var timestamp: Date

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
