import Foundation

/// Fetches what share URLs tell the caller, as `CKFetchShareMetadataOperation`: for each URL the
/// share, its root record's ID (or nothing, for a zone-wide share) and the caller's role,
/// acceptance status and permission (``Share/Metadata``).
///
/// A URL no share of the container has (never made, or its share deleted) fails with
/// `unknownItem`; a private share's URL opened by a user it does not name fails with
/// `participantMayNeedVerification`, as in CloudKit. Each URL fails alone; the final result is
/// then `partialFailure`. Run it on any database of the caller's container
/// (``Container/shareMetadata(for:)`` runs it on the shared database).
///
/// ```swift
/// let op = FetchShareMetadataOperation(shareURLs: [url])
/// op.shouldFetchRootRecord = true
/// op.perShareMetadataResultBlock = { url, result in
///     if let metadata = try? result.get() { print(metadata.participantStatus) }
/// }
/// op.fetchShareMetadataResultBlock = { print("done:", $0) }
/// container.sharedCloudDatabase.add(op)
/// ```
open class FetchShareMetadataOperation: DatabaseOperation, @unchecked Sendable {
    /// The URLs to read.
    public var shareURLs: [URL]?
    /// Whether each metadata carries its share's root record (``Share/Metadata/rootRecord``);
    /// a zone-wide share has none. `false` by default.
    public var shouldFetchRootRecord = false
    /// The root record's fields to fetch; every field when `nil`.
    public var rootRecordDesiredKeys: [Record.FieldKey]?
    /// Each URL with its metadata or its own error, as
    /// `CKFetchShareMetadataOperation.perShareMetadataResultBlock`.
    ///
    /// ```swift
    /// op.perShareMetadataResultBlock = { url, result in if case .failure(let error) = result { print(url, error) } }
    /// ```
    public var perShareMetadataResultBlock: ((URL, Result<Share.Metadata, any Error>) -> Void)?
    /// Called once at the end: success, `partialFailure` when some URL failed, or the error
    /// that failed the whole request.
    ///
    /// ```swift
    /// op.fetchShareMetadataResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchShareMetadataResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older per-URL block: the metadata or the error.
    public var perShareMetadataBlock: ((URL, Share.Metadata?, (any Error)?) -> Void)?
    /// CloudKit's older final block.
    public var fetchShareMetadataCompletionBlock: (((any Error)?) -> Void)?

    /// An operation that reads `shareURLs`, as `CKFetchShareMetadataOperation(shareURLs:)`.
    ///
    /// ```swift
    /// let op = FetchShareMetadataOperation(shareURLs: [url])
    /// ```
    public convenience init(shareURLs: [URL]) {
        self.init()
        self.shareURLs = shareURLs
    }

    /// An operation without URLs yet (set ``shareURLs``).
    ///
    /// ```swift
    /// let op = FetchShareMetadataOperation()
    /// op.shareURLs = [url]
    /// ```
    public override init() {
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let urls = shareURLs ?? []
        var failed: [String] = []
        for (index, url) in urls.enumerated() {
            if isCancelled { return StratusError.cancelled("FetchShareMetadataOperation", completed: index) }
            do {
                let metadata = try withRetry {
                    try ShareInvitation(url: url, engine: engine, context: context).metadata(rootRecordKeys: shouldFetchRootRecord ? .some(rootRecordDesiredKeys) : .none)
                }
                perShareMetadataResultBlock?(url, .success(metadata))
                perShareMetadataBlock?(url, metadata, nil)
            } catch let error as StratusError where !error.isTransient {
                failed.append("\(url.absoluteString): \(error.code)")
                perShareMetadataResultBlock?(url, .failure(error))
                perShareMetadataBlock?(url, nil, error)
            }
        }
        guard !failed.isEmpty else { return nil }
        return StratusError(.partialFailure, "\(failed.count) of \(urls.count) share URL(s) failed: \(failed.joined(separator: ", "))")
    }

    override func complete(with error: StratusError?) {
        fetchShareMetadataResultBlock?(error.map { .failure($0) } ?? .success(()))
        fetchShareMetadataCompletionBlock?(error)
    }
}
