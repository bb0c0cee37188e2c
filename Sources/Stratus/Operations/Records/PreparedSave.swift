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
    /// The record as given (reported back, and the client record of a conflict).
    package let record: Record
    package let systemFields: Record.SystemFields
    package let fields: [String: FieldValue]
    package let encryptedKeys: Set<String>
    package let parent: Record.Reference?
    package let parentChanged: Bool
    /// What the record's CloudKit JSON held beyond the model.
    package let jsonExtras: Record.JSONExtras
    /// Every present key counts as changed (a record built whole), besides ``changed``.
    private let allFieldsChanged: Bool
    /// The keys set or removed since the record was created or fetched (only removals when
    /// ``allFieldsChanged``).
    private let changed: [String]
    /// ``Record/fieldDataSize`` of ``fields``.
    package let fieldDataSize: Int
    /// ``fields``, ``encryptedKeys`` and ``jsonExtras`` as a ``FieldDocument``: what a new record stores.
    package let document: [UInt8]

    package var recordID: Record.ID { record.recordID }

    /// The keys the save writes into a stored record, in the modes that change keys: present
    /// keys that were set and keys that were removed.
    package var changedKeys: [String] {
        allFieldsChanged ? Array(fields.keys) + changed.filter { fields[$0] == nil } : changed
    }

    /// Checks `record` as ``Record/validateForSave()`` does and prepares it.
    ///
    /// `namesChecked` says that the producer has checked the record name, record type and
    /// field keys already (a reader checks them on its input's bytes).
    ///
    /// - Throws: ``StratusError`` `invalidArguments` or `limitExceeded`, naming the record.
    package init(_ record: Record, namesChecked: Bool = false) throws(StratusError) {
        let state = record.snapshot
        fieldDataSize = try Record.validate(recordID: record.recordID, recordType: record.recordType, fields: state.fields, parent: state.parent, namesChecked: namesChecked)
        self.record = record
        systemFields = state.system
        fields = state.fields
        encryptedKeys = state.encrypted
        parent = state.parent
        parentChanged = state.parentChanged
        allFieldsChanged = state.allFieldsChanged
        changed = state.changed
        jsonExtras = state.extras
        document = FieldDocument.encodedBytes(state.fields, encryptedKeys: state.encrypted, jsonExtras: state.extras)
    }

    private init(_ other: PreparedSave, fields: [String: FieldValue]) {
        record = other.record
        systemFields = other.systemFields
        self.fields = fields
        encryptedKeys = other.encryptedKeys
        parent = other.parent
        parentChanged = other.parentChanged
        allFieldsChanged = other.allFieldsChanged
        changed = other.changed
        fieldDataSize = other.fieldDataSize
        jsonExtras = other.jsonExtras
        document = FieldDocument.encodedBytes(fields, encryptedKeys: other.encryptedKeys, jsonExtras: other.jsonExtras)
    }

    /// The same save with other values for its asset fields (their stored content, once
    /// the content is in the store); asset fields do not count towards the field data size.
    package func replacingAssetFields(_ replaced: [String: FieldValue]) -> PreparedSave {
        var fields = self.fields
        for (key, value) in replaced { fields[key] = value }
        return PreparedSave(self, fields: fields)
    }
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
