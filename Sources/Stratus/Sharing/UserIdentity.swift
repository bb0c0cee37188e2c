import Foundation

/// Who a user is, as `CKUserIdentity`: a user record ID, how to look the user up, and a name.
///
/// A share's participants carry one (``Share/Participant/userIdentity``).
///
/// ```swift
/// let bob = UserIdentity(userRecordID: Record.ID(recordName: "_bob"), nameComponents: PersonNameComponents(givenName: "Bob"))
/// let participant = Share.Participant(userIdentity: bob)
/// ```
public final class UserIdentity: NSObject, Sendable {
    /// The user's record ID (a user record name in the default zone), when known.
    ///
    /// ```swift
    /// let name = share.owner.userIdentity.userRecordID?.recordName
    /// ```
    public let userRecordID: Record.ID?
    /// How the user was looked up (an email address, a phone number or a user record ID).
    ///
    /// ```swift
    /// print(participant.userIdentity.lookupInfo?.emailAddress ?? "-")
    /// ```
    public let lookupInfo: LookupInfo?
    /// The user's name, when known.
    ///
    /// ```swift
    /// print(participant.userIdentity.nameComponents?.givenName ?? "someone")
    /// ```
    public let nameComponents: PersonNameComponents?
    /// Whether the user has an account: true for every user Stratus names by a user record.
    ///
    /// ```swift
    /// if !participant.userIdentity.hasiCloudAccount { print("invite by email") }
    /// ```
    public let hasiCloudAccount: Bool
    /// The identifiers of the user's contacts: always empty on Linux, which has no Contacts.
    ///
    /// ```swift
    /// let known = !participant.userIdentity.contactIdentifiers.isEmpty   // false on Linux
    /// ```
    public let contactIdentifiers: [String]

    /// An identity; `hasiCloudAccount` is true when a user record ID is given.
    ///
    /// ```swift
    /// let ada = UserIdentity(userRecordID: Record.ID(recordName: "_ada"))
    /// ```
    public init(userRecordID: Record.ID? = nil, lookupInfo: LookupInfo? = nil, nameComponents: PersonNameComponents? = nil) {
        self.userRecordID = userRecordID
        self.lookupInfo = lookupInfo ?? userRecordID.map { LookupInfo(userRecordID: $0) }
        self.nameComponents = nameComponents
        self.hasiCloudAccount = userRecordID != nil
        self.contactIdentifiers = []
        super.init()
    }

    /// How to find a user, as `CKUserIdentity.LookupInfo` (``UserIdentityLookupInfo``).
    ///
    /// ```swift
    /// let info = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
    /// ```
    public typealias LookupInfo = UserIdentityLookupInfo

    init(userRecordID: Record.ID?, lookupInfo: LookupInfo?, nameComponents: PersonNameComponents?, hasiCloudAccount: Bool) {
        self.userRecordID = userRecordID
        self.lookupInfo = lookupInfo
        self.nameComponents = nameComponents
        self.hasiCloudAccount = hasiCloudAccount
        self.contactIdentifiers = []
        super.init()
    }
}

/// How to find a user, as `CKUserIdentity.LookupInfo`: an email address, a phone number or
/// a user record ID.
///
/// ```swift
/// let info = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
/// ```
///
/// A top-level class, so that `NSKeyedArchiver` can name it (a nested class cannot be archived
/// in swift-corelibs-foundation); `UserIdentity.LookupInfo` names it as CloudKit does.
public final class UserIdentityLookupInfo: NSObject, Sendable {
    /// The email address to look the user up by.
    ///
    /// ```swift
    /// let email = participant.userIdentity.lookupInfo?.emailAddress
    /// ```
    public let emailAddress: String?
    /// The phone number to look the user up by.
    ///
    /// ```swift
    /// let phone = participant.userIdentity.lookupInfo?.phoneNumber
    /// ```
    public let phoneNumber: String?
    /// The user record ID to look the user up by.
    ///
    /// ```swift
    /// let id = participant.userIdentity.lookupInfo?.userRecordID
    /// ```
    public let userRecordID: Record.ID?

    /// Looks a user up by email address.
    ///
    /// ```swift
    /// let info = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
    /// ```
    public init(emailAddress: String) {
        self.emailAddress = emailAddress
        self.phoneNumber = nil
        self.userRecordID = nil
    }

    /// Looks a user up by phone number.
    ///
    /// ```swift
    /// let info = UserIdentity.LookupInfo(phoneNumber: "+15555550100")
    /// ```
    public init(phoneNumber: String) {
        self.emailAddress = nil
        self.phoneNumber = phoneNumber
        self.userRecordID = nil
    }

    /// Looks a user up by user record ID.
    ///
    /// ```swift
    /// let info = UserIdentity.LookupInfo(userRecordID: Record.ID(recordName: "_bob"))
    /// ```
    public init(userRecordID: Record.ID) {
        self.emailAddress = nil
        self.phoneNumber = nil
        self.userRecordID = userRecordID
    }

    init(emailAddress: String?, phoneNumber: String?, userRecordID: Record.ID?) {
        self.emailAddress = emailAddress
        self.phoneNumber = phoneNumber
        self.userRecordID = userRecordID
    }

    /// Whether `object` is a lookup of the same address or ID: lookups are values, as
    /// CloudKit's are, so one made again finds its entry in a dictionary keyed by lookups
    /// (what `userIdentityDiscoveredBlock` and `perShareParticipantResultBlock` hand back).
    ///
    /// ```swift
    /// UserIdentity.LookupInfo(emailAddress: "bob@example.com") == UserIdentity.LookupInfo(emailAddress: "bob@example.com")   // true
    /// ```
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UserIdentityLookupInfo else { return false }
        return emailAddress == other.emailAddress && phoneNumber == other.phoneNumber && userRecordID == other.userRecordID
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(emailAddress)
        hasher.combine(phoneNumber)
        hasher.combine(userRecordID)
        return hasher.finalize()
    }
}
