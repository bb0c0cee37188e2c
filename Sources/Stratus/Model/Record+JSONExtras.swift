import Foundation

extension Record {
    /// What a record's CloudKit Web Services JSON held that Stratus's model has no place for,
    /// kept as JSON text so that an export gives the record back as it came.
    ///
    /// CloudKit's answers carry more than a record's values: `pluginFields`, `expirationTime`,
    /// `"deleted": false`, a `share`, a zone's `zoneType`, the `deviceID` of `created` and
    /// `modified`, references with `"action": "VALIDATE"` or a `zoneID`, locations with some
    /// members only. A reader of record JSON keeps each here; a writer puts each back. Nothing
    /// here changes what the record means to Stratus: queries, references and saves work on
    /// the typed values.
    ///
    /// A kept field (``fields``) is dropped when the field is set, and what describes the
    /// system fields (``createdMembers``, ``modifiedMembers``, ``absentKeys``) when a save gives
    /// the record new ones: they then no longer describe the record.
    ///
    /// ```swift
    /// let extras = record.jsonExtras
    /// print(extras.members["pluginFields"] ?? "-")     // {}
    /// ```
    public struct JSONExtras: Hashable, Sendable {
        /// Members of the record object besides those Stratus reads (`pluginFields`,
        /// `expirationTime`, `share`, `"deleted": false`, …), by key, as JSON text.
        public var members: [String: String] = [:]
        /// Members of the record's `zoneID` besides `zoneName` and `ownerRecordName` (`zoneType`),
        /// by key, as JSON text.
        public var zoneIDMembers: [String: String] = [:]
        /// The `ownerRecordName` the input gave, when it is not the name the store writes for
        /// the record's zone (an owner imported as the current user's).
        public var ownerRecordName: String?
        /// Members of `created` besides `timestamp` and `userRecordName` (`deviceID`), as JSON text.
        public var createdMembers: [String: String] = [:]
        /// Members of `modified` besides `timestamp` and `userRecordName` (`deviceID`), as JSON text.
        public var modifiedMembers: [String: String] = [:]
        /// Members the record object did not have, which a writer would otherwise write:
        /// `zoneID`, `zoneID.ownerRecordName`, `created`, `created.timestamp`,
        /// `created.userRecordName`, `modified` (and its two), `recordChangeTag`, `fields`.
        public var absentKeys: Set<String> = []
        /// Fields whose JSON a writer could not give back from their typed value (a reference
        /// with `VALIDATE` or a `zoneID`, a location with some members only, `ENCRYPTED_BYTES`
        /// that are not base64), each the whole `{"value": …, "type": …}` object as JSON text.
        public var fields: [String: String] = [:]

        /// Nothing kept.
        public init() {}

        /// Whether nothing is kept.
        public var isEmpty: Bool {
            members.isEmpty && zoneIDMembers.isEmpty && ownerRecordName == nil && createdMembers.isEmpty && modifiedMembers.isEmpty
                && absentKeys.isEmpty && fields.isEmpty
        }

        /// The keys of ``absentKeys`` that describe system fields.
        static let systemFieldKeys: Set<String> = [
            "created", "created.timestamp", "created.userRecordName", "modified", "modified.timestamp", "modified.userRecordName", "recordChangeTag",
        ]
    }
}
