/// READ in the public database, record by record, for operations that hand out stored records
/// (fetches, change feeds): a record the caller's roles may not read fails alone, with
/// `permissionFailure` (`notAuthenticated` for a caller who is not signed in). Other databases
/// are the caller's own, and pass.
///
/// The environment's schema is read once, when the first public record is checked.
///
/// ```swift
/// var reads = RecordReadCheck(engine: engine, context: context)
/// if let denied = try reads.denial(of: record) { report(record.recordID, .failure(denied)) }
/// ```
struct RecordReadCheck {
    let engine: any StorageEngine
    let context: DatabaseContext
    private var schema: ContainerSchema?
    private var accessByType: [String: RecordAccess] = [:]

    init(engine: any StorageEngine, context: DatabaseContext) {
        self.engine = engine
        self.context = context
    }

    /// The error of handing `record` to the caller, or `nil` when they may read it.
    mutating func denial(of record: Record) throws -> StratusError? {
        guard context.scope == .public else { return nil }
        return try access(record.recordType).denial(.read, recordID: record.recordID, recordType: record.recordType, creator: record.systemFields.creatorUserRecordID)
    }

    /// Whether the caller may learn of deletions of records of `recordType`: when they may read
    /// some of its records (all of them, or their own).
    mutating func mayReadDeletions(of recordType: String) throws -> Bool {
        guard context.scope == .public else { return true }
        let access = try access(recordType)
        return access.everyRecord.contains(.read) || (context.userRecordName != nil && access.ownRecords.contains(.read))
    }

    private mutating func access(_ recordType: String) throws -> RecordAccess {
        if let known = accessByType[recordType] { return known }
        if schema == nil { schema = try engine.fetchSchema(storageContainer: context.storageContainer) }
        let access = RecordAccess(schema?.recordType(recordType), context: context)
        accessByType[recordType] = access
        return access
    }
}
