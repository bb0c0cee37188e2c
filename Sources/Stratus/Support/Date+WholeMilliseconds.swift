import Foundation

extension Date {
    /// This date cut to a whole millisecond: CloudKit's timestamps are whole milliseconds, and a
    /// date Stratus gives is too, so that it exports as CloudKit would write it.
    var wholeMilliseconds: Date {
        Date(timeIntervalSinceReferenceDate: (timeIntervalSinceReferenceDate * 1000).rounded(.down) / 1000)
    }
}
