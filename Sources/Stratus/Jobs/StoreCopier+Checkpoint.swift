extension StoreCopier {
    /// How far a ``StoreCopier`` got: which stores it copies, whether the schemas are copied, which
    /// zones are copied whole, and the last record copied in the zone it was in.
    ///
    /// ```swift
    /// if let checkpoint = try store.load() { print(checkpoint.zonesCopied.count, "zones done") }
    /// ```
    public struct Checkpoint: Sendable, Hashable, Codable {
        /// Where the copy is inside a zone: every record of the types before `recordType` (in
        /// name order) and of `recordType` up to `recordName` is copied.
        public struct Position: Sendable, Hashable, Codable {
            public var zone: ZoneKey
            public var recordType: String
            public var recordName: String

            /// The position after `recordName` of `recordType` in `zone`.
            public init(zone: ZoneKey, recordType: String, recordName: String) {
                self.zone = zone
                self.recordType = recordType
                self.recordName = recordName
            }
        }

        /// The source store's identity: a checkpoint is only applied to the copy that made it.
        public var sourceIdentifier: String
        /// The destination store's identity.
        public var destinationIdentifier: String
        /// Whether every container's record type schemas are copied.
        public var schemasCopied = false
        /// The zones whose every record is copied.
        public var zonesCopied: [ZoneKey] = []
        /// Where the copy is in the zone it was copying, if any.
        public var position: Position?

        /// A checkpoint of a copy that has copied nothing yet.
        public init(sourceIdentifier: String, destinationIdentifier: String) {
            self.sourceIdentifier = sourceIdentifier
            self.destinationIdentifier = destinationIdentifier
        }
    }

    /// Keeps a store copy's checkpoint between runs, so that a copy stopped by a crash, a kill or
    /// ``StoreCopier/cancel()`` goes on where it stopped.
    ///
    /// The copier saves a checkpoint before it writes anything and after each batch it wrote. It
    /// never removes one: after a complete copy the checkpoint says every zone is copied, so that
    /// a run with it again (after a stop during ``StoreCopier/compare()``) copies nothing. Remove
    /// it once the comparison found the stores equal. The `stratus copy --checkpoint` file is one.
    ///
    /// ```swift
    /// final class MemoryCopyCheckpoint: StoreCopier.CheckpointStore {
    ///     var saved: StoreCopier.Checkpoint?
    ///     func load() throws -> StoreCopier.Checkpoint? { saved }
    ///     func save(_ checkpoint: StoreCopier.Checkpoint) throws { saved = checkpoint }
    /// }
    /// ```
    public protocol CheckpointStore: AnyObject {
        /// The checkpoint of an earlier run, or nil to start at the beginning.
        ///
        /// - Throws: when the checkpoint cannot be read.
        func load() throws -> Checkpoint?
        /// Replaces the checkpoint durably: after a crash the old or the new one is found.
        ///
        /// - Throws: when it cannot be written; the copy stops with that error.
        func save(_ checkpoint: Checkpoint) throws
    }
}
