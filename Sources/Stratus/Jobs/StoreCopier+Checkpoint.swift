extension StoreCopier {
    /// Whether `checkpoint` was made by a copy between these two stores: what ``run(checkpointStore:progress:)``
    /// goes on from (it refuses another).
    ///
    /// ```swift
    /// if let saved = try file.load(), copier.continues(saved) { print("going on from \(file.path)") }
    /// ```
    public func continues(_ checkpoint: Checkpoint) -> Bool {
        (try? source.storeIdentifier) == checkpoint.sourceIdentifier && (try? destination.storeIdentifier) == checkpoint.destinationIdentifier
    }

    /// How far a ``StoreCopier`` got: which stores it copies, whether the schemas are copied, how
    /// far it went through the source's zones (in ``ZoneKey`` order) and which of them it could
    /// not copy whole, and the last record copied in the zone it was in.
    ///
    /// Its size does not grow with the zones copied (only with those that failed, and those the
    /// source gained behind the copy's place while it was stopped), so that saving it costs the
    /// same after the millionth zone as after the first.
    ///
    /// ```swift
    /// if let checkpoint = try store.load() { print("copied up to", checkpoint.zonesCopiedThrough?.description ?? "no zone yet") }
    /// ```
    public struct Checkpoint: Sendable, Hashable, Codable {
        /// Where the copy is inside a zone: every record of the types before `recordType` (in
        /// name order) and of `recordType` up to `recordName` is copied.
        public struct Position: Sendable, Hashable, Codable {
            /// The zone being copied.
            public var zone: ZoneKey
            /// The record type being copied; the types before it (in name order) are copied.
            public var recordType: String
            /// The last record of ``recordType`` copied.
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
        /// The last zone, in ``ZoneKey`` order (the order a copy goes through zones in), that the
        /// copy went past: every zone up to it is copied whole, except those in ``zonesNotCopied``.
        public var zonesCopiedThrough: ZoneKey?
        /// Zones up to ``zonesCopiedThrough`` that could not be copied whole (a record failed), or
        /// that the source gained after a run had passed their place in the order (a run that
        /// goes on lists those the destination lacks before it copies them): a later run copies
        /// them again.
        public var zonesNotCopied: [ZoneKey] = []
        /// Zones copied whole as a checkpoint of an earlier version lists them (one entry per zone,
        /// in the order they were copied); a copy that goes on from such a checkpoint keeps the
        /// list as it is and records its own progress in ``zonesCopiedThrough``.
        public var zonesCopied: [ZoneKey] = []
        /// Where the copy is in the zone it was copying, if any.
        public var position: Position?

        /// A checkpoint of a copy that has copied nothing yet.
        public init(sourceIdentifier: String, destinationIdentifier: String) {
            self.sourceIdentifier = sourceIdentifier
            self.destinationIdentifier = destinationIdentifier
        }

        /// Decodes a checkpoint, also one written before ``zonesCopiedThrough`` (which lists every
        /// zone copied in ``zonesCopied``).
        public init(from decoder: any Decoder) throws {
            let values = try decoder.container(keyedBy: CodingKeys.self)
            sourceIdentifier = try values.decode(String.self, forKey: .sourceIdentifier)
            destinationIdentifier = try values.decode(String.self, forKey: .destinationIdentifier)
            schemasCopied = try values.decodeIfPresent(Bool.self, forKey: .schemasCopied) ?? false
            zonesCopiedThrough = try values.decodeIfPresent(ZoneKey.self, forKey: .zonesCopiedThrough)
            zonesNotCopied = try values.decodeIfPresent([ZoneKey].self, forKey: .zonesNotCopied) ?? []
            zonesCopied = try values.decodeIfPresent([ZoneKey].self, forKey: .zonesCopied) ?? []
            position = try values.decodeIfPresent(Position.self, forKey: .position)
        }

        /// Whether the checkpoint says every record of `zone` is copied.
        ///
        /// ```swift
        /// let left = zones.filter { !checkpoint.isCopied($0) }
        /// ```
        public func isCopied(_ zone: ZoneKey) -> Bool {
            if let through = zonesCopiedThrough, zone <= through, !zonesNotCopied.contains(zone) { return true }
            return zonesCopied.contains(zone)
        }
    }

    /// Keeps a store copy's checkpoint between runs, so that a copy stopped by a crash, a kill or
    /// ``StoreCopier/cancel()`` goes on where it stopped.
    ///
    /// The copier saves a checkpoint before it writes anything, then as it goes: after a batch
    /// or a zone once ``StoreCopier/checkpointInterval`` has passed since the last save, when it
    /// stops (a cancel, an error) and when every zone is copied. A run after a kill copies again
    /// what was written since the last save (records are written as they are, so the copy ends
    /// the same). It never removes a checkpoint: after a complete copy the checkpoint says every
    /// zone is copied, so that a run with it again (after a stop during ``StoreCopier/compare()``)
    /// copies nothing. Remove it once the comparison found the stores equal. ``CopyCheckpointFile``
    /// (the `stratus copy --checkpoint` file) is one.
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
