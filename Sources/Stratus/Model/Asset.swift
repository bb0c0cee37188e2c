import Foundation

/// A file stored with a record, like `CKAsset`.
///
/// Saving a record stores the file's content in the store, keyed by its SHA-256 (the same
/// content is kept once, however many records hold it). A fetched record's asset hands the app
/// a file of its own with those bytes (``fileURL``), as CloudKit hands out a downloaded copy:
/// the app may read, move, delete or write it, and the store never changes.
///
/// An asset that came from CloudKit (a record exported from CloudKit Web Services) carries
/// CloudKit's description of its content as it came: ``downloadURL``, ``fileChecksum``,
/// ``size``, ``referenceChecksum``, ``wrappingKey``, ``receipt``. Stratus keeps it and writes it
/// back unchanged; it never downloads the content. Until the content is attached (`stratus
/// assets attach`), such an asset has no ``fileURL``, and asking for its content fails with
/// `assetNotAvailable` while the record itself reads normally.
///
/// ```swift
/// record["image"] = Asset(fileURL: URL(fileURLWithPath: "/tmp/photo.jpg"))
/// try await database.save(record)                       // stores the file's content
/// let fetched = try await database.record(for: record.recordID)
/// let photo = (fetched["image"] as! Asset).fileURL!      // the app's own copy
/// try FileManager.default.moveItem(at: photo, to: cacheURL)
/// ```
///
/// A class, as `CKAsset` is: immutable, equal by value (`==`, `isEqual(_:)`, hashing), archived
/// with `NSSecureCoding` and encoded with `Codable` (both keep what ``encode(to:)`` keeps), and
/// extensible with a `convenience init` as ported CloudKit code extends it.
public final class Asset: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// Where the app reads the asset's bytes, as `CKAsset.fileURL`:
    /// - for an asset made with ``init(fileURL:)``, the file given;
    /// - for an asset read from a store (a fetched or saved record), a file the app owns with
    ///   the stored bytes, made the first time this property is read (a clone where the file
    ///   system can make one, else a copy): moving, deleting or writing it never changes the
    ///   store. Copies of this value share the file; every fetch hands out its own. The file is
    ///   removed an hour after it was made, or once the process has ended (see "How assets are
    ///   stored" in the README); read the property again for a new one, and move or copy the
    ///   file to keep it. `nil` when no copy can be made (the content left the store, the disk
    ///   is full, the store's content file is not the asset's size: a damaged assets folder);
    /// - `nil` for a CloudKit asset whose content is not attached.
    ///
    /// ```swift
    /// if let url = (record["photo"] as? Asset)?.fileURL { try FileManager.default.moveItem(at: url, to: keep) }
    /// ```
    public var fileURL: URL? {
        guard let handout else { return location }
        return handout.fileURL()
    }

    /// Where Stratus itself reads the content: the source file of an asset to save, the store's
    /// own read-only file of a stored one. Never handed to the app: exports, copies and saves
    /// read it directly, without a handed-out copy.
    package var contentURL: URL? { location }

    /// The size of the store's content file `file` when it is not the asset's ``size``: the
    /// content was truncated or replaced on disk (a damaged or half-restored assets folder),
    /// and reading it would hand out other bytes as this asset. `nil` when the sizes agree, or
    /// when there is nothing to compare (no stored content, no size, no file: a missing file
    /// is reported by whoever reads it).
    package func damagedContentSize(in file: URL? = nil) -> Int64? {
        guard storedIdentifier != nil, let size, let path = (file ?? location)?.path else { return nil }
        var info = stat()
        guard stat(path, &info) == 0, Int64(info.st_size) != size else { return nil }
        return Int64(info.st_size)
    }

    /// What to say of content ``damagedContentSize(in:)`` found damaged: which file, and what to do.
    package func damagedContentMessage(fileSize: Int64, file: URL? = nil) -> String {
        let name = (file ?? location)?.lastPathComponent ?? storedIdentifier ?? "?"
        return "the store's content file \(name) has \(fileSize) bytes where the asset has \(size ?? 0): the store's assets are damaged (restore its assets folder from a backup)"
    }

    /// The source file, or the store's content file of a stored asset.
    private let location: URL?
    /// Hands the app its own copy of a stored asset's content.
    private let handout: AssetHandout?

    /// The content's SHA-256 in lowercase hexadecimal, set on assets whose content the store
    /// holds.
    public let storedIdentifier: String?

    /// The content size in bytes: the stored content's, else CloudKit's `size`.
    public let size: Int64?

    /// CloudKit's `downloadURL`: where CloudKit served the content (an `https` URL, valid for a
    /// while after the record was fetched). Kept as it came, never fetched.
    public let downloadURL: String?
    /// CloudKit's `fileChecksum`: its token for the content (not a digest Stratus can check).
    public let fileChecksum: String?
    /// CloudKit's `referenceChecksum` (the checksum of the wrapping key), private database assets.
    public let referenceChecksum: String?
    /// CloudKit's `wrappingKey` (the key the content was encrypted with), private database assets.
    public let wrappingKey: String?
    /// CloudKit's `receipt` of an upload.
    public let receipt: String?
    /// Other members of CloudKit's asset dictionary (and known ones that came as `null`), by
    /// key, as JSON text, kept as they came.
    public let otherMembers: [String: String]

    /// Where a save reads the content from, when it is not the plain ``fileURL``.
    package let source: Source?

    /// How a save finds an asset's content.
    package enum Source: Hashable, Sendable {
        /// A path relative to a folder the user named, resolved without leaving it: no
        /// absolute path, no `..`, and symbolic links only when `followsSymlinks` (and then
        /// only to files inside the folder). `expectedDigest`, when set, is the SHA-256 (lowercase
        /// hexadecimal) the content must have: a file named by its digest, as Stratus's export
        /// writes them, that holds other bytes is refused, not stored as the record's asset.
        case confined(root: URL, path: String, followsSymlinks: Bool, expectedDigest: String? = nil)
        /// The plain ``fileURL``, a store's content file, which must hold the content whose
        /// SHA-256 (lowercase hexadecimal) names it: a copy between stores stores no damage.
        case storedContent(digest: String)
    }

    /// An asset whose content is the file at `fileURL`; saving the record stores a copy.
    ///
    /// ```swift
    /// let photo = Asset(fileURL: URL(fileURLWithPath: "/srv/upload/photo.jpg"))
    /// ```
    public convenience init(fileURL: URL) {
        self.init(fileURL: fileURL, storedIdentifier: nil, size: nil, source: nil)
    }

    /// An asset already held by a store; engines create these when they read records.
    /// `fileURL` is the store's own read-only file with the content: ``fileURL`` hands the app
    /// a copy of it, never the file itself.
    ///
    /// ```swift
    /// let stored = Asset(storedIdentifier: sha256Hex, size: 1_024, fileURL: url)
    /// ```
    public convenience init(storedIdentifier: String, size: Int64, fileURL: URL?) {
        self.init(fileURL: fileURL, storedIdentifier: storedIdentifier, size: size, source: nil)
    }

    /// An asset whose content is the file at `path` inside `folder`, read without leaving it:
    /// an absolute `path`, a `..` component or (unless `followsSymlinks`) a symbolic link is
    /// refused when the record is saved. What `stratus import --assets-dir` makes.
    ///
    /// ```swift
    /// let photo = Asset(path: "photos/a.jpg", in: URL(fileURLWithPath: "/srv/export"))
    /// ```
    public convenience init(path: String, in folder: URL, followsSymlinks: Bool = false) {
        self.init(path: path, in: folder, followsSymlinks: followsSymlinks, expectedDigest: nil)
    }

    /// ``init(path:in:followsSymlinks:)`` whose content must have the SHA-256 `expectedDigest`
    /// (lowercase hexadecimal): what a reader makes of a file an export named by its digest.
    package convenience init(path: String, in folder: URL, followsSymlinks: Bool, expectedDigest: String?) {
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : folder.appendingPathComponent(path)
        self.init(fileURL: url, storedIdentifier: nil, size: nil, source: .confined(root: folder, path: path, followsSymlinks: followsSymlinks, expectedDigest: expectedDigest))
    }

    /// A CloudKit asset described by its `downloadURL` and metadata, without content.
    ///
    /// ```swift
    /// let remote = Asset(downloadURL: "https://cvws.icloud-content.com/B/…", fileChecksum: "AV4x…", size: 53_211)
    /// ```
    public convenience init(downloadURL: String?, fileChecksum: String? = nil, size: Int64? = nil, referenceChecksum: String? = nil,
                            wrappingKey: String? = nil, receipt: String? = nil, otherMembers: [String: String] = [:]) {
        self.init(fileURL: nil, storedIdentifier: nil, size: size, source: nil,
                  metadata: CloudKitMetadata(downloadURL: downloadURL, fileChecksum: fileChecksum, referenceChecksum: referenceChecksum,
                                             wrappingKey: wrappingKey, receipt: receipt, otherMembers: otherMembers))
    }

    /// CloudKit's description of an asset's content, as an asset keeps it.
    package struct CloudKitMetadata: Sendable {
        package var downloadURL: String?
        package var fileChecksum: String?
        package var referenceChecksum: String?
        package var wrappingKey: String?
        package var receipt: String?
        package var otherMembers: [String: String]

        package init(downloadURL: String? = nil, fileChecksum: String? = nil, referenceChecksum: String? = nil,
                     wrappingKey: String? = nil, receipt: String? = nil, otherMembers: [String: String] = [:]) {
            self.downloadURL = downloadURL
            self.fileChecksum = fileChecksum
            self.referenceChecksum = referenceChecksum
            self.wrappingKey = wrappingKey
            self.receipt = receipt
            self.otherMembers = otherMembers
        }
    }

    /// The asset's CloudKit metadata, to build another asset with it.
    package var cloudKitMetadata: CloudKitMetadata {
        CloudKitMetadata(downloadURL: downloadURL, fileChecksum: fileChecksum, referenceChecksum: referenceChecksum,
                         wrappingKey: wrappingKey, receipt: receipt, otherMembers: otherMembers)
    }

    /// An asset with a file: a source to save when `storedIdentifier` is `nil`, else the
    /// store's content file, which ``fileURL`` hands out copies of.
    package init(fileURL: URL?, storedIdentifier: String?, size: Int64?, source: Source?, metadata: CloudKitMetadata = CloudKitMetadata()) {
        self.location = fileURL
        self.storedIdentifier = storedIdentifier
        self.size = size
        self.source = source
        self.downloadURL = metadata.downloadURL
        self.fileChecksum = metadata.fileChecksum
        self.referenceChecksum = metadata.referenceChecksum
        self.wrappingKey = metadata.wrappingKey
        self.receipt = metadata.receipt
        self.otherMembers = metadata.otherMembers
        if let storedIdentifier, let fileURL {
            handout = AssetHandout(content: fileURL, identifier: storedIdentifier, size: size)
        } else {
            handout = nil
        }
    }

    /// The same content (or source) with `metadata` in place of this asset's CloudKit metadata.
    package func replacingMetadata(_ metadata: CloudKitMetadata) -> Asset {
        Asset(fileURL: location, storedIdentifier: storedIdentifier, size: size, source: source, metadata: metadata)
    }

    /// Whether the asset carries CloudKit's description of its content (a `downloadURL`, a
    /// checksum or other members of CloudKit's asset dictionary).
    public var hasCloudKitMetadata: Bool {
        downloadURL != nil || fileChecksum != nil || referenceChecksum != nil || wrappingKey != nil || receipt != nil
            || !otherMembers.isEmpty
    }

    /// Whether a save must read content for this asset: it has a source file and no stored content.
    package var needsContent: Bool { storedIdentifier == nil && location != nil }

    /// The same asset with the store's content: its identifier, size and the store's readable
    /// file (which ``fileURL`` hands out copies of), and the CloudKit metadata it had.
    ///
    /// ```swift
    /// let stored = asset.withContent(identifier: hash, size: 1_024, fileURL: url)
    /// ```
    public func withContent(identifier: String, size: Int64, fileURL: URL?) -> Asset {
        Asset(fileURL: fileURL, storedIdentifier: identifier, size: size, source: nil, metadata: cloudKitMetadata)
    }

    /// The same asset with its CloudKit metadata only (no content), as a store keeps one
    /// whose content it does not have.
    package func withoutContent(size: Int64?) -> Asset {
        Asset(fileURL: nil, storedIdentifier: nil, size: size, source: nil, metadata: cloudKitMetadata)
    }

    /// This asset's source or content with `other`'s CloudKit metadata and the given size:
    /// what a reader makes of a CloudKit asset whose content is in a file.
    package func withMetadata(of other: Asset, size: Int64?) -> Asset {
        Asset(fileURL: location, storedIdentifier: storedIdentifier, size: size ?? self.size, source: source, metadata: other.cloudKitMetadata)
    }

    // Equality is the value's: which content or file, its size and metadata; not which copy
    // was handed out.
    /// Whether `object` is an asset of the same content or file, size and CloudKit metadata.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? Asset else { return false }
        return self === other
            || (location == other.location && storedIdentifier == other.storedIdentifier && size == other.size && source == other.source
                && downloadURL == other.downloadURL && fileChecksum == other.fileChecksum && referenceChecksum == other.referenceChecksum
                && wrappingKey == other.wrappingKey && receipt == other.receipt && otherMembers == other.otherMembers)
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(location)
        hasher.combine(storedIdentifier)
        hasher.combine(size)
        hasher.combine(source)
        hasher.combine(downloadURL)
        hasher.combine(fileChecksum)
        hasher.combine(referenceChecksum)
        hasher.combine(wrappingKey)
        hasher.combine(receipt)
        hasher.combine(otherMembers)
        return hasher.finalize()
    }

    public override var description: String {
        if let storedIdentifier { return "asset \(storedIdentifier) (\(size ?? 0) bytes)" }
        if let location { return "asset \(location.path)" }
        return "asset " + (downloadURL ?? fileChecksum ?? "without content")
    }

    /// The asset itself: assets are immutable (a copy of a stored asset shares its handed-out file).
    public func copy(with zone: NSZone? = nil) -> Any { self }

    // The source is how a save finds content, not part of the value an archive keeps. An
    // archive keeps the store's file of a stored asset (as `fileURL`), so that the asset read
    // back hands out copies of it again.
    private enum CodingKeys: String, CodingKey {
        case fileURL, storedIdentifier, size, downloadURL, fileChecksum, referenceChecksum, wrappingKey, receipt, otherMembers
    }

    /// Reads an asset that ``encode(to:)`` wrote.
    public convenience init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let metadata = CloudKitMetadata(
            downloadURL: try c.decodeIfPresent(String.self, forKey: .downloadURL),
            fileChecksum: try c.decodeIfPresent(String.self, forKey: .fileChecksum),
            referenceChecksum: try c.decodeIfPresent(String.self, forKey: .referenceChecksum),
            wrappingKey: try c.decodeIfPresent(String.self, forKey: .wrappingKey),
            receipt: try c.decodeIfPresent(String.self, forKey: .receipt),
            otherMembers: try c.decodeIfPresent([String: String].self, forKey: .otherMembers) ?? [:])
        self.init(fileURL: try c.decodeIfPresent(URL.self, forKey: .fileURL), storedIdentifier: try c.decodeIfPresent(String.self, forKey: .storedIdentifier),
                  size: try c.decodeIfPresent(Int64.self, forKey: .size), source: nil, metadata: metadata)
    }

    /// Writes the file (the store's own file of a stored asset), size and CloudKit metadata.
    ///
    /// ```swift
    /// let json = try JSONEncoder().encode(Asset(fileURL: URL(fileURLWithPath: "/tmp/photo.jpg")))
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(location, forKey: .fileURL)
        try c.encodeIfPresent(storedIdentifier, forKey: .storedIdentifier)
        try c.encodeIfPresent(size, forKey: .size)
        try c.encodeIfPresent(downloadURL, forKey: .downloadURL)
        try c.encodeIfPresent(fileChecksum, forKey: .fileChecksum)
        try c.encodeIfPresent(referenceChecksum, forKey: .referenceChecksum)
        try c.encodeIfPresent(wrappingKey, forKey: .wrappingKey)
        try c.encodeIfPresent(receipt, forKey: .receipt)
        if !otherMembers.isEmpty { try c.encode(otherMembers, forKey: .otherMembers) }
    }

    // MARK: NSSecureCoding, as apps archive a record's values (a dictionary of them, a cache)

    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusAssetJSON"

    /// Writes the asset (`NSCoding`): what ``encode(to:)`` writes, as JSON.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: asset, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        guard let json = try? JSONEncoder().encode(self) else { return }
        coder.encode(json as NSData, forKey: Self.archiveKey)
    }

    /// Reads an asset written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let asset = try NSKeyedUnarchiver.unarchivedObject(ofClass: Asset.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard coder.containsValue(forKey: Self.archiveKey),
              let json = coder.decodeArchived(NSData.self, forKey: Self.archiveKey),
              let decoded = try? JSONDecoder().decode(Asset.self, from: json as Data)
        else { return nil }
        self.init(fileURL: decoded.location, storedIdentifier: decoded.storedIdentifier, size: decoded.size, source: nil,
                  metadata: decoded.cloudKitMetadata)
    }
}
