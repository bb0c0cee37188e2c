import Foundation

/// A record checked for saving, with everything a save reads of it taken once: its values as
/// they were when it was checked, its field data size, and its values' stored form.
///
/// Every record is checked exactly once on its way to a store, where it is prepared: by
/// ``ModifyRecordsOperation`` for the records an app hands it, or by a producer that prepares
/// on its own thread (an importer reading on one core while the store writes on the other).
/// Changes made to the record after it was prepared are not saved by this preparation.
///
/// ```swift
/// let prepared = try PreparedSave(record)
/// let operation = ModifyRecordsOperation(preparedSaves: [prepared])
/// ```
package struct PreparedSave: Sendable {
    /// What was taken of the record, in one object: a prepared save is handed from the reader
    /// to batches, operations and the writer, and a copy then costs one reference count, not
    /// one per value it holds.
    private final class Storage: Sendable {
        let record: Record
        let systemFields: Record.SystemFields
        let fields: [String: FieldValue]
        let encryptedKeys: Set<String>
        let parent: Record.Reference?
        let parentChanged: Bool
        let jsonExtras: Record.JSONExtras
        let allFieldsChanged: Bool
        let changed: [String]
        let fieldDataSize: Int
        /// Made with the save, unless the save can only update a stored record.
        let document: [UInt8]?
        /// Made with a save that can only merge its changed keys into a stored record.
        let changes: Changes?
        let holdsAsset: Bool
        let unavailableAssetKeys: Set<String>

        init(record: Record, systemFields: Record.SystemFields, fields: [String: FieldValue], encryptedKeys: Set<String>, parent: Record.Reference?,
             parentChanged: Bool, jsonExtras: Record.JSONExtras, allFieldsChanged: Bool, changed: [String], fieldDataSize: Int, holdsAsset: Bool,
             encodesDocument: Bool, encodesChanges: Bool, unavailableAssetKeys: Set<String> = []) {
            self.unavailableAssetKeys = unavailableAssetKeys
            self.record = record
            self.systemFields = systemFields
            self.fields = fields
            self.encryptedKeys = encryptedKeys
            self.parent = parent
            self.parentChanged = parentChanged
            self.jsonExtras = jsonExtras
            self.allFieldsChanged = allFieldsChanged
            self.changed = changed
            self.fieldDataSize = fieldDataSize
            document = encodesDocument ? FieldDocument.encodedBytes(fields, encryptedKeys: encryptedKeys, jsonExtras: jsonExtras) : nil
            changes = encodesChanges ? Changes(fields, changedKeys: allFieldsChanged ? Array(fields.keys) + changed.filter { fields[$0] == nil } : changed) : nil
            self.holdsAsset = holdsAsset
        }
    }

    private let storage: Storage

    /// The record as given (reported back, and the client record of a conflict).
    package var record: Record { storage.record }
    package var systemFields: Record.SystemFields { storage.systemFields }
    package var fields: [String: FieldValue] { storage.fields }
    package var encryptedKeys: Set<String> { storage.encryptedKeys }
    package var parent: Record.Reference? { storage.parent }
    package var parentChanged: Bool { storage.parentChanged }
    /// What the record's CloudKit JSON held beyond the model.
    package var jsonExtras: Record.JSONExtras { storage.jsonExtras }
    /// ``Record/fieldDataSize`` of ``fields``.
    package var fieldDataSize: Int { storage.fieldDataSize }
    /// ``fields``, ``encryptedKeys`` and ``jsonExtras`` as a ``FieldDocument``: what a new record
    /// stores (made now when the save was prepared as one that can only update).
    package var document: [UInt8] {
        storage.document ?? FieldDocument.encodedBytes(storage.fields, encryptedKeys: storage.encryptedKeys, jsonExtras: storage.jsonExtras)
    }
    /// The changed keys' values (`nil`: removed) as ``FieldDocument/encodedChanges(_:)``
    /// encodes them: what a save that merges changed keys into the stored record writes over
    /// its document (made when the save was prepared as one that can only do that).
    package var encodedChanges: [UInt8] {
        (storage.changes ?? Changes(storage.fields, changedKeys: changedKeys)).document
    }

    /// Whether a changed key's value is an asset or holds a `.deleteSelf` reference, whose
    /// side effects need the stored record (``FieldValue/needsStoredRecordFirst``).
    package var changesNeedStoredRecord: Bool {
        (storage.changes ?? Changes(storage.fields, changedKeys: changedKeys)).needStoredRecord
    }

    /// The changed keys' values, encoded, and whether any needs the stored record.
    private struct Changes: Sendable {
        let document: [UInt8]
        let needStoredRecord: Bool

        init(_ fields: [String: FieldValue], changedKeys: [String]) {
            var changes = [String: FieldValue?](minimumCapacity: changedKeys.count)
            var needStoredRecord = false
            for key in changedKeys {
                let value = fields[key]
                if let value, value.needsStoredRecordFirst { needStoredRecord = true }
                changes[key] = .some(value)
            }
            document = FieldDocument.encodedChanges(changes)
            self.needStoredRecord = needStoredRecord
        }
    }

    /// Whether a field holds an asset or a list of assets.
    package var holdsAsset: Bool { storage.holdsAsset }

    package var recordID: Record.ID { storage.record.recordID }

    /// The keys the save writes into a stored record, in the modes that change keys: present
    /// keys that were set and keys that were removed (every present key counts as set when the
    /// record was built whole).
    package var changedKeys: [String] {
        storage.allFieldsChanged ? Array(storage.fields.keys) + storage.changed.filter { storage.fields[$0] == nil } : storage.changed
    }

    /// Checks `record` as ``Record/validateForSave()`` does and prepares it.
    ///
    /// `namesChecked` says that the producer has checked the record name, record type and
    /// field keys already (a reader checks them on its input's bytes). `writeMode`, when
    /// given, is the mode the record is saved in: a save that mode lets only update a stored
    /// record does not make the ``document`` of a new one. `everyKeyChanged` counts every key
    /// the record holds as changed (CloudKit's `.allKeys` save policy), besides keys it removed.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` or `limitExceeded`, naming the record.
    package init(_ record: Record, namesChecked: Bool = false, writeMode: RecordWriteMode? = nil, everyKeyChanged: Bool = false) throws(StratusError) {
        let state = record.snapshot
        let validated = try Record.validate(recordID: record.recordID, recordType: record.recordType, fields: state.fields, encrypted: state.encrypted, parent: state.parent, namesChecked: namesChecked)
        // References are saved, compared and stored in their record's zone, as they read back.
        let fields = validated.spellsZoneOtherwise ? Record.referencesInZone(state.fields, of: record.recordID.zoneID) : state.fields
        let parent = validated.spellsZoneOtherwise ? state.parent?.inZone(record.recordID.zoneID) : state.parent
        storage = Storage(record: record, systemFields: state.system, fields: fields, encryptedKeys: state.encrypted, parent: parent,
                          parentChanged: state.parentChanged, jsonExtras: record.extrasHoldingSharing(state.extras), allFieldsChanged: state.allFieldsChanged || everyKeyChanged, changed: state.changed,
                          fieldDataSize: validated.fieldDataSize, holdsAsset: validated.holdsAsset,
                          encodesDocument: writeMode?.mayCreate(changeTag: state.system.recordChangeTag) ?? true,
                          encodesChanges: writeMode?.mergesChangedKeysOnly(changeTag: state.system.recordChangeTag) ?? false)
    }

    private init(_ other: PreparedSave, fields: [String: FieldValue], unavailableAssetKeys: Set<String>) {
        let old = other.storage
        storage = Storage(record: old.record, systemFields: old.systemFields, fields: fields, encryptedKeys: old.encryptedKeys, parent: old.parent,
                          parentChanged: old.parentChanged, jsonExtras: old.jsonExtras, allFieldsChanged: old.allFieldsChanged, changed: old.changed,
                          fieldDataSize: old.fieldDataSize, holdsAsset: fields.values.contains { $0.holdsAsset }, encodesDocument: old.document != nil,
                          encodesChanges: old.changes != nil, unavailableAssetKeys: unavailableAssetKeys)
    }

    /// The same save with other values for its asset fields (their stored content, once
    /// the content is in the store); asset fields do not count towards the field data size.
    /// `unavailable` names the keys the save did not change whose stored content is gone.
    package func replacingAssetFields(_ replaced: [String: FieldValue], unavailable: Set<String> = []) -> PreparedSave {
        var fields = self.fields
        for (key, value) in replaced { fields[key] = value }
        return PreparedSave(self, fields: fields, unavailableAssetKeys: unavailable)
    }

    /// Asset fields the save did not change whose stored content is no longer in the store
    /// (another version of the record named other content since this one was read): harmless
    /// where the stored record keeps its own values for them, fatal where the save's values
    /// are stored (``RecordWriteRules`` decides, after the change tag's check).
    package var unavailableAssetKeys: Set<String> { storage.unavailableAssetKeys }
}

extension PreparedSave {
    /// `saves` reordered so that a parent in the same request is saved before its children
    /// (stable otherwise), so that a child's parent check sees its parent's save.
    ///
    /// ```swift
    /// let ordered = PreparedSave.parentsFirst([child, parent])   // [parent, child]
    /// ```
    static func parentsFirst(_ saves: [PreparedSave]) -> [PreparedSave] {
        // Most requests have no parents at all: check that without building anything.
        guard saves.contains(where: { $0.parent != nil }) else { return saves }
        var indexByName: [String: Int] = [:]
        for (index, save) in saves.enumerated() { indexByName[save.recordID.recordName] = index }
        var ordered: [PreparedSave] = []
        ordered.reserveCapacity(saves.count)
        var visited = [Bool](repeating: false, count: saves.count)
        for start in saves.indices where !visited[start] {
            // Walk up the chain of unvisited parents, then save from the top down.
            var chain: [Int] = []
            var current: Int? = start
            while let index = current, !visited[index] {
                visited[index] = true
                chain.append(index)
                current = saves[index].parent.flatMap { indexByName[$0.recordID.recordName] }
            }
            ordered.append(contentsOf: chain.reversed().map { saves[$0] })
        }
        return ordered
    }
}
