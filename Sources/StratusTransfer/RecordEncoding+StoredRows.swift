import Foundation
@_spi(StratusEngine) import Stratus

extension RecordEncoding {
    /// Record JSON is written from stored rows; CSV (whose columns check each record's
    /// fields) and a JSON export that writes asset files (in record order, by its writer) take
    /// records.
    static func encodesStoredRows(format: RecordFormat, jsonOptions: RecordJSONWriter.Options) -> Bool {
        format != .csv && jsonOptions.assetFolder == nil
    }

    /// Encodes the first `count` rows into `batch` (empty) as ``encode(_:into:)`` encodes their
    /// records, each from its stored form where ``RecordJSONWriter/appendStored(_:zoneID:zoneTail:options:fields:to:)``
    /// can, else from its record; up to the first that fails.
    func encode(_ rows: any StoredRecordRows, count: Int, into batch: EncodedRecordBatch) {
        precondition(batch.count == 0 && batch.bytes.count == 0, "an empty batch")
        let writesStored = Self.encodesStoredRows(format: format, jsonOptions: jsonOptions)
        let zoneID = rows.zoneID
        let zoneTail = writesStored ? RecordJSONWriter.zoneTail(zoneID, options: jsonOptions) : []
        var cell = ByteOutput()
        var fields: [RecordJSONWriter.StoredField] = []
        var place = 0
        do {
            try rows.forEachRow { row, record in
                guard place < count else { return false }
                let written = appendRecord(at: place, to: batch) { out in
                    if writesStored, let row, RecordJSONWriter.appendStored(row, zoneID: zoneID, zoneTail: zoneTail, options: jsonOptions, fields: &fields, to: &out) {
                        if format == .ndjson { out.append(0x0A) }
                    } else {
                        try append(try record(), to: &out, cell: &cell)
                    }
                }
                guard written else { return false }
                place += 1
                return true
            }
        } catch {
            // Handing the rows over failed, between two rows (a row's own failure ends the loop).
            if batch.failure == nil { batch.fail(at: place, error) }
        }
        // The writer writes `count` records of the batch: each is encoded or the batch failed.
        if batch.failure == nil && place < count {
            batch.fail(at: place, StratusError(.internalError, "the store handed over \(place) of the page's \(count) rows"))
        }
    }
}
