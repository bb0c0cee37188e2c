import Foundation

/// Degrees of latitude or longitude, as `CLLocationDegrees`.
public typealias LocationDegrees = Double
/// Metres, as `CLLocationDistance`.
public typealias LocationDistance = Double

/// A latitude and longitude, as `CLLocationCoordinate2D`.
///
/// Like `CLLocationCoordinate2D`, it is not `Equatable`, `Hashable` or `Codable`: apps add
/// those themselves (`extension CLLocationCoordinate2D: Codable`, often in a format of their
/// own, such as `[latitude, longitude]`), and a conformance Stratus declared would make theirs
/// redundant, so that their `encode(to:)` and `==` went unused.
///
/// ```swift
/// let berlin = Location(latitude: 52.52, longitude: 13.405)
/// print(berlin.coordinate.latitude)
/// ```
public struct LocationCoordinate2D: Sendable {
    /// Degrees north of the equator (negative: south).
    public var latitude: LocationDegrees
    /// Degrees east of Greenwich (negative: west).
    public var longitude: LocationDegrees

    /// The coordinate 0, 0.
    public init() { self.init(latitude: 0, longitude: 0) }

    /// A coordinate in degrees.
    public init(latitude: LocationDegrees, longitude: LocationDegrees) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// A coordinate from a latitude and a longitude, as `CLLocationCoordinate2DMake`.
///
/// ```swift
/// let coordinate = LocationCoordinate2DMake(52.52, 13.405)
/// ```
public func LocationCoordinate2DMake(_ latitude: LocationDegrees, _ longitude: LocationDegrees) -> LocationCoordinate2D {
    LocationCoordinate2D(latitude: latitude, longitude: longitude)
}

/// Whether a coordinate is a valid place on Earth, as `CLLocationCoordinate2DIsValid`.
///
/// ```swift
/// LocationCoordinate2DIsValid(LocationCoordinate2D(latitude: 91, longitude: 0))   // false
/// ```
public func LocationCoordinate2DIsValid(_ coordinate: LocationCoordinate2D) -> Bool {
    (-90...90).contains(coordinate.latitude) && (-180...180).contains(coordinate.longitude)
}

/// `CLLocation`'s coordinate-based forms, so that ported code reading `location.coordinate`
/// keeps working.
extension Location {
    /// The latitude and longitude, as `CLLocation.coordinate`.
    public var coordinate: LocationCoordinate2D { LocationCoordinate2D(latitude: latitude, longitude: longitude) }

    /// A location from a coordinate and its accuracy, as
    /// `CLLocation(coordinate:altitude:horizontalAccuracy:verticalAccuracy:timestamp:)`.
    ///
    /// ```swift
    /// let place = Location(coordinate: LocationCoordinate2D(latitude: 52.52, longitude: 13.405), altitude: 34,
    ///                      horizontalAccuracy: 5, verticalAccuracy: 10, timestamp: Date())
    /// ```
    public convenience init(coordinate: LocationCoordinate2D, altitude: LocationDistance, horizontalAccuracy: Double,
                verticalAccuracy: Double, timestamp: Date) {
        self.init(latitude: coordinate.latitude, longitude: coordinate.longitude, altitude: altitude,
                  horizontalAccuracy: horizontalAccuracy, verticalAccuracy: verticalAccuracy, timestamp: timestamp)
    }

    /// A location with course and speed, as
    /// `CLLocation(coordinate:altitude:horizontalAccuracy:verticalAccuracy:course:speed:timestamp:)`.
    ///
    /// ```swift
    /// let fix = Location(coordinate: coordinate, altitude: 0, horizontalAccuracy: 5, verticalAccuracy: -1,
    ///                    course: 90, speed: 1.4, timestamp: Date())
    /// ```
    public convenience init(coordinate: LocationCoordinate2D, altitude: LocationDistance, horizontalAccuracy: Double,
                verticalAccuracy: Double, course: Double, speed: Double, timestamp: Date) {
        self.init(latitude: coordinate.latitude, longitude: coordinate.longitude, altitude: altitude,
                  horizontalAccuracy: horizontalAccuracy, verticalAccuracy: verticalAccuracy,
                  course: course, speed: speed, timestamp: timestamp)
    }
}
