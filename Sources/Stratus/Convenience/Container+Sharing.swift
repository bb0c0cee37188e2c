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

    /// What each share URL tells the container's user, as `CKContainer.shareMetadatas(for:)`:
    /// each URL's metadata, or its own error.
    ///
    /// ```swift
    /// let results = try await container.shareMetadatas(for: [url])
    /// if let metadata = try results[url]?.get() { try await container.accept(metadata) }
    /// ```
    ///
    /// - Throws: a failure of the request as a whole (the store cannot be reached); a URL of no
    ///   share of the container, or of a private share that does not name the user, fails in
    ///   its own result (`unknownItem`, `participantMayNeedVerification`).
    public func shareMetadatas(for urls: [URL], shouldFetchRootRecord: Bool = false) async throws -> [URL: Result<Share.Metadata, any Error>] {
        guard !urls.isEmpty else { return [:] }
        let found = Collector<(URL, Result<Share.Metadata, any Error>)>()
        try await sharedCloudDatabase.run { finish in
            let op = FetchShareMetadataOperation(shareURLs: urls)
            op.shouldFetchRootRecord = shouldFetchRootRecord
            op.perShareMetadataResultBlock = { url, result in found.append((url, result)) }
            op.fetchShareMetadataResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(found.items, uniquingKeysWith: { first, _ in first })
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

    /// Accepts several shares for the container's user, as `CKContainer.accept(_:)` with an
    /// array: each share as stored, or its own error.
    ///
    /// ```swift
    /// let results = try await container.accept([first, second])
    /// let accepted = results.values.compactMap { try? $0.get() }
    /// ```
    ///
    /// - Throws: a failure of the request as a whole (the store cannot be reached); each
    ///   share's own failure is its result.
    public func accept(_ metadatas: [Share.Metadata]) async throws -> [Share.Metadata: Result<Share, any Error>] {
        let accepted = Collector<(Share.Metadata, Result<Share, any Error>)>()
        try await sharedCloudDatabase.run { finish in
            let op = AcceptSharesOperation(shareMetadatas: metadatas)
            op.perShareResultBlock = { metadata, result in accepted.append((metadata, result)) }
            op.acceptSharesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(accepted.items, uniquingKeysWith: { first, _ in first })
    }

    /// What the share `url` tells the container's user, handed to `completionHandler`, as
    /// `CKContainer.fetchShareMetadata(with:completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchShareMetadata(with: url) { metadata, error in … }
    /// ```
    @preconcurrency public func fetchShareMetadata(with url: URL, completionHandler: @escaping @Sendable (Share.Metadata?, (any Error)?) -> Void) {
        let op = FetchShareMetadataOperation(shareURLs: [url])
        let found = Collector<Result<Share.Metadata, any Error>>()
        op.perShareMetadataResultBlock = { _, result in found.append(result) }
        op.fetchShareMetadataResultBlock = { final in Database.answer(item: found.items.first, final: final, completionHandler) }
        sharedCloudDatabase.add(op)
    }

    /// Accepts a share for the container's user and hands the share as stored to
    /// `completionHandler`, as `CKContainer.accept(_:completionHandler:)`.
    ///
    /// ```swift
    /// container.accept(metadata) { share, error in … }
    /// ```
    @preconcurrency public func accept(_ metadata: Share.Metadata, completionHandler: @escaping @Sendable (Share?, (any Error)?) -> Void) {
        let op = AcceptSharesOperation(shareMetadatas: [metadata])
        let accepted = Collector<Result<Share, any Error>>()
        op.perShareResultBlock = { _, result in accepted.append(result) }
        op.acceptSharesResultBlock = { final in Database.answer(item: accepted.items.first, final: final, completionHandler) }
        sharedCloudDatabase.add(op)
    }
}
