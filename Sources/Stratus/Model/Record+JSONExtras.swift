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
    /// the typed values, except that an empty list that came without an element type
    /// (``holdsUntypedEmptyList(_:)``) neither fixes nor conflicts with a field's type.
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
        // Almost every record keeps nothing: one optional reference (nil then) instead of seven
        // collections makes copying a record's state one retain, not seven.
        private var storage: Storage?

        private struct Members: Hashable {
            var members: [String: String] = [:]
            var zoneIDMembers: [String: String] = [:]
            var ownerRecordName: String?
            var createdMembers: [String: String] = [:]
            var modifiedMembers: [String: String] = [:]
            var absentKeys: Set<String> = []
            var fields: [String: String] = [:]

            var isEmpty: Bool {
                members.isEmpty && zoneIDMembers.isEmpty && ownerRecordName == nil && createdMembers.isEmpty && modifiedMembers.isEmpty
                    && absentKeys.isEmpty && fields.isEmpty
            }
        }

        // Copy-on-write: mutated only while uniquely referenced.
        private final class Storage: @unchecked Sendable {
            var contents: Members
            init(_ contents: Members) { self.contents = contents }
        }

        /// The contents, made unique for mutation in place.
        private mutating func uniqueStorage() -> Storage {
            if storage != nil && isKnownUniquelyReferenced(&storage) { return storage! }
            let unique = Storage(storage?.contents ?? Members())
            storage = unique
            return unique
        }

        /// One member, changed in place; emptied contents are dropped (nothing kept is `nil`).
        private subscript<Member>(modifying member: WritableKeyPath<Members, Member>) -> Member {
            get { (storage?.contents ?? Members())[keyPath: member] }
            _modify {
                let unique = uniqueStorage()
                defer { if unique.contents.isEmpty { storage = nil } }
                yield &unique.contents[keyPath: member]
            }
        }

        /// Members of the record object besides those Stratus reads (`pluginFields`,
        /// `expirationTime`, `share`, `"deleted": false`, …), by key, as JSON text.
        public var members: [String: String] {
            get { storage?.contents.members ?? [:] }
            _modify { yield &self[modifying: \.members] }
        }
        /// Members of the record's `zoneID` besides `zoneName` and `ownerRecordName` (`zoneType`),
        /// by key, as JSON text.
        public var zoneIDMembers: [String: String] {
            get { storage?.contents.zoneIDMembers ?? [:] }
            _modify { yield &self[modifying: \.zoneIDMembers] }
        }
        /// The `ownerRecordName` the input gave, when it is not the name the store writes for
        /// the record's zone (an owner imported as the current user's).
        public var ownerRecordName: String? {
            get { storage?.contents.ownerRecordName }
            _modify { yield &self[modifying: \.ownerRecordName] }
        }
        /// Members of `created` besides `timestamp` and `userRecordName` (`deviceID`), as JSON text.
        public var createdMembers: [String: String] {
            get { storage?.contents.createdMembers ?? [:] }
            _modify { yield &self[modifying: \.createdMembers] }
        }
        /// Members of `modified` besides `timestamp` and `userRecordName` (`deviceID`), as JSON text.
        public var modifiedMembers: [String: String] {
            get { storage?.contents.modifiedMembers ?? [:] }
            _modify { yield &self[modifying: \.modifiedMembers] }
        }
        /// Members the record object did not have, which a writer would otherwise write:
        /// `zoneID`, `zoneID.ownerRecordName`, `created`, `created.timestamp`,
        /// `created.userRecordName`, `modified` (and its two), `recordChangeTag`, `fields`.
        public var absentKeys: Set<String> {
            get { storage?.contents.absentKeys ?? [] }
            _modify { yield &self[modifying: \.absentKeys] }
        }
        /// Fields whose JSON a writer would not give back from their typed value (a reference
        /// with `VALIDATE`, a `zoneID` or no action, a location with some members only, bytes
        /// that are not padded base64, a value without a type, `UNKNOWN_LIST`, `isEncrypted`),
        /// each the whole `{"value": …, "type": …}` object as JSON text. For an asset field,
        /// which is written from its asset, the object without its `value` (`{"type":"ASSET"}`,
        /// `{}` when it had no type): a writer puts the value in front.
        public var fields: [String: String] {
            get { storage?.contents.fields ?? [:] }
            _modify { yield &self[modifying: \.fields] }
        }

        /// Nothing kept.
        public init() {}

        /// Whether the field `key` came as an empty list of no known element type: CloudKit's
        /// `{"value": [], "type": "UNKNOWN_LIST"}`, or `[]` without a type (kept in ``fields``).
        ///
        /// Such a list carries no type: saving it neither fixes the type of a field it creates
        /// (development creates none for it) nor conflicts with the list type a field has
        /// (``FieldValue`` gives the empty list an element type only because it must have one).
        ///
        /// ```swift
        /// record.jsonExtras.fields["tags"] = #"{"value":[],"type":"UNKNOWN_LIST"}"#
        /// print(record.jsonExtras.holdsUntypedEmptyList("tags"))   // true
        /// ```
        public func holdsUntypedEmptyList(_ key: String) -> Bool {
            guard let text = storage?.contents.fields[key], text.utf8.contains(UInt8(ascii: "[")) else { return false }
            return Self.judgeField(text) { cursor, type, value in
                guard value.kind == .array, cursor.isEmptyContainer(value) else { return false }
                return !type.isPresent || (type.kind == .string && cursor.stringEquals(type, "UNKNOWN_LIST"))
            }
        }

        /// Whether the field `key` came typed `NUMBER_INT64` or `NUMBER_DOUBLE` (or their lists):
        /// the value of a field CloudKit's schema declares `NUMBER` (kept in ``fields``).
        ///
        /// ```swift
        /// record.jsonExtras.fields["price"] = #"{"value":3,"type":"NUMBER_INT64"}"#
        /// print(record.jsonExtras.holdsNumberTypedValue("price"))   // true
        /// ```
        public func holdsNumberTypedValue(_ key: String) -> Bool {
            guard let text = storage?.contents.fields[key], text.contains("NUMBER_") else { return false }
            return Self.judgeField(text) { cursor, type, _ in
                type.kind == .string && ["NUMBER_INT64", "NUMBER_DOUBLE", "NUMBER_INT64_LIST", "NUMBER_DOUBLE_LIST"].contains { cursor.stringEquals(type, $0) }
            }
        }

        /// Reads a kept field's `{"value": …, "type": …}` object and hands `judge` its `type`
        /// and `value` members (each `.none` when absent); `false` when the text is no object.
        private static func judgeField(_ text: String, _ judge: (JSONCursor, _ type: JSONCursor.Token, _ value: JSONCursor.Token) -> Bool) -> Bool {
            var copy = text
            return copy.withUTF8 { bytes in
                guard let base = bytes.baseAddress else { return false }
                var cursor = JSONCursor(base: base, limit: bytes.count, isComplete: true, pos: 0)
                var type = JSONCursor.Token.none, value = JSONCursor.Token.none
                do throws(JSONCursor.Failure) {
                    guard try cursor.peek() == UInt8(ascii: "{"), try cursor.openObject() else { return false }
                    repeat {
                        let member = try cursor.scanKey()
                        let token = try cursor.scanValue()
                        if cursor.stringEquals(member, "type") { type = token } else if cursor.stringEquals(member, "value") { value = token }
                    } while try cursor.nextMember(close: UInt8(ascii: "}"), in: "a field")
                } catch {
                    return false
                }
                return judge(cursor, type, value)
            }
        }

        /// Whether nothing is kept.
        public var isEmpty: Bool { storage == nil }

        public static func == (lhs: JSONExtras, rhs: JSONExtras) -> Bool {
            lhs.storage === rhs.storage || lhs.storage?.contents == rhs.storage?.contents
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(storage?.contents ?? Members())
        }

        /// The keys of ``absentKeys`` that describe system fields.
        static let systemFieldKeys: Set<String> = [
            "created", "created.timestamp", "created.userRecordName", "modified", "modified.timestamp", "modified.userRecordName", "recordChangeTag",
        ]
    }
}
