extension Record {
    /// The record types of CloudKit's own records, as `CKRecord.SystemType`.
    ///
    /// ```swift
    /// let me = try await container.publicCloudDatabase.record(for: try await container.userRecordID())
    /// print(me.recordType == Record.SystemType.userRecord)   // true
    /// ```
    public enum SystemType {
        /// `Users`: the record type of user records, as `CKRecord.SystemType.userRecord`.
        ///
        /// Every user has one in the public database, named by the user's record name
        /// (``Container/userRecordID()``) in the default zone, empty at first: its user may
        /// store fields on it and save it, and others may read it (the `Users` type's grants,
        /// ``ContainerSchema/defaultUsersRecordType``). As in CloudKit, no save creates one for
        /// another user; Stratus makes a user's own when that user first fetches it (or saves
        /// it), so another user's that was never made is not found (`unknownItem`).
        ///
        /// ```swift
        /// let me = try await container.publicCloudDatabase.record(for: try await container.userRecordID())
        /// me["nickname"] = "Ada"
        /// try await container.publicCloudDatabase.save(me)
        /// ```
        public static let userRecord: Record.RecordType = ContainerSchema.usersRecordType

        /// `cloudkit.share`: the record type of share records, as `CKRecord.SystemType.share`.
        /// A ``Share`` is a record of this type; fetches, queries and change feeds hand such
        /// records back as `Share`s. An import with `--keep-system-records`
        /// (``RecordImporter/Options/writesSystemRecords``) keeps CloudKit's as they came.
        ///
        /// ```swift
        /// if let share = record as? Share { print(share.participants.count) }
        /// guard record.recordType != Record.SystemType.share else { continue }
        /// ```
        public static let share: Record.RecordType = "cloudkit.share"
    }
}
