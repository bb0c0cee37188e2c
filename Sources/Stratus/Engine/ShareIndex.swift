import Foundation

/// Where a share is kept, as an engine's share index finds it: in the private database of
/// `owner` (a user record name), in the owner's zone `zoneName`, under `shareRecordName`.
///
/// The index is how a URL or a participant finds a share without reading every private
/// database; the share record itself stays the truth of who may do what (the core reads it
/// and decides), so an entry left behind by a deleted zone reaches nothing.
///
/// ```swift
/// if let entry = try engine.indexedShare(token: token, storageContainer: context.storageContainer) {
///     print(entry.owner, entry.zoneName, entry.shareRecordName)
/// }
/// ```
@_spi(StratusEngine)
public struct ShareIndexEntry: Hashable, Sendable {
    public var owner: String
    public var zoneName: String
    public var shareRecordName: String

    public init(owner: String, zoneName: String, shareRecordName: String) {
        self.owner = owner
        self.zoneName = zoneName
        self.shareRecordName = shareRecordName
    }
}

extension RecordWriteTransaction {
    /// An engine without a share index refuses to store a share's entry.
    @_spi(StratusEngine) public func indexShare(_ shareRecordName: String, zoneName: String, token: String, members: [String]) throws {
        throw StratusError(.internalError, "this store's engine (\(type(of: self))) keeps no share index, so it cannot store shares")
    }

    @_spi(StratusEngine) public func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws {}
}

extension StorageEngine {
    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? { nil }

    @_spi(StratusEngine) public func indexedShares(member: String, storageContainer: String) throws -> [ShareIndexEntry] { [] }
}
