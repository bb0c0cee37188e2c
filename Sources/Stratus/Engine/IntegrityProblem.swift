import Foundation

/// How an engine's ``StorageEngine/checkIntegrity()`` names what it found, the same on every
/// engine, so an operator reads one form of line whatever the store.
///
/// ```swift
/// let place = IntegrityProblem.place(zoneName: "Work", storageContainer: "iCloud.com.example", scope: 2, owner: "_alice")
/// problems.append("record 'n1' in \(place): its field document does not decode")
/// ```
@_spi(StratusEngine)
public enum IntegrityProblem {
    /// The lines an engine names one by one for each kind of problem; the rest are counted.
    public static let namedPerKind = 100

    /// "zone Work of iCloud.com.example private (_alice)": where a record of a zone lives, from
    /// the zone's stored container key (a production container's key is its identifier, U+001F
    /// and "production"), its database scope and owner.
    public static func place(zoneName: String?, storageContainer: String?, scope: Int64?, owner: String?) -> String {
        let container = storageContainer.map { $0.split(separator: "\u{1F}", maxSplits: 1).joined(separator: " ") } ?? "no container"
        let scopeName = scope.flatMap { Database.Scope(rawValue: Int($0)) }.map { "\($0)" } ?? "?"
        let ownerNote = owner.map { $0.isEmpty ? "" : " (\($0))" } ?? ""
        return "zone \(zoneName ?? "?") of \(container) \(scopeName)\(ownerNote)"
    }

    /// The line for asset content whose file is not the size a record that names it gives.
    public static func wrongSizeAssetContent(_ identifier: String, recordName: String, place: String, fileSize: Int64, assetSize: Int64, where location: String) -> String {
        "asset content \(identifier) in \(location) has \(fileSize) bytes where record '\(recordName)' in \(place) gives its asset \(assetSize)"
    }

    /// The line for asset content whose bytes do not hash to the SHA-256 that names it (bytes
    /// changed in place), with `found`, their SHA-256, and a record that names it.
    public static func changedAssetContent(_ identifier: String, found: String, recordName: String, place: String, where location: String) -> String {
        "asset content \(identifier) in \(location) holds bytes whose SHA-256 is \(found), not the one that names it; record '\(recordName)' in \(place) names it"
    }

    /// The line counting contents past ``namedPerKind`` whose bytes changed, or nil.
    public static func moreChangedAssetContents(_ count: Int) -> String? {
        count > namedPerKind ? "\(count - namedPerKind) more asset content(s) whose bytes changed" : nil
    }

    /// The line for a record whose stored field document cannot be read.
    public static func undecodableDocument(recordName: String, place: String, reason: String) -> String {
        "record '\(recordName)' in \(place): its field document does not decode: \(reason)"
    }

    /// The line counting records past ``namedPerKind`` whose documents do not decode, or nil.
    public static func moreUndecodableDocuments(_ count: Int) -> String? {
        count > namedPerKind ? "\(count - namedPerKind) more record(s) whose field document does not decode" : nil
    }

    /// The line for asset content that records name but the store does not hold.
    public static func missingAssetContent(_ identifier: String, recordName: String, place: String, otherRecords: Int, where location: String) -> String {
        let others = otherRecords > 0 ? " and \(otherRecords) other record(s)" : ""
        return "asset content \(identifier), named by record '\(recordName)' in \(place)\(others), is missing from \(location)"
    }
}
