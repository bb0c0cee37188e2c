import Foundation

/// A place in a change history, like `CKServerChangeToken`: pass it back to get what changed
/// since.
///
/// A zone token (from ``FetchRecordZoneChangesOperation``) is a place in one zone's history;
/// a database token (from ``FetchDatabaseChangesOperation``) is a place in a database's zone
/// history. Tokens are immutable and serialize to short text, so a cron job can keep one in a
/// file:
///
/// ```swift
/// try token.serialized.write(toFile: "photos.token", atomically: true, encoding: .utf8)
/// // … next run …
/// let saved = try ServerChangeToken(serialized: String(contentsOfFile: "photos.token", encoding: .utf8))
/// ```
///
/// Like `CKServerChangeToken`, a token is an `NSObject` that archives with `NSSecureCoding`,
/// so sync code that keeps tokens with `NSKeyedArchiver` works unchanged:
///
/// ```swift
/// let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
/// let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data)
/// ```
///
/// Two tokens are equal when they name the same place. A token used with another zone or
/// database, from before the retained history, or from a zone that was deleted and created
/// again fails with `changeTokenExpired`: start again without a token.
public final class ServerChangeToken: NSObject, Codable, Sendable {
    /// The container whose changes the token follows.
    public let containerIdentifier: String
    /// The database whose changes the token follows.
    public var databaseScope: Database.Scope { codedScope.scope }
    private let codedScope: Database.Scope.Coded
    /// Whose database: empty for the public database, the user's record name otherwise (the
    /// login name in tokens of versions before user record names).
    let owner: String
    /// The environment, when production (tokens of development, and of versions before
    /// environments, have none).
    let environment: Container.Environment?
    /// The zone whose history this is a place in; `nil` for a database token.
    public let zoneID: RecordZone.ID?
    let position: ChangePosition
    /// `true` for a place in a user's notification feed (``FetchNotificationChangesOperation``),
    /// which spans the container's databases; absent from other tokens.
    let notificationFeed: Bool?
    /// For a database token of a fetch that began without a token: the database's sequence
    /// when it began. Deletions at or before it are of zones the client never had, and are
    /// not reported (see ``FetchDatabaseChangesOperation``). Absent once the token is past it.
    let freshThrough: Int64?
    /// For a zone token a change-feed pipeline keeps as its position: the zone's position when
    /// the job's first run began, where every resumed run ends too, so that the job's own saves
    /// into the zone (after it) are not read back as changes. Absent from tokens handed to
    /// blocks and from positions kept by versions before it, which read to the zone's end.
    let readThrough: ChangePosition?

    static let prefix = "stk1_"

    private enum CodingKeys: String, CodingKey {
        case containerIdentifier, codedScope = "databaseScope", owner, environment, zoneID, position, notificationFeed, freshThrough, readThrough
    }

    init(zoneID: RecordZone.ID?, context: DatabaseContext, position: ChangePosition, freshThrough: Int64? = nil, readThrough: ChangePosition? = nil) {
        self.containerIdentifier = context.containerIdentifier
        self.codedScope = Database.Scope.Coded(context.scope)
        self.owner = context.storageOwner
        self.environment = context.environment == .development ? nil : context.environment
        self.zoneID = zoneID.map(context.canonical)
        self.position = position
        self.notificationFeed = nil
        self.freshThrough = freshThrough
        self.readThrough = readThrough
        super.init()
    }

    /// A place in a notification feed. Its ``databaseScope`` is `.private`: the feed spans the
    /// container's databases.
    init(feed: NotificationFeedID, position: ChangePosition) {
        let (identifier, environment) = Container.Environment.split(storageContainer: feed.containerIdentifier)
        self.containerIdentifier = identifier
        self.environment = environment == .development ? nil : environment
        self.codedScope = Database.Scope.Coded(.private)
        self.owner = feed.subscriber
        self.zoneID = nil
        self.position = position
        self.notificationFeed = true
        self.freshThrough = nil
        self.readThrough = nil
        super.init()
    }

    private init(copying token: ServerChangeToken) {
        self.containerIdentifier = token.containerIdentifier
        self.codedScope = token.codedScope
        self.owner = token.owner
        self.environment = token.environment
        self.zoneID = token.zoneID
        self.position = token.position
        self.notificationFeed = token.notificationFeed
        self.freshThrough = token.freshThrough
        self.readThrough = token.readThrough
        super.init()
    }

    /// The token as URL- and shell-safe text, for ``init(serialized:)`` in any process.
    ///
    /// ```swift
    /// print(token.serialized)   // stk1_eyJjb250YWluZXJJZGVudGlmaWVy…
    /// ```
    public var serialized: String { OpaqueText.encode(self, prefix: Self.prefix) }

    /// Reads a token from ``serialized`` text (surrounding whitespace is ignored).
    ///
    /// ```swift
    /// let token = try ServerChangeToken(serialized: "stk1_eyJ…")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the text is not a change token.
    public convenience init(serialized text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(Self.prefix) else {
            throw StratusError(.invalidArguments, "'\(trimmed.prefix(20))…' is not a Stratus change token (tokens start with \(Self.prefix))")
        }
        guard let token: ServerChangeToken = OpaqueText.decode(trimmed, prefix: Self.prefix) else {
            throw StratusError(.invalidArguments, "the change token is damaged (it does not decode); copy it whole, or start again without a token")
        }
        self.init(copying: token)
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? ServerChangeToken else { return false }
        return containerIdentifier == other.containerIdentifier && databaseScope == other.databaseScope && owner == other.owner
            && environment == other.environment && zoneID == other.zoneID && position == other.position && notificationFeed == other.notificationFeed && freshThrough == other.freshThrough
            && readThrough == other.readThrough
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(containerIdentifier)
        hasher.combine(databaseScope)
        hasher.combine(owner)
        hasher.combine(environment)
        hasher.combine(zoneID)
        hasher.combine(position)
        return hasher.finalize()
    }

    public override var description: String {
        let history = notificationFeed == true ? "notifications" : zoneID.map { "zone \($0.zoneName)" } ?? "database"
        return "ServerChangeToken(\(history) at \(position.sequence))"
    }

    /// The engine position, once the token is known to belong to `zoneID` (a zone token) or to
    /// the database itself (`nil`) of `context`.
    func position(for zoneID: RecordZone.ID?, in context: DatabaseContext) throws(StratusError) -> ChangePosition {
        let expected = zoneID.map(context.canonical)
        let mine = "\(containerIdentifier)/\(databaseScope.name)" + (owner.isEmpty ? "" : " (\(owner))")
        func expired(_ reason: String) -> StratusError {
            var error = StratusError(.changeTokenExpired, "\(reason); fetch again without a token", zoneID: zoneID)
            error.underlyingError = Mismatch(
                tokenHistory: history,
                requestedHistory: Self.describeHistory(zone: expected, scope: context.scope, owner: context.storageOwner, environment: context.environment, container: context.containerIdentifier))
            return error
        }
        guard notificationFeed != true else {
            throw expired("a notification token cannot fetch changes of a zone or database")
        }
        // Tokens printed before user record names name the user by login; the store moved
        // that user's data to their record name, at the same positions.
        let sameOwner = owner == context.storageOwner || (!owner.isEmpty && owner == context.userName && context.storageOwner == context.userRecordName)
        guard containerIdentifier == context.containerIdentifier, databaseScope == context.scope, sameOwner else {
            throw expired("the change token belongs to the database \(mine), not to \(context)")
        }
        guard (environment ?? .development) == context.environment else {
            throw expired("the change token belongs to the \((environment ?? .development)) environment, not to \(context.environment)")
        }
        switch (self.zoneID, expected) {
        case (nil, nil): break
        case (let mine?, let wanted?) where mine == wanted: break
        case (let mine?, let wanted?): throw expired("the change token belongs to zone '\(mine.zoneName)', not to '\(wanted.zoneName)'")
        case (nil, _?): throw expired("a database change token cannot fetch a zone's changes")
        case (let mine?, nil): throw expired("the change token belongs to zone '\(mine.zoneName)', not to the database's zone history")
        }
        return position
    }
}

extension ServerChangeToken {
    /// Why a token is no place in the history it was used with: it was made for another
    /// container, environment, database, user, zone or store. The `changeTokenExpired` error
    /// CloudKit code expects carries it as its ``StratusError/underlyingError``, so that a tool
    /// can tell a token used with the wrong options (use the right one; it is still good) from
    /// one that expired (start again without it).
    ///
    /// ```swift
    /// } catch let error as StratusError where error.underlyingError is ServerChangeToken.Mismatch {
    ///     print("this token is for another zone: \(error.underlyingError!)")
    /// }
    /// ```
    public struct Mismatch: Error, Sendable, CustomStringConvertible {
        /// The history the token is a place in: `zone Photos in the private database of user
        /// _9a1c… of container app`.
        public let tokenHistory: String
        /// The history it was used with, in the same words.
        public let requestedHistory: String
        /// Whether the token was made on another store, rather than for other options: no
        /// options reach that history from this store (it may be a store rebuilt in place).
        public var isFromAnotherStore = false

        public var description: String { "the token is a place in \(tokenHistory), not in \(requestedHistory)" }
    }

    /// The history this token is a place in, in the words of ``Mismatch``.
    var history: String {
        if notificationFeed == true {
            return "the notifications of user \(owner) of container \(containerIdentifier)" + ((environment ?? .development) == .development ? "" : " (\(environment ?? .development))")
        }
        return Self.describeHistory(zone: zoneID, scope: databaseScope, owner: owner, environment: environment ?? .development, container: containerIdentifier)
    }

    static func describeHistory(zone: RecordZone.ID?, scope: Database.Scope, owner: String, environment: Container.Environment, container: String) -> String {
        var text = zone.map { "zone \($0.zoneName)" + ($0.ownerName == RecordZone.ID.currentUserDefaultOwner ? "" : " of \($0.ownerName)") } ?? "the zone history"
        text += " in the \(scope.name) database"
        if !owner.isEmpty { text += " of user \(owner)" }
        text += " of container \(container)"
        if environment != .development { text += " (\(environment))" }
        return text
    }
}

extension DatabaseContext {
    /// The zone ID as the store keys it: the current user's own zones with the default owner
    /// name, so that `__defaultOwner__` and the user's record name mean the same zone.
    @_spi(StratusEngine) public func canonical(_ zoneID: RecordZone.ID) -> RecordZone.ID {
        zoneID.ownerName == userRecordName ? RecordZone.ID(zoneName: zoneID.zoneName) : zoneID
    }
}

extension ServerChangeToken {
    /// The feed position, once the token is known to be a place in `feed`.
    ///
    /// - Throws: `changeTokenExpired` for a zone or database token, or another user's or
    ///   container's feed.
    func notificationPosition(in feed: NotificationFeedID) throws(StratusError) -> ChangePosition {
        // As for change reads: a token of another history is still good for it, and says so.
        func mismatched(_ reason: String) -> StratusError {
            var error = StratusError(.changeTokenExpired, "\(reason); fetch again without a token")
            error.underlyingError = Mismatch(tokenHistory: history, requestedHistory: "\(feed)")
            return error
        }
        guard notificationFeed == true else {
            throw mismatched("a zone or database change token cannot fetch notifications")
        }
        guard (environment ?? .development).storageContainer(for: containerIdentifier) == feed.containerIdentifier, owner == feed.subscriber else {
            throw mismatched("the notification token belongs to the notifications of \(owner) in \(containerIdentifier), not to \(feed)")
        }
        return position
    }
}
