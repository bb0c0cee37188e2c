import Foundation

/// `CKLocationSortDescriptor`'s name: a ``RecordSortDescriptor`` that sorts by distance, so
/// that `LocationSortDescriptor(key:relativeLocation:)` goes into `query.sortDescriptors`.
///
/// ```swift
/// query.sortDescriptors = [LocationSortDescriptor(key: "location", relativeLocation: here)]
/// ```
public typealias LocationSortDescriptor = RecordSortDescriptor

extension RecordSortDescriptor {
    /// Sorts by the distance of the `LOCATION` field `key` from `relativeLocation`, nearest
    /// first, as `CKLocationSortDescriptor(key:relativeLocation:)` (records without the field
    /// sort first, as missing values do in every ascending sort).
    ///
    /// ```swift
    /// let nearest = LocationSortDescriptor(key: "location", relativeLocation: Location(latitude: 52.52, longitude: 13.405))
    /// ```
    public init(key: String, relativeLocation: Location) {
        self.init(distanceOf: key, from: relativeLocation, ascending: true)
    }

    /// The point distances are measured from, as `CKLocationSortDescriptor.relativeLocation`;
    /// `nil` for a sort by value.
    public var relativeLocation: Location? { distanceFrom }
}
