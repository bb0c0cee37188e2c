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

/// A participant of a share as the share index keeps it: by user record name, whether they
/// accepted, and whether they may write. The core reads the share record to decide what a
/// participant reaches; engines whose database enforces identities itself (PostgreSQL's
/// row-level security) read these to let an accepted participant's role reach the shared rows.
///
/// ```swift
/// let member = ShareIndexMember(userRecordName: "_5e1b…", isAccepted: true, mayWrite: false)
/// ```
@_spi(StratusEngine)
public struct ShareIndexMember: Hashable, Sendable {
    /// The participant's user record name.
    public var userRecordName: String
    /// Whether the participant accepted the share; a pending one reaches only the share.
    public var isAccepted: Bool
    /// Whether the participant's permission is `.readWrite`.
    public var mayWrite: Bool

    public init(userRecordName: String, isAccepted: Bool, mayWrite: Bool) {
        self.userRecordName = userRecordName
        self.isAccepted = isAccepted
        self.mayWrite = mayWrite
    }
}

/// What the share index holds of one share, read from the share record's JSON extras: what
/// an engine's upgrade step indexes for the shares an earlier version stored without an index.
///
/// ```swift
/// if let indexing = ShareIndexing(shareExtras: decoded.jsonExtras) {
///     insert(owner, zoneName, shareName, indexing.token, indexing.rootRecordName, indexing.members)
/// }
/// ```
@_spi(StratusEngine)
public struct ShareIndexing: Hashable, Sendable {
    /// The share's URL token.
    public var token: String
    /// The root of a record-level share; `nil` for a zone-wide share.
    public var rootRecordName: String?
    /// The participants the index names (``ShareIndexMember``).
    public var members: [ShareIndexMember]

    /// The index entry of a share record whose stored JSON extras are `extras`; `nil` when they
    /// hold no URL token (a share record the store never saved as a share, such as one an
    /// import of an earlier version restored without its `shortGUID`, which gets one at its
    /// owner's next save).
    public init?(shareExtras extras: Record.JSONExtras) {
        let share = StoredShare(extras)
        guard let token = share.shortGUID else { return nil }
        self.token = token
        rootRecordName = share.rootRecordName
        members = share.indexedMembers
    }
}

/// An accepted participant of a share, as the share index holds it: the share's zone and
/// record name, its root (`nil` for a zone-wide share), and the participant's user record name.
///
/// ```swift
/// for acceptance in try transaction.subscribedShareMembers(inZone: "Lists") {
///     print(acceptance.member, acceptance.rootRecordName ?? "the whole zone")
/// }
/// ```
@_spi(StratusEngine)
public struct ShareIndexAcceptance: Hashable, Sendable {
    public var zoneName: String
    public var shareRecordName: String
    /// The root of a record-level share; `nil` for a zone-wide share.
    public var rootRecordName: String?
    /// The participant's user record name.
    public var member: String

    public init(zoneName: String, shareRecordName: String, rootRecordName: String?, member: String) {
        self.zoneName = zoneName
        self.shareRecordName = shareRecordName
        self.rootRecordName = rootRecordName
        self.member = member
    }
}

extension RecordWriteTransaction {
    /// An engine without a share index has no participants to tell.
    @_spi(StratusEngine) public func subscribedShareMembers(inZone zoneName: String) throws -> [ShareIndexAcceptance] { [] }

    /// An engine without a share index refuses to store a share's entry.
    @_spi(StratusEngine) public func indexShare(_ shareRecordName: String, zoneName: String, token: String, rootRecordName: String?, members: [ShareIndexMember]) throws {
        throw StratusError(.internalError, "this store's engine (\(type(of: self))) keeps no share index, so it cannot store shares")
    }

    @_spi(StratusEngine) public func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws {}

    /// An engine without a share index has no hierarchies to keep track of.
    @_spi(StratusEngine) public func shareRoots(inZone zoneName: String) throws -> Set<String> { [] }

    @_spi(StratusEngine) public func childRecords(of parentNames: [String], inZone zoneID: RecordZone.ID) throws -> [(parent: String, name: String, recordType: String)] { [] }

    @_spi(StratusEngine) public func recordHierarchyMoves(_ moves: [HierarchyMove]) throws {
        throw StratusError(.internalError, "this store's engine (\(type(of: self))) keeps no share index, so it keeps no hierarchy moves")
    }

    @_spi(StratusEngine) public func recordTombstoneRoots(_ deletions: [HierarchyMove]) throws {
        throw StratusError(.internalError, "this store's engine (\(type(of: self))) keeps no share index, so it keeps no hierarchies of deleted records")
    }
}

extension StorageEngine {
    @_spi(StratusEngine) public func indexedShare(token: String, storageContainer: String) throws -> ShareIndexEntry? { nil }

    @_spi(StratusEngine) public func indexedShares(acceptedBy member: String, storageContainer: String) throws -> [ShareIndexEntry] { [] }
}
