import Foundation

/// A file stored with a record, like `CKAsset`.
///
/// Saving a record copies the file's bytes into the store. A fetched record's asset points at a
/// readable file in the store with the same bytes; treat that file as read-only.
///
/// ```swift
/// record["image"] = Asset(fileURL: URL(fileURLWithPath: "/tmp/photo.jpg"))
/// let bytes = try Data(contentsOf: (record["image"] as! Asset).fileURL!)
/// ```
public struct Asset: Hashable, Sendable, Codable {
    /// Where the asset's bytes can be read.
    public let fileURL: URL?

    /// The store's identifier for the content, set on assets that come from a store.
    public let storedIdentifier: String?

    /// The content size in bytes, when the asset comes from a store.
    public let size: Int64?

    public init(fileURL: URL) {
        self.fileURL = fileURL
        self.storedIdentifier = nil
        self.size = nil
    }

    /// An asset already held by a store; engines create these when they read records.
    public init(storedIdentifier: String, size: Int64, fileURL: URL?) {
        self.storedIdentifier = storedIdentifier
        self.size = size
        self.fileURL = fileURL
    }
}
