extension Record {
    /// The record types of CloudKit's own records, as `CKRecord.SystemType`.
    ///
    /// ```swift
    /// let isUserRecord = record.recordType == Record.SystemType.userRecord
    /// ```
    public enum SystemType {
        /// `Users`: the record type of user records, as `CKRecord.SystemType.userRecord`.
        ///
        /// User records are in the public database, named by the user's record name
        /// (``Container/userRecordID()``) in the default zone: their user may store fields on
        /// them and save them, and others may read them (the `Users` type's grants,
        /// ``ContainerSchema/defaultUsersRecordType``). No save creates one.
        ///
        /// ```swift
        /// let users = Query(recordType: Record.SystemType.userRecord)
        /// ```
        public static let userRecord: Record.RecordType = ContainerSchema.usersRecordType

        /// `cloudkit.share`: the record type of share records, as `CKRecord.SystemType.share`.
        /// Stratus does not implement sharing and makes no share records; an import with
        /// `--keep-system-records` (``RecordImporter/Options/writesSystemRecords``) keeps
        /// CloudKit's, which a change feed may then hand out.
        ///
        /// ```swift
        /// guard record.recordType != Record.SystemType.share else { continue }
        /// ```
        public static let share: Record.RecordType = "cloudkit.share"
    }
}
