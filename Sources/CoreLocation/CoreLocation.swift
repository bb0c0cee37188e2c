import Stratus

// `import CoreLocation` on Linux: CoreLocation's names for the location a record field holds,
// as CloudKit code uses them (`CLLocation` values in `CKRecord` fields, their coordinates and
// distances). Apple's `import CloudKit` brings CoreLocation with it; Stratus's CloudKit module
// re-exports this one. There is no location service here, only the value types.

/// `CLLocation`: ``Location``, the value of a location field.
///
/// ```swift
/// import CoreLocation
///
/// let office = CLLocation(latitude: 52.52, longitude: 13.405)
/// print(office.coordinate.latitude, office.distance(from: CLLocation(latitude: 48.14, longitude: 11.58)))
/// ```
public typealias CLLocation = Location

/// `CLLocationCoordinate2D`: ``LocationCoordinate2D``.
public typealias CLLocationCoordinate2D = LocationCoordinate2D

/// `CLLocationDegrees`: ``LocationDegrees``.
public typealias CLLocationDegrees = LocationDegrees

/// `CLLocationDistance`: ``LocationDistance``, metres.
public typealias CLLocationDistance = LocationDistance

/// `CLLocationAccuracy`: metres, as ``Location/horizontalAccuracy`` holds them.
public typealias CLLocationAccuracy = Double

/// `CLLocationSpeed`: metres per second, as ``Location/speed`` holds them.
public typealias CLLocationSpeed = Double

/// `CLLocationDirection`: degrees from true north, as ``Location/course`` holds them.
public typealias CLLocationDirection = Double

/// `CLLocationCoordinate2DMake`: ``LocationCoordinate2DMake(_:_:)``.
///
/// ```swift
/// let coordinate = CLLocationCoordinate2DMake(52.52, 13.405)
/// ```
public func CLLocationCoordinate2DMake(_ latitude: CLLocationDegrees, _ longitude: CLLocationDegrees) -> CLLocationCoordinate2D {
    LocationCoordinate2DMake(latitude, longitude)
}

/// `CLLocationCoordinate2DIsValid`: ``LocationCoordinate2DIsValid(_:)``.
///
/// ```swift
/// CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 91, longitude: 0))   // false
/// ```
public func CLLocationCoordinate2DIsValid(_ coordinate: CLLocationCoordinate2D) -> Bool {
    LocationCoordinate2DIsValid(coordinate)
}
