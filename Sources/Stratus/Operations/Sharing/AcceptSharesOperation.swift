import Foundation

/// Accepts shares for the caller, as `CKAcceptSharesOperation`: an invited participant's
/// status becomes `.accepted`; a public share's URL makes the caller a `.publicUser`
/// participant with the share's public permission. The shared records then appear in the
/// caller's shared database (``Container/sharedCloudDatabase``).
///
/// A share deleted since its metadata was fetched fails with `unknownItem`; a caller the
/// share does not name (and not public) with `participantMayNeedVerification`. Each share fails
/// alone; the final result is then `partialFailure`.
///
/// ```swift
/// let op = AcceptSharesOperation(shareMetadatas: [metadata])
/// op.perShareResultBlock = { metadata, result in
///     if let share = try? result.get() { print("joined", share.recordID.zoneID.zoneName) }
/// }
/// op.acceptSharesResultBlock = { print("done:", $0) }
/// container.sharedCloudDatabase.add(op)
/// ```
open class AcceptSharesOperation: DatabaseOperation, @unchecked Sendable {
    /// The shares to accept, as fetched metadata.
    public var shareMetadatas: [Share.Metadata]?
    /// Each metadata with the share as accepted, or its own error, as
    /// `CKAcceptSharesOperation.perShareResultBlock`.
    ///
    /// ```swift
    /// op.perShareResultBlock = { metadata, result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var perShareResultBlock: ((Share.Metadata, Result<Share, any Error>) -> Void)?
    /// Called once at the end: success, `partialFailure` when some share failed, or the error
    /// that failed the whole request.
    ///
    /// ```swift
    /// op.acceptSharesResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var acceptSharesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older per-share block.
    public var perShareCompletionBlock: ((Share.Metadata, Share?, (any Error)?) -> Void)?
    /// CloudKit's older final block.
    public var acceptSharesCompletionBlock: (((any Error)?) -> Void)?

    /// An operation that accepts `shareMetadatas`, as `CKAcceptSharesOperation(shareMetadatas:)`.
    ///
    /// ```swift
    /// let op = AcceptSharesOperation(shareMetadatas: [metadata])
    /// ```
    public convenience init(shareMetadatas: [Share.Metadata]) {
        self.init()
        self.shareMetadatas = shareMetadatas
    }

    /// An operation without shares yet (set ``shareMetadatas``).
    ///
    /// ```swift
    /// let op = AcceptSharesOperation()
    /// op.shareMetadatas = [metadata]
    /// ```
    public override init() {
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let metadatas = shareMetadatas ?? []
        var failed: [String] = []
        for (index, metadata) in metadatas.enumerated() {
            if isCancelled { return StratusError.cancelled("AcceptSharesOperation", completed: index) }
            do {
                guard let url = metadata.share.url else {
                    throw StratusError(.invalidArguments, "share '\(metadata.share.recordID.recordName)' of the metadata has no URL; fetch the metadata with FetchShareMetadataOperation", recordID: metadata.share.recordID)
                }
                let share = try withRetry { try ShareInvitation(url: url, engine: engine, context: context).accept() }
                perShareResultBlock?(metadata, .success(share))
                perShareCompletionBlock?(metadata, share, nil)
            } catch let error as StratusError where !error.isTransient {
                failed.append("\(metadata.share.recordID.recordName): \(error.code)")
                perShareResultBlock?(metadata, .failure(error))
                perShareCompletionBlock?(metadata, nil, error)
            }
        }
        guard !failed.isEmpty else { return nil }
        return StratusError(.partialFailure, "\(failed.count) of \(metadatas.count) share(s) were not accepted: \(failed.joined(separator: ", "))")
    }

    override func complete(with error: StratusError?) {
        acceptSharesResultBlock?(error.map { .failure($0) } ?? .success(()))
        acceptSharesCompletionBlock?(error)
    }
}
