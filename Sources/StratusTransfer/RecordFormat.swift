/// The file formats the record reader and writer understand.
///
/// - `ndjson`: one CloudKit Web Services record object per line.
/// - `json`: a JSON array of record objects (a single record object is read too).
/// - `envelope`: CloudKit's response body, `{"records": […], "continuationMarker": …}`; the
///   reader also takes `changes/zone` answers (`{"zones": [{"zoneID", "records"}]}`) and
///   `records/modify` request bodies (`{"operations": [{"operationType", "record"}], "zoneID"}`)
///   and CKTool JS answers (`{"recordResults": [{"type", "recordName", "record"}]}`).
/// - `csv`: RFC 4180 with a header row of `recordName`, `recordType` and `name:TYPE` columns.
///
/// ```swift
/// let format = RecordFormat(rawValue: "ndjson") ?? .ndjson
/// ```
public enum RecordFormat: String, Sendable, CaseIterable {
    case ndjson, json, envelope, csv
}
