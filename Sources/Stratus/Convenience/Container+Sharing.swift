import Foundation

extension Container {
    /// What the share `url` tells the container's user, as `CKContainer.shareMetadata(for:)`.
    ///
    /// ```swift
    /// let metadata = try await container.shareMetadata(for: url)
    /// print(metadata.share[Share.SystemFieldKey.title] as? String ?? "", metadata.participantPermission)
    /// ```
    ///
    /// - Throws: `unknownItem` for a URL of no share of the container;
    ///   `participantMayNeedVerification` for a private share that does not name the user.
    public func shareMetadata(for url: URL, shouldFetchRootRecord: Bool = false) async throws -> Share.Metadata {
        let found = Collector<Result<Share.Metadata, any Error>>()
        try await sharedCloudDatabase.run { finish in
            let op = FetchShareMetadataOperation(shareURLs: [url])
            op.shouldFetchRootRecord = shouldFetchRootRecord
            op.perShareMetadataResultBlock = { _, result in found.append(result) }
            op.fetchShareMetadataResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        guard let result = found.items.first else { throw StratusError(.internalError, "no metadata for \(url.absoluteString)") }
        return try result.get()
    }

    /// Accepts a share for the container's user, as `CKContainer.accept(_:)`, and answers the
    /// share as stored; its records then appear in ``sharedCloudDatabase``.
    ///
    /// ```swift
    /// let share = try await container.accept(try await container.shareMetadata(for: url))
    /// let zones = try await container.sharedCloudDatabase.allRecordZones()
    /// ```
    ///
    /// - Throws: `unknownItem` for a share deleted since; `participantMayNeedVerification` for
    ///   a private share that does not name the user.
    @discardableResult
    public func accept(_ metadata: Share.Metadata) async throws -> Share {
        let accepted = Collector<Result<Share, any Error>>()
        try await sharedCloudDatabase.run { finish in
            let op = AcceptSharesOperation(shareMetadatas: [metadata])
            op.perShareResultBlock = { _, result in accepted.append(result) }
            op.acceptSharesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        guard let result = accepted.items.first else { throw StratusError(.internalError, "no result for share '\(metadata.share.recordID.recordName)'") }
        return try result.get()
    }
}
