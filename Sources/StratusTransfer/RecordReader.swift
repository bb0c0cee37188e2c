import Foundation
import Stratus

/// Reads records from CloudKit Web Services record JSON (NDJSON, a JSON array, a response
/// envelope) or CSV, streaming: memory stays bounded by the largest single record.
///
/// ```swift
/// let reader = try RecordReader(fileHandle: .standardInput, options: RecordReadOptions())
/// while let item = try reader.next() {
///     switch item {
///     case .record(let record, _): batch.append(record)
///     case .deletion: break                           // only with `readsDeletions`
///     case .rejected(let error): print(error)        // line 7, column 12: record 'a': …
///     }
/// }
/// ```
///
/// The record JSON is `{"recordName", "recordType", "fields": {"title": {"value": …, "type":
/// "STRING"}}, "recordChangeTag", "created": {"timestamp", "userRecordName"}, "modified": {…},
/// "zoneID": {"zoneName", "ownerRecordName"}}`, with timestamps in milliseconds since 1970
/// (integer or with a fraction), bytes in base64, references as `{"recordName", "action",
/// "zoneID"?}`, locations as `{"latitude", "longitude", "altitude", "horizontalAccuracy",
/// "verticalAccuracy", "course", "speed", "timestamp"}`, and assets as `{"downloadURL", "size",
/// "fileChecksum"}` whose `downloadURL` is a `file:` URL or a path (it becomes
/// `Asset(fileURL:)`; relative paths resolve against ``RecordReadOptions/assetDirectory``).
///
/// **Types.** A value without `"type"` is typed by the schema in the options, else inferred:
/// string → STRING, integer → INT64, `true`/`false` → INT64 1/0, number with a fraction or
/// exponent → DOUBLE, object with `recordName` → REFERENCE, with `latitude` → LOCATION, with
/// `downloadURL` → ASSETID, array → the list of its elements' type (INT64 and DOUBLE mixed →
/// DOUBLE_LIST, empty → STRING_LIST). `ASSET` is read as ASSETID. `"value": null` removes the
/// field: it is listed in ``Record/changedKeys()`` without a value.
///
/// **Encrypted values and parents are kept.** `ENCRYPTED_BYTES` (and `ENCRYPTED_` before any
/// other type name) and `"isEncrypted": true` read as encrypted values (see
/// ``Record/encryptedValues``), which the writers give back the same way; `"parent":
/// {"recordName", "zoneID"?}` becomes ``Record/parent``.
///
/// **Kept as it came** (written back by ``RecordWriter`` the same way): members of the record
/// Stratus has no use for (`pluginFields`, `share`, `expirationTime`, `"deleted": false`, unknown
/// keys), a zone ID's `zoneType`, the `deviceID` of `created`/`modified`, an asset's CloudKit
/// metadata, and the reference action `VALIDATE` (which acts as `NONE`).
///
/// **Rejected, never dropped**, each with a message naming it: an unknown field type name;
/// `"deleted": true` (a tombstone in a changes feed) unless ``RecordReadOptions/readsDeletions``
/// asks for it as a deletion; a `delete`/`forceDelete` operation; an error result
/// (`serverErrorCode`, `reason`), a record's or a `changes/zone` zone entry's (naming the zone and
/// the code: that zone's changes are not in the answer).
///
/// **Names.** Record names with a leading `_`, which CloudKit reserves for the system, are
/// rejected each with the reason ``Naming/checkRecordName(_:allowSystemNames:)`` gives, as are
/// other bad names, record types, field keys and zone names. User record names in
/// `created`/`modified` (CloudKit writes them as `_…`) are kept. A reference into another zone
/// than its record's is rejected, as a save would reject it.
///
/// **Errors.** Each bad item — invalid UTF-8, a bad number (leading zeros, `NaN`, an INT64
/// beyond 64 bits), a duplicate key, a value of the wrong kind, a missing recordName or
/// recordType, nesting deeper than 64 levels — comes back as ``RecordReadResult/rejected(_:)``
/// with its line and column, and reading goes on: in NDJSON with the next line, in arrays and
/// envelopes with the next element when the bad one is still well delimited. Text that
/// cannot be resynchronized (broken array syntax, an unclosed string in an array) throws.
///
/// **Envelopes.** Besides `{"records": […], "continuationMarker": …}` the reader takes
/// `changes/zone` answers (`{"zones": [{"zoneID", "records": […]}]}`, each zone's records in
/// that zone), `records/modify` requests (`{"operations": [{"operationType", "record"}],
/// "zoneID"}`) and CKTool JS answers (`{"recordResults": [{"type", "recordName", "record"}]}`:
/// a found record's result gives its record, an error result is rejected naming its
/// `errorCode`, a deleted record's result is a deletion); an envelope's or zone entry's `zoneID` is the zone of records that name none,
/// wherever it stands among the members (the reader looks up to
/// ``RecordReadOptions/maximumRecordSize`` ahead for it; one further still, after records read
/// into another zone, throws). Other envelope keys (`syncToken`, `moreComing`, `atomic`, …) are
/// checked and skipped. A key given twice in an envelope or zone entry throws, as the document
/// no longer says which one is meant.
///
/// Not thread-safe: use one reader from one task at a time.
public final class RecordReader {
    let options: RecordReadOptions
    /// ``RecordReadOptions/generatedNameSeed``, or a random one.
    let generatedNameSeed: [UInt8]
    let context: DecodeContext
    let input: InputBuffer
    var scan = RecordScan()
    var failure: StratusError?
    /// How the records read will be saved, once ``willSave(as:)`` says.
    var savingMode: RecordWriteMode?

    /// Every record the reader yields has its record name, record type and field keys
    /// checked as a save checks them (on the input's bytes), so a consumer that prepares the
    /// records for saving need not check them again.
    public let checksRecordNames = true

    /// The format being read: the one in the options, or the one detected.
    public private(set) var detectedFormat: RecordFormat
    /// An envelope's `continuationMarker` (CKTool JS's `continuationToken`), once the reader has passed it (CloudKit writes it
    /// after the records, so read it when ``next()`` has returned nil).
    public internal(set) var continuationMarker: String?
    /// How many CloudKit assets (a `downloadURL` of CloudKit's) the assets folder held no file
    /// for under their `fileChecksum`, so far: each was read as CloudKit's metadata without
    /// content, which an import says (``RecordReadOptions/assetDirectory``).
    public var cloudKitAssetsWithoutContent: Int { context.cache.cloudKitAssetsWithoutContent }
    /// An envelope's `syncToken`, once the reader has passed it.
    public internal(set) var syncToken: String?
    /// Whether the answer or one of its zone entries said `"moreComing": true`, once the
    /// reader has passed it: a `changes/zone` answer that is one page of its zone's changes
    /// (CloudKit sends the rest to a request with the answer's `syncToken`).
    ///
    /// ```swift
    /// while try reader.next() != nil {}
    /// if reader.moreComing { print("fetch the next page of changes and import it too") }
    /// ```
    public internal(set) var moreComing = false

    // NDJSON
    var lineNumber = 0
    /// The record type's and field names' bytes of a line skipped that declared nothing, and
    /// of the line being skipped (see ``mayDeclareTypes(from:to:)``).
    var passedShape: [UInt8] = []
    var shapeBytes: [UInt8] = []

    // JSON arrays and envelopes
    var frames: [Frame] = []
    /// Whether an envelope had a list of records (`records` or `operations`); one without is
    /// not a record file (a zones list, a database changes answer).
    var sawRecordList = false
    /// Whether a record inside a `changes/zone` answer's `zones` was read (``holdsWholeVersions``).
    var readChangesAnswerRecord = false
    /// Whether an envelope said `syncToken` or `moreComing`, and whether one held `records`:
    /// both, a `records/changes` answer (``holdsWholeVersions``). CKTool JS's record changes
    /// answers (`recordResults`, which may say `moreComing`) merge, as the README says.
    var envelopeSaidChanges = false
    var envelopeHeldRecords = false
    var readChangesEnvelope: Bool { envelopeSaidChanges && envelopeHeldRecords }

    // CSV
    var csv: CSVLayout?

    /// Starts reading `fileHandle` in chunks of ``RecordReadOptions/readChunkSize``.
    ///
    /// ```swift
    /// let reader = try RecordReader(fileHandle: FileHandle(forReadingAtPath: "in.ndjson")!, options: .init())
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the input cannot start as the format
    ///   (a CSV header without a `recordName` column, say), `internalError` when reading fails.
    public convenience init(fileHandle: FileHandle, options: RecordReadOptions) throws {
        try self.init(input: InputBuffer(fileHandle: fileHandle, chunkSize: options.readChunkSize), options: options)
    }

    /// Reads records from bytes in memory.
    ///
    /// ```swift
    /// let reader = try RecordReader(data: Data(#"{"recordName":"a","recordType":"Note","fields":{}}"#.utf8), options: .init())
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the input cannot start as the format.
    public convenience init(data: Data, options: RecordReadOptions) throws {
        try self.init(input: InputBuffer(data: data, chunkSize: options.readChunkSize), options: options)
    }

    init(input: InputBuffer, options: RecordReadOptions) throws {
        self.options = options
        generatedNameSeed = Array((options.generatedNameSeed ?? UUID().uuidString).utf8)
        self.context = DecodeContext(options: options)
        self.input = input
        input.stopRequested = options.stopRequested
        self.detectedFormat = options.format ?? .ndjson
        try skipByteOrderMark()
        try refuseUTF16()
        if options.format == nil {
            let blank = try skipBlankLines()
            detectedFormat = try detectFormat()
            if detectedFormat == .ndjson {
                // The NDJSON reader counts lines itself: the blank ones before the first record
                // are lines of the file, and spaces before it on its line are columns of it.
                lineNumber = blank.lines
                if blank.lineStart >= input.baseOffset && blank.lineStart <= input.baseOffset + input.start { input.start = blank.lineStart - input.baseOffset }
            }
        }
        input.countsLines = detectedFormat != .ndjson
        if detectedFormat == .csv { try readCSVHeader() }
    }

    /// How many input bytes have been consumed, for progress against the input's size.
    ///
    /// ```swift
    /// print("\(reader.bytesConsumed) of \(fileSize) bytes read")
    /// ```
    public var bytesConsumed: Int { input.baseOffset + input.start }

    /// The next record or rejected item; nil at the end.
    ///
    /// ```swift
    /// while let item = try reader.next() { … }
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` with ``StratusError/line`` and
    ///   ``StratusError/column`` for input that cannot be resynchronized (broken JSON array or
    ///   envelope syntax, an unclosed CSV quote is only a rejected row); `internalError` when
    ///   reading fails. After a throw, every call throws the same error.
    public func next() throws -> RecordReadResult? {
        if let failure { throw failure }
        do {
            switch detectedFormat {
            case .ndjson: return try nextLine()
            case .json, .envelope: return try nextInDocument()
            case .csv: return try nextRow()
            }
        } catch let error as StratusError {
            failure = error
            throw error
        }
    }

    // MARK: - Shared

    func fatal(at index: Int, _ message: String) -> StratusError {
        let (line, column) = input.position(of: input.baseOffset + index)
        var error = StratusError(.invalidArguments, "\(message) (line \(line), column \(column))")
        error.line = line
        error.column = column
        return error
    }

    /// Runs `body` on a cursor over the buffered bytes from `input.start`, reading more and
    /// starting again whenever the item does not fit yet; commits the cursor's end.
    func withCursor<T>(depth: Int = 0, _ body: (inout JSONCursor) throws(ScanFailure) -> T) throws -> T {
        while true {
            var cursor = JSONCursor(base: input.storage, limit: input.end, isComplete: input.isEOF, pos: input.start, depth: depth)
            do {
                let result = try body(&cursor)
                // An item that came whole with the last fill can be longer than the limit too.
                if cursor.pos - input.start > options.maximumRecordSize {
                    throw fatal(at: input.start, "an item is larger than the \(options.maximumRecordSize)-byte record limit")
                }
                input.start = cursor.pos
                return result
            } catch let error as ScanFailure {
                switch error {
                case .syntax(let offset, let message):
                    throw fatal(at: offset, message)
                case .needMore:
                    if input.available > options.maximumRecordSize {
                        throw fatal(at: input.start, "an item is larger than the \(options.maximumRecordSize)-byte record limit")
                    }
                    // At the end of the input the next pass runs complete and names the real problem.
                    guard try input.fill(minimum: input.refillMinimum) || input.isEOF else {
                        throw fatal(at: input.end, "unexpected end of input")
                    }
                }
            }
        }
    }

    private func skipByteOrderMark() throws {
        while input.available < 3, try input.fill() {}
        if input.available >= 3 && input.storage[input.start] == 0xEF && input.storage[input.start + 1] == 0xBB
            && input.storage[input.start + 2] == 0xBF {
            input.start += 3
        }
    }

    /// Refuses UTF-16 and UTF-32 text (what Windows PowerShell's `>` and `Out-File` write), with
    /// every format given or detected: read as UTF-8, its NUL bytes would be named as binary data,
    /// a bad key or a CSV name that is not UTF-8, none of which says to convert the file.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the encoding and how to convert it.
    private func refuseUTF16() throws {
        while input.available < 4, try input.fill() {}
        guard input.baseOffset + input.start == 0, input.available >= 2 else { return }
        let b = UnsafeBufferPointer(start: input.storage + input.start, count: min(input.available, 4))
        let encoding: String
        let how: String
        if b.count == 4 && b[0] == 0xFF && b[1] == 0xFE && b[2] == 0 && b[3] == 0 {
            (encoding, how) = ("UTF-32", "it starts with a UTF-32 byte order mark")
        } else if b.count == 4 && b[0] == 0 && b[1] == 0 && b[2] == 0xFE && b[3] == 0xFF {
            (encoding, how) = ("UTF-32", "it starts with a UTF-32 byte order mark")
        } else if (b[0] == 0xFF && b[1] == 0xFE) || (b[0] == 0xFE && b[1] == 0xFF) {
            (encoding, how) = ("UTF-16", "it starts with a UTF-16 byte order mark")
        } else if b.count == 4, (b[0] == 0) != (b[1] == 0), (b[2] == 0) != (b[3] == 0) {
            // An ASCII character with a NUL byte beside it, twice: UTF-16 without a mark.
            (encoding, how) = (b[0] == 0 ? "UTF-16BE" : "UTF-16LE", "NUL bytes stand between its first characters")
        } else {
            return
        }
        throw fatal(at: input.start, "the input looks like \(encoding) text (\(how)); record JSON, NDJSON and CSV are read as UTF-8: convert it, for example with iconv -f \(encoding) -t UTF-8")
    }

    /// The first byte that is not whitespace, reading as needed; nil at the end of the input.
    /// Skips the whitespace before the input's first item, answering how many lines it ended
    /// and the input offset where the first item's line starts.
    private func skipBlankLines() throws -> (lines: Int, lineStart: Int) {
        var lines = 0
        var lineStart = input.baseOffset + input.start
        while true {
            while input.start < input.end {
                let b = input.storage[input.start]
                guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return (lines, lineStart) }
                input.start += 1
                if b == 0x0A {
                    lines += 1
                    lineStart = input.baseOffset + input.start
                }
            }
            guard try input.fill() else { return (lines, lineStart) }
        }
    }

    func peekSignificant() throws -> UInt8? {
        while true {
            while input.start < input.end {
                let b = input.storage[input.start]
                guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return b }
                input.start += 1
            }
            guard try input.fill() else { return nil }
        }
    }

    /// The reader's answer for a decoded item; `position` maps a storage index to its line and column.
    func readResult(_ decoded: DecodedRecord, line: Int, position: (Int) -> (line: Int, column: Int)) -> RecordReadResult {
        switch decoded {
        case .record(let record): return .record(record, line: line)
        case .deletion(let id, let recordType): return .deletion(id, recordType: recordType, line: line)
        case .rejected(let offset, let name, let message):
            let (errorLine, column) = position(offset)
            return .rejected(RecordInputError(line: errorLine, column: column, recordName: name, message: message))
        }
    }

    // MARK: - Detection

    private func detectFormat() throws -> RecordFormat {
        guard let first = try peekSignificant() else { return .ndjson }
        if first == UInt8(ascii: "[") { return .json }
        guard first == UInt8(ascii: "{") else {
            // CSV on standard input (`… | stratus import -`) has no name to tell it by; its
            // header's recordName column, which no JSON line starts like, tells it.
            // The whole first line is looked at, however a pipe cuts it into reads. A header
            // tells CSV before any NUL does: a cell may hold U+0000 (Stratus's own exports do).
            while input.available < 65_536,
                  memchr(input.storage + input.start, 0x0A, input.available) == nil, try input.fill() {}
            if startsWithCSVHeader() { return .csv }
            try refuseBinary()
            return .ndjson
        }
        // A read may move the bytes, so the place to return to is kept as an input offset.
        let start = input.baseOffset + input.start
        let recordLimit = options.maximumRecordSize
        let format = try withCursor { (c) throws(ScanFailure) -> RecordFormat in
            // A brace alone on its line starts a pretty-printed document, not an NDJSON line.
            var i = c.pos + 1
            while i < c.limit && (c.base[i] == 0x20 || c.base[i] == 0x09 || c.base[i] == 0x0D) { i += 1 }
            if i == c.limit && !c.isComplete { throw .needMore }
            let prettyPrinted = i < c.limit && c.base[i] == 0x0A
            let firstLine = c.pos
            do throws(ScanFailure) {
                if try Self.isEnvelope(&c) { return .envelope }
                if prettyPrinted { return .json }
                // A record whose first line is not the whole of it (`{"recordName": "x",` with its
                // other members on the lines below) is one JSON document, which no NDJSON line is.
                // A first line longer than the record limit is NDJSON's to reject as too long.
                c.pos = firstLine
                do throws(ScanFailure) {
                    _ = try c.scanValue()
                } catch {
                    switch error {
                    case .needMore:
                        guard c.limit - firstLine >= recordLimit else { throw error }
                        c.pos = firstLine
                        return .ndjson
                    case .syntax(let offset, _):
                        // Broken on its first line, or cut short with NDJSON records after it
                        // (past blank lines): NDJSON's first rejected line. Broken further down,
                        // it is a document, whose reader says where.
                        c.pos = firstLine
                        if memchr(c.base + firstLine, 0x0A, Swift.max(0, offset - firstLine)) == nil { return .ndjson }
                        var next = firstLine
                        while next < c.limit && c.base[next] != 0x0A { next += 1 }
                        while next < c.limit && (c.base[next] == 0x0A || c.base[next] == 0x0D || c.base[next] == 0x20 || c.base[next] == 0x09) { next += 1 }
                        return next < c.limit && c.base[next] == UInt8(ascii: "{") ? .ndjson : .json
                    }
                }
                let spansLines = memchr(c.base + firstLine, 0x0A, c.pos - firstLine) != nil
                c.pos = firstLine
                return spansLines ? .json : .ndjson
            } catch {
                if case .needMore = error { throw error }
                // A broken first line is NDJSON's first rejected record, as any broken line is,
                // when it is the only line or the next starts as an NDJSON record does.
                guard !prettyPrinted else { throw error }
                var end = firstLine
                while end < c.limit && c.base[end] != 0x0A { end += 1 }
                if end == c.limit && !c.isComplete { throw .needMore }
                let next = end + 1
                if next + 1 >= c.limit {
                    if !c.isComplete { throw .needMore }
                    return .ndjson
                }
                if c.base[next] == UInt8(ascii: "{"), c.base[next + 1] == UInt8(ascii: "\"") { return .ndjson }
                throw error
            }
        }
        input.start = start - input.baseOffset
        return format
    }

    /// Whether the buffered input starts with a line of comma-separated cells one of which is
    /// `recordName` (bare or quoted): a CSV header, as the CSV reader requires one.
    private func startsWithCSVHeader() -> Bool {
        let bytes = UnsafeBufferPointer(start: input.storage + input.start, count: input.end - input.start)
        let line = bytes.prefix { $0 != 0x0A }
        return line.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).contains { cell in
            var cell = cell.drop { $0 == 0x20 || $0 == 0x09 }
            while let last = cell.last, last == 0x20 || last == 0x09 || last == 0x0D { cell = cell.dropLast() }
            if cell.count >= 2, cell.first == UInt8(ascii: "\""), cell.last == UInt8(ascii: "\"") { cell = cell.dropFirst().dropLast() }
            return cell.elementsEqual("recordName".utf8)
        }
    }

    /// Refuses input whose first bytes hold a NUL, which no JSON, NDJSON or CSV text holds: a
    /// database file or an archive named by mistake is refused whole, not rejected line by line.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` saying what the input seems to be.
    private func refuseBinary() throws {
        let scanned = min(input.end - input.start, 4_096)
        guard scanned > 0, let nul = memchr(input.storage + input.start, 0, scanned) else { return }
        let index = nul.assumingMemoryBound(to: UInt8.self) - input.storage
        let offset = input.baseOffset + index
        let sqliteHeader = Array("SQLite format 3\u{0}".utf8)
        let isSQLite = input.baseOffset + input.start == 0 && input.end - input.start >= sqliteHeader.count
            && sqliteHeader.indices.allSatisfy { input.storage[input.start + $0] == sqliteHeader[$0] }
        let what = isSQLite ? "an SQLite database file (a Stratus store?)" : "binary data (a NUL byte at byte \(offset + 1))"
        throw fatal(at: index, "the input is \(what), not JSON, NDJSON or CSV records")
    }

    /// Whether the object at the cursor (on its `{`) is an envelope rather than a record: its
    /// first key is an envelope's, or the one after a leading zoneID is.
    static func isEnvelope(_ c: inout JSONCursor) throws(ScanFailure) -> Bool {
        guard try c.openObject() else { return false }
        var key = try c.scanKey()
        // CKTool JS's record answer is `{"record": {…}}` and nothing else: an object with more
        // beside `record` is no answer, and is read (and refused) as a record.
        if c.stringEquals(key, "record") {
            _ = try c.scanValue()
            return try !c.nextMember(close: UInt8(ascii: "}"), in: "an object")
        }
        if c.stringEquals(key, "zoneID") {
            // Both records and modify requests have a zoneID; the next key tells them apart.
            _ = try c.scanValue()
            guard try c.nextMember(close: UInt8(ascii: "}"), in: "an object") else { return false }
            key = try c.scanKey()
        }
        return isEnvelopeKey(key, c)
    }

    static func isEnvelopeKey(_ key: Token, _ c: JSONCursor) -> Bool {
        c.stringEquals(key, "records") || c.stringEquals(key, "zones") || c.stringEquals(key, "operations")
            || c.stringEquals(key, "atomic") || c.stringEquals(key, "continuationMarker")
            || c.stringEquals(key, "syncToken") || c.stringEquals(key, "moreComing")
            || c.stringEquals(key, "recordResults") || c.stringEquals(key, "changeToken") || c.stringEquals(key, "continuationToken")
    }

    // MARK: - NDJSON

    private func nextLine() throws -> RecordReadResult? {
        while let line = try nextLineBounds() {
            if line.oversized {
                return .rejected(RecordInputError(
                    line: lineNumber, column: 1, recordName: nil,
                    message: "the line is longer than the \(options.maximumRecordSize)-byte record limit"))
            }
            if let result = parseLine(from: line.start, to: line.end) { return result }
        }
        return nil
    }

    /// Counts the next line and answers where it lies in the buffer (its bytes stay there
    /// until the next read), or that it is longer than the record limit (its bytes dropped as
    /// they came: only its end is looked for); nil at the input's end.
    private func nextLineBounds() throws -> (start: Int, end: Int, oversized: Bool)? {
        var searched = 0
        var oversized = false
        var lineEnd = 0
        while true {
            let from = input.start + searched
            if from < input.end, let hit = memchr(input.storage + from, 0x0A, input.end - from) {
                lineEnd = hit.assumingMemoryBound(to: UInt8.self) - input.storage
                break
            }
            if input.isEOF {
                if input.available == 0 && !oversized { return nil }
                lineEnd = input.end
                break
            }
            searched = input.available
            // One byte more than the limit may be a CRLF line's carriage return.
            if searched > options.maximumRecordSize + 1 {
                oversized = true
                input.start = input.end
                searched = 0
            }
            try input.fill()
        }
        // A line that came whole with the last fill can be longer than the limit too; a
        // CRLF line's carriage return is not the record's.
        let contentEnd = lineEnd > input.start && input.storage[lineEnd - 1] == 0x0D ? lineEnd - 1 : lineEnd
        if contentEnd - input.start > options.maximumRecordSize { oversized = true }
        lineNumber += 1
        let lineStart = input.start
        input.start = min(lineEnd + 1, input.end)
        return (lineStart, lineEnd, oversized)
    }

    /// Passes over up to `count` NDJSON items (lines that are not blank) without making
    /// records of them; answers how many it passed, fewer only where the input ends. A line
    /// that could declare a field's type for the lines after it (``mayDeclareTypes(from:to:)``)
    /// is read as ``next()`` reads it, so that what follows reads as it would have.
    func skipLines(holding count: Int) throws -> Int {
        if let failure { throw failure }
        do {
            var passed = 0
            while passed < count, let line = try nextLineBounds() {
                if !line.oversized {
                    var c = JSONCursor(base: input.storage, limit: line.end, isComplete: true, pos: line.start, depth: 0)
                    c.skipSpace()
                    if c.pos == line.end { continue }
                    if mayDeclareTypes(from: c.pos, to: line.end) { _ = parseLine(from: line.start, to: line.end) }
                }
                passed += 1
            }
            return passed
        } catch let error as StratusError {
            failure = error
            throw error
        }
    }

    /// Whether reading the record at `start` could declare a field's type, which records after
    /// it that give a value without a type take (``DecodeCache/declaredByInput``): one with a
    /// field that neither the schema nor a record read before declares. A line of the last
    /// shape found to declare nothing declares nothing either, as declarations only grow.
    private func mayDeclareTypes(from start: Int, to end: Int) -> Bool {
        let base = input.storage
        guard base[start] == UInt8(ascii: "{") else { return false }
        var c = JSONCursor(base: base, limit: end, isComplete: true, pos: start, depth: 0)
        // A line that does not scan is rejected before any field is read.
        do throws(ScanFailure) { try c.scanRecord(&scan) } catch { return false }
        guard !scan.fields.isEmpty else { return false }
        guard scan.recordType.isPresent else { return true }
        shapeBytes.removeAll(keepingCapacity: true)
        func note(_ token: Token) {
            shapeBytes.append(contentsOf: UnsafeBufferPointer(start: base + token.start, count: token.end - token.start))
            shapeBytes.append(0)
        }
        note(scan.recordType)
        for field in scan.fields { note(field.name) }
        if shapeBytes == passedShape { return false }
        let recordType = c.string(scan.recordType)
        let schema = context.schemaTypes[recordType], declared = context.cache.declaredByInput[recordType]
        for field in scan.fields {
            let key = c.string(field.name)
            if schema?[key] == nil && declared?[key] == nil { return true }
        }
        swap(&passedShape, &shapeBytes)
        return false
    }

    /// Reads one NDJSON line; nil for a blank line.
    private func parseLine(from lineStart: Int, to lineEnd: Int) -> RecordReadResult? {
        let base = input.storage
        let line = lineNumber
        let column = { (offset: Int) -> Int in InputBuffer.characterCount(base, from: lineStart, to: offset) + 1 }
        var c = JSONCursor(base: base, limit: lineEnd, isComplete: true, endName: "end of the line", pos: lineStart, depth: 0)
        c.skipSpace()
        if c.pos == lineEnd { return nil }
        let recordStart = c.pos
        var scanned = false
        do throws(ScanFailure) {
            if base[c.pos] != UInt8(ascii: "{") {
                let value = try c.scanValue()
                return .rejected(RecordInputError(line: line, column: column(recordStart), recordName: nil,
                                                  message: "expected a record object, found \(value.kindName)"))
            }
            scanned = true
            try c.scanRecord(&scan)
            c.skipSpace()
            if c.pos < lineEnd {
                c.note(c.pos, "unexpected \(JSONCursor.describe(base[c.pos])) after the record; NDJSON holds one record per line")
            }
            let decoded = c.materialize(scan, zone: options.zoneID, context: context)
            return readResult(decoded, line: line) { (line, column($0)) }
        } catch {
            let offset: Int
            let message: String
            switch error {
            case .syntax(let o, let m): (offset, message) = (o, m)
            case .needMore: (offset, message) = (lineEnd, "unexpected end of the line")
            }
            let name = scanned && scan.recordName.isPresent ? c.string(scan.recordName) : nil
            return .rejected(RecordInputError(line: line, column: column(offset), recordName: name, message: message))
        }
    }
}
