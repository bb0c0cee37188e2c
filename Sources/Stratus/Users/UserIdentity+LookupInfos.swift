extension UserIdentity.LookupInfo {
    /// One lookup per email address, as `CKUserIdentity.LookupInfo.lookupInfos(withEmails:)`.
    ///
    /// ```swift
    /// let op = DiscoverUserIdentitiesOperation(userIdentityLookupInfos: UserIdentity.LookupInfo.lookupInfos(withEmails: ["bob@example.com"]))
    /// ```
    public static func lookupInfos(withEmails emails: [String]) -> [UserIdentity.LookupInfo] {
        emails.map { UserIdentity.LookupInfo(emailAddress: $0) }
    }

    /// One lookup per phone number, as `CKUserIdentity.LookupInfo.lookupInfos(withPhoneNumbers:)`.
    ///
    /// ```swift
    /// let infos = UserIdentity.LookupInfo.lookupInfos(withPhoneNumbers: ["+15550100100"])
    /// ```
    public static func lookupInfos(withPhoneNumbers phoneNumbers: [String]) -> [UserIdentity.LookupInfo] {
        phoneNumbers.map { UserIdentity.LookupInfo(phoneNumber: $0) }
    }

    /// One lookup per user record ID, as `CKUserIdentity.LookupInfo.lookupInfos(with:)`.
    ///
    /// ```swift
    /// let infos = UserIdentity.LookupInfo.lookupInfos(with: [bobID, carolID])
    /// ```
    public static func lookupInfos(with recordIDs: [Record.ID]) -> [UserIdentity.LookupInfo] {
        recordIDs.map { UserIdentity.LookupInfo(userRecordID: $0) }
    }
}
