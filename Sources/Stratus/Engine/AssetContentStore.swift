import Foundation

/// What an engine offers for asset content: bytes kept under their SHA-256, written and made
/// durable before any record names them, kept while a record or a hold names them. No policy:
/// the core reads sources, hashes them, decides what to hold and when to collect
/// (`AssetStaging`, `AssetCollector`).
///
/// The protocol of a save with assets, which makes an asset commit with its record and lets a
/// collector run at any time beside any number of writers:
/// 1. each asset's content is written with ``beginUpload(holder:)`` while it is hashed;
/// 2. ``hold(_:holder:)`` records, in one transaction, that the holder is about to use the
///    content identifiers: from then on no collection removes them;
/// 3. ``commit(_:)`` makes each upload durable under its identifier (or drops it when the
///    store has that content already), and only then
/// 4. the record transaction writes rows naming the identifiers; the engine keeps which rows
///    name which content (its own derived data, like references);
/// 5. ``collect(releasing:candidates:isHolderAlive:)`` releases the holder's holds and removes
///    content that no row names and no live holder holds.
///
/// A writer killed anywhere leaves holds of a dead holder and perhaps uploads: the next
/// collection (which asks ``isHolderAlive``) removes both, and never a content a row names.
///
/// ```swift
/// let store = engine.assetContents(for: context)
/// let upload = try store.beginUpload(holder: holder)
/// try upload.write(chunk)
/// try store.hold([digest], holder: holder)
/// try store.commit([(upload, digest)])
/// ```
@_spi(StratusEngine)
public protocol AssetContentStore: Sendable {
    /// A folder on this machine, private to the store's user (0700), where holders keep their
    /// lock files (see ``AssetHolder``-style liveness in the core).
    var localDirectory: URL { get }

    /// Starts writing one asset's content, whose identifier is not known yet. What it writes
    /// is private to the store's user and invisible to readers until committed.
    ///
    /// - Throws: store or file errors (disk full, permission).
    func beginUpload(holder: String) throws -> any AssetUpload

    /// Holds content identifiers for `holder`, in one transaction: content they name is not
    /// collected until the holder releases them or is found dead. Answers which of them the
    /// store holds content for.
    ///
    /// - Throws: store errors (busy, which the caller may retry).
    func hold(_ identifiers: Set<String>, holder: String) throws -> Set<String>

    /// Makes each upload durable and stored under its identifier (the SHA-256 of what was
    /// written), or drops it when that content is stored already. When this returns, every
    /// identifier names durable content. The identifiers must be held.
    ///
    /// - Throws: store or file errors; uploads not committed are dropped.
    func commit(_ uploads: [(upload: any AssetUpload, identifier: String)]) throws

    /// Where a reader on this machine finds the content with this identifier (no I/O: the
    /// file may not exist yet, see ``contentFile(_:)``); `nil` for text that is no identifier.
    /// The file is `localDirectory/sha256/<identifier>`: an asset read from the store hands the
    /// app a copy of it in `localDirectory/handout/` (``Asset/fileURL``), on the same file
    /// system, and never the file itself.
    func contentURL(_ identifier: String) -> URL?

    /// A readable file with the stored content, or `nil` when the store does not hold it for
    /// this store's database (content another user's records name is not there for it).
    ///
    /// - Throws: store or file errors.
    func contentFile(_ identifier: String) throws -> URL?

    /// Which of `identifiers` a record of this store's database, or of its container's public
    /// database, names: the stored content a save there may name without giving its bytes (a
    /// fetched record saved again). A store that keeps each owner's content apart answers
    /// every identifier it holds for the owner.
    ///
    /// - Throws: store errors.
    func visibleContent(_ identifiers: Set<String>) throws -> Set<String>

    /// Releases `releasing`'s holds (when given) and removes the content among `candidates`
    /// (every stored content when `nil`, and then also uploads and holds of dead holders) that
    /// no record names and no live holder holds. Safe beside concurrent writers.
    ///
    /// - Throws: store or file errors.
    func collect(releasing holder: String?, candidates: Set<String>?, isHolderAlive: (String) -> Bool) throws -> AssetCollection

    /// The identifiers of the content the store holds and how many bytes they take.
    ///
    /// - Throws: store or file errors.
    func inventory() throws -> (identifiers: Set<String>, bytes: Int64)
}

/// One asset's content being written: bytes in, then committed by the store or abandoned.
@_spi(StratusEngine)
public protocol AssetUpload: AnyObject {
    /// Appends bytes.
    ///
    /// - Throws: file or store errors (disk full).
    func write(_ bytes: UnsafeRawBufferPointer) throws

    /// Says that every byte was written: the store may start making them durable.
    func finishWriting()

    /// Removes what was written; the upload is unusable afterwards. Safe to call twice.
    func abandon()
}

/// What a collection removed.
public struct AssetCollection: Sendable, Hashable {
    /// Content removed because nothing named it.
    public var removedContents = 0
    /// Bytes those took.
    public var removedBytes: Int64 = 0
    /// Unfinished uploads of writers that are gone.
    public var removedUploads = 0
    /// Holds of writers that are gone.
    public var releasedHolds = 0
    /// Folders of asset files handed out by processes that ended (see ``Asset/fileURL``).
    public var removedHandoutFolders = 0

    public init() {}

    /// Adds another collection's counts.
    public mutating func add(_ other: AssetCollection) {
        removedContents += other.removedContents
        removedBytes += other.removedBytes
        removedUploads += other.removedUploads
        releasedHolds += other.releasedHolds
        removedHandoutFolders += other.removedHandoutFolders
    }
}
