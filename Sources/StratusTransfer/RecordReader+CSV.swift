import Foundation
import Stratus

/// The columns of a CSV file, from its header row.
///
/// Special columns carry the record's identity, parent and system fields under their CloudKit
/// names (which are reserved, so no field can clash with them): `recordName`, `recordType`,
/// `recordChangeTag`, `creationDate`, `creatorUserRecordID`, `modificationDate`,
/// `lastModifiedUserRecordID`, `___parent` (the parent's record name). CloudKit lets a field be
/// named `parent`, so a plain `parent` column is the parent only in a header without
/// `___parent` (as exports of types without such a field write it); `parent:TYPE` is a field.
/// Every other column is a field, `name` or `name:TYPE`; `name:ENCRYPTED_TYPE` holds encrypted
/// values.
struct CSVLayout {
    enum Column: Equatable {
        case recordName, recordType, changeTag, creationDate, creator, modificationDate, modifier, parent
        case field(String, FieldType?, encrypted: Bool)

        static let special: [String: Column] = [
            "recordName": .recordName, "recordType": .recordType, "recordChangeTag": .changeTag,
            "creationDate": .creationDate, "creatorUserRecordID": .creator,
            "modificationDate": .modificationDate, "lastModifiedUserRecordID": .modifier,
            Record.SystemFieldKey.parent: .parent,
        ]
        /// The parent's column in a header that names no `___parent` column.
        static let plainParent = "parent"
    }

    var columns: [Column]
    var cells: [CSVCell] = []
    var scratch: [UInt8] = []
}

/// One cell of a scanned row: its bytes without the surrounding quotes.
struct CSVCell {
    var start: Int
    var end: Int
    var quoted: Bool
    var hasDoubledQuotes: Bool
}

extension RecordReader {
    // MARK: - Rows

    /// Scans one RFC 4180 row at `c.pos` into `cells`; leaves `c.pos` after its line break.
    /// Quoted cells may hold commas, line breaks and doubled quotes; stray quotes are noted.
    static func scanRow(_ c: inout JSONCursor, into cells: inout [CSVCell]) throws(ScanFailure) {
        cells.removeAll(keepingCapacity: true)
        let base = c.base, limit = c.limit
        var i = c.pos
        while true {
            if i < limit && base[i] == UInt8(ascii: "\"") {
                let open = i
                i += 1
                var doubled = false
                while true {
                    guard i < limit, let hit = memchr(base + i, 0x22, limit - i) else {
                        if c.isComplete { throw c.syntax(open, "a quoted cell is not closed before the end of input") }
                        throw .needMore
                    }
                    let quote = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
                    if quote + 1 == limit && !c.isComplete { throw .needMore }
                    if quote + 1 < limit && base[quote + 1] == UInt8(ascii: "\"") {
                        doubled = true
                        i = quote + 2
                        continue
                    }
                    cells.append(CSVCell(start: open + 1, end: quote, quoted: true, hasDoubledQuotes: doubled))
                    i = quote + 1
                    break
                }
                if i < limit && base[i] != UInt8(ascii: ",") && base[i] != 0x0A && base[i] != 0x0D {
                    // A cell that spans lines here most likely began at a stray quote: say so, as the
                    // lines it took are not rows of their own.
                    var linesBefore = 0
                    var from = open
                    while from < i, let hit = memchr(base + from, 0x0A, i - from) {
                        linesBefore += 1
                        from = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base + 1
                    }
                    c.note(i, "unexpected \(JSONCursor.describe(base[i])) after a closing quote; a quote inside a quoted cell is written twice"
                        + (linesBefore > 0 ? " (the quoted cell it closes began \(linesBefore) line\(linesBefore == 1 ? "" : "s") earlier: if the quote there was a stray one, it took the lines between into this one row)" : ""))
                    while i < limit && base[i] != UInt8(ascii: ",") && base[i] != 0x0A && base[i] != 0x0D { i += 1 }
                }
            } else {
                let start = i
                while i < limit {
                    let b = base[i]
                    if b == UInt8(ascii: ",") || b == 0x0A || b == 0x0D { break }
                    if b == UInt8(ascii: "\"") { c.note(i, "a quote inside an unquoted cell; quote the whole cell and double the quote") }
                    i += 1
                }
                cells.append(CSVCell(start: start, end: i, quoted: false, hasDoubledQuotes: false))
            }
            if i >= limit {
                if !c.isComplete { throw .needMore }
                c.pos = i
                return
            }
            let b = base[i]
            if b == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if b == 0x0D {
                if i + 1 == limit && !c.isComplete { throw .needMore }
                i += (i + 1 < limit && base[i + 1] == 0x0A) ? 2 : 1
            } else {
                i += 1
            }
            c.pos = i
            return
        }
    }

    /// Calls `body` with a cell's bytes, with doubled quotes undone.
    private func withCellBytes<R>(_ cell: CSVCell, _ scratch: inout [UInt8], _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let base = input.storage
        guard cell.hasDoubledQuotes else { return body(UnsafeBufferPointer(start: base + cell.start, count: cell.end - cell.start)) }
        scratch.removeAll(keepingCapacity: true)
        var i = cell.start
        while i < cell.end {
            scratch.append(base[i])
            i += base[i] == UInt8(ascii: "\"") ? 2 : 1
        }
        return scratch.withUnsafeBufferPointer(body)
    }

    private static func isBlankRow(_ cells: [CSVCell]) -> Bool {
        cells.count == 1 && !cells[0].quoted && cells[0].start == cells[0].end
    }

    // MARK: - Header

    func readCSVHeader() throws {
        var cells: [CSVCell] = []
        var rowStart = 0
        repeat {
            if input.available == 0 {
                guard try input.fill() else { return }
            }
            rowStart = try withCursor { (c) throws(ScanFailure) -> Int in
                let start = c.pos
                try Self.scanRow(&c, into: &cells)
                if let problem = c.problem { throw c.syntax(problem.offset, problem.message) }
                return start
            }
        } while Self.isBlankRow(cells)
        var scratch: [UInt8] = []
        var columns: [CSVLayout.Column] = []
        var names: Set<String> = []
        let namesSystemParent = cells.contains { cell in
            withCellBytes(cell, &scratch, { String(validating: $0, as: UTF8.self) })?
                .trimmingCharacters(in: .whitespaces) == Record.SystemFieldKey.parent
        }
        for cell in cells {
            let fail = { (message: String) -> StratusError in self.fatal(at: cell.start, "CSV header: \(message)") }
            guard let text = withCellBytes(cell, &scratch, { String(validating: $0, as: UTF8.self) }) else {
                throw fail("a column name is not valid UTF-8")
            }
            let header = text.trimmingCharacters(in: .whitespaces)
            if let special = CSVLayout.Column.special[header] ?? (!namesSystemParent && header == CSVLayout.Column.plainParent ? .parent : nil) {
                guard !columns.contains(special) else { throw fail("the column '\(header)' appears twice") }
                columns.append(special)
                continue
            }
            var name = header
            var type: FieldType?
            var encrypted = false
            if let colon = header.lastIndex(of: ":") {
                name = String(header[..<colon])
                let typeText = String(header[header.index(after: colon)...])
                switch FieldType.named(typeText) {
                case .known(let known): type = known
                case .encrypted(let plain):
                    type = plain
                    encrypted = true
                case .unknownList: throw fail("the column '\(header)' has type UNKNOWN_LIST; give the list's type")
                case .unknown: throw fail("the column '\(header)' names the type '\(typeText)', which this version does not know")
                }
            }
            do { try Naming.checkFieldKey(name) } catch {
                // A spreadsheet's export in a locale whose lists use semicolons.
                let separator = cells.count == 1 && (name.contains(";") || name.contains("\t"))
                    ? "; CSV cells are separated by commas, and this header has \(name.contains(";") ? "semicolons" : "tabs") between its names: export the file with commas" : ""
                throw fail(error.message + separator)
            }
            if let given = options.csvTypes[name] {
                let givenEncrypted = options.csvEncryptedFields.contains(name)
                if let type, type != given || encrypted != givenEncrypted {
                    throw fail("the column '\(header)' is \(type.name(encrypted: encrypted)), but the types given for it say \(given.name(encrypted: givenEncrypted))")
                }
                type = given
                encrypted = givenEncrypted
            }
            guard names.insert(name).inserted else { throw fail("the field '\(name)' has two columns") }
            columns.append(.field(name, type, encrypted: encrypted))
        }
        let at = rowStart
        guard columns.contains(.recordName) else { throw fatal(at: at, "CSV header: there is no recordName column") }
        if let unknown = options.csvTypes.keys.sorted().first(where: { !names.contains($0) && CSVLayout.Column.special[$0] == nil }) {
            throw fatal(at: at, "CSV header: a column type is given for '\(unknown)', which is not a column of the header; a misspelt name?")
        }
        if !columns.contains(.recordType) {
            guard let type = options.csvRecordType else {
                throw fatal(at: at, "CSV header: there is no recordType column, and no record type was given for the rows")
            }
            do { try Naming.checkIdentifier(type, kind: "record type") } catch { throw fatal(at: at, error.message) }
        }
        csv = CSVLayout(columns: columns)
    }

    // MARK: - Records

    func nextRow() throws -> RecordReadResult? {
        guard var layout = csv else { return nil }
        defer { csv = layout }
        while true {
            guard try peekAny() != nil else { return nil }
            // Indices are only valid after the last read, so the row's start comes from the cursor.
            let (rowStart, outcome, unclosed) = try withCursor { (c) throws(ScanFailure) -> (Int, Problem?, Bool) in
                let start = c.pos
                do throws(ScanFailure) {
                    try Self.scanRow(&c, into: &layout.cells)
                    return (start, c.problem, false)
                } catch {
                    guard case .syntax(let offset, let message) = error else { throw error }
                    // Only an unclosed quote at the end of the input gets here.
                    c.pos = c.limit
                    layout.cells.removeAll()
                    return (start, Problem(offset: offset, message: message), true)
                }
            }
            if unclosed, let problem = outcome {
                // The quote took every later line into its cell: one stray quote must not pass
                // for one bad row while the rows after it are lost.
                throw fatal(at: problem.offset, problem.message + "; every line after it went into that cell, so none of them was read")
            }
            if outcome == nil && Self.isBlankRow(layout.cells) { continue }
            input.count(upTo: input.baseOffset + rowStart)
            let line = input.position(of: input.baseOffset + rowStart).line
            if let problem = outcome { return rejected(at: problem.offset, nil, problem.message) }
            return rowRecord(&layout, line: line, rowStart: rowStart)
        }
    }

    private func peekAny() throws -> UInt8? {
        if input.available > 0 { return input.storage[input.start] }
        guard try input.fill() else { return nil }
        return input.storage[input.start]
    }

    private func rejected(at index: Int, _ name: String?, _ message: String) -> RecordReadResult {
        let (line, column) = input.position(of: input.baseOffset + index)
        return .rejected(RecordInputError(line: line, column: column, recordName: name, message: message))
    }

    private func rowRecord(_ layout: inout CSVLayout, line: Int, rowStart: Int) -> RecordReadResult {
        let cells = layout.cells
        guard cells.count == layout.columns.count else {
            return rejected(at: rowStart, nil, "the row has \(cells.count) cells, but the header has \(layout.columns.count) columns")
        }
        var scratch = layout.scratch
        defer { layout.scratch = scratch }
        func text(_ cell: CSVCell) -> String? {
            withCellBytes(cell, &scratch) { String(validating: $0, as: UTF8.self) }
        }
        var name: String?
        var recordType = options.csvRecordType
        var system = Record.SystemFields()
        // Identity first: field types may depend on the record type.
        for (index, column) in layout.columns.enumerated() {
            let cell = cells[index]
            let empty = cell.start == cell.end
            switch column {
            case .recordName:
                guard !empty else { return rejected(at: cell.start, nil, "the row has no recordName") }
                guard let value = text(cell) else { return rejected(at: cell.start, nil, "the recordName cell is not valid UTF-8") }
                name = value
            case .recordType:
                // The given type fills an empty cell; a row of another type is not made one.
                if empty, options.csvRecordType != nil { break }
                guard !empty else { return rejected(at: cell.start, name, "the row has no recordType") }
                guard let value = text(cell) else { return rejected(at: cell.start, name, "the recordType cell is not valid UTF-8") }
                if let given = options.csvRecordType, value != given {
                    return rejected(at: cell.start, name, "the row's recordType is \(value), but the rows were given the type \(given) (--type)")
                }
                recordType = value
            default: break
            }
        }
        guard let name else { return rejected(at: rowStart, nil, "the row has no recordName") }
        do { try Naming.checkRecordName(name) } catch { return rejected(at: rowStart, nil, error.message) }
        guard let recordType else { return rejected(at: rowStart, name, "the row has no recordType") }
        do { try Naming.checkIdentifier(recordType, kind: "record type") } catch { return rejected(at: rowStart, name, error.message) }
        let schema = context.schemaTypes[recordType]
        let numbers = context.numberFields[recordType]
        let encryptedBySchema = context.encryptedFields[recordType]
        // Declared only by a row that is read whole, as a JSON record declares its fields.
        var declaredByInput = context.cache.declaredByInput[recordType] ?? [:]
        let declaredBefore = declaredByInput.count
        var values: [String: FieldValue] = [:]
        var removed: [String] = []
        var encryptedKeys: Set<String> = []
        var extras = Record.JSONExtras()
        var parent: Record.Reference?
        for (index, column) in layout.columns.enumerated() {
            let cell = cells[index]
            let empty = cell.start == cell.end
            do throws(FieldError) {
                switch column {
                case .recordName, .recordType:
                    break
                case .changeTag:
                    if !empty { system.recordChangeTag = try systemText(cell, &scratch, "recordChangeTag") }
                case .creator:
                    if !empty { system.creatorUserRecordID = Record.ID(recordName: try systemText(cell, &scratch, "creatorUserRecordID")) }
                case .modifier:
                    if !empty { system.lastModifiedUserRecordID = Record.ID(recordName: try systemText(cell, &scratch, "lastModifiedUserRecordID")) }
                case .creationDate:
                    if !empty, case .date(let d)? = try cellValue(cell, &scratch, as: .timestamp, key: "creationDate", zone: options.zoneID) { system.creationDate = d }
                case .modificationDate:
                    if !empty, case .date(let d)? = try cellValue(cell, &scratch, as: .timestamp, key: "modificationDate", zone: options.zoneID) { system.modificationDate = d }
                case .parent:
                    if !empty, case .reference(let r)? = try cellValue(cell, &scratch, as: .reference, key: "parent", zone: options.zoneID) {
                        guard r.action == .none else { throw FieldError(offset: cell.start, message: "the parent reference's action must be NONE") }
                        parent = r
                    }
                case .field(let key, let declared, let encryptedByHeader):
                    // A column the header does not type holds encrypted values where the schema
                    // declares the field encrypted, as an untyped JSON value does.
                    let encrypted = encryptedByHeader || (declared == nil && encryptedBySchema?.contains(key) == true)
                    // Typed by the header, else the schema, else as the first value the input
                    // gave the field (saving it declares the field, so a second run would read
                    // the column so from the schema), else inferred from the cell as the JSON
                    // reader infers an untyped value.
                    let byInput = declared == nil && schema?[key] == nil ? declaredByInput[key] : nil
                    let type = declared ?? schema?[key] ?? byInput ?? inferredType(cell, &scratch)
                    let number = declared == nil && numbers?.contains(key) == true
                    // An empty cell has no value: the field is removed. Only a quoted empty
                    // cell ("") of a STRING or BYTES column is the empty string or bytes.
                    var value: FieldValue?
                    if !empty {
                        let read: FieldValue?, kept: String?
                        do throws(FieldError) {
                            (read, kept) = try cellValueAndText(cell, &scratch, as: type, number: number, encrypted: encrypted, key: key, zone: options.zoneID)
                        } catch where byInput != nil {
                            throw FieldError(offset: error.offset, message: error.message + "; the column has no type, and the input's first value in it made it \(type.rawValue): give its type (--types \(key):TYPE, or a header \(key):TYPE)")
                        }
                        value = read
                        if let kept { extras.fields[key] = kept }
                        if declared == nil && schema?[key] == nil && byInput == nil, let read, !read.isEmptyList { declaredByInput[key] = read.type }
                    } else if cell.quoted && type == .string {
                        value = .string("")
                    } else if cell.quoted && type == .bytes {
                        value = .bytes(Data())
                    }
                    if let value {
                        values[key] = value
                        if encrypted { encryptedKeys.insert(key) }
                    } else {
                        removed.append(key)
                    }
                }
            } catch {
                return rejected(at: cell.start - (cell.quoted ? 1 : 0), name, error.message)
            }
        }
        if declaredByInput.count != declaredBefore { context.cache.declaredByInput[recordType] = declaredByInput }
        // Built whole, every field counts as changed; empty cells are removals.
        let record = Record(
            recordType: recordType, recordID: Record.ID(recordName: name, zoneID: options.zoneID), values: values,
            systemFields: system, parent: parent, encryptedKeys: encryptedKeys, jsonExtras: extras)
        for key in removed { record.setFieldValue(nil, forKey: key) }
        return .record(record, line: line)
    }

    /// A system column's text (a change tag, a user's name), which holds no control character
    /// (as the JSON reader requires): refused rather than cut short at NUL by a store.
    private func systemText(_ cell: CSVCell, _ scratch: inout [UInt8], _ column: String) throws(FieldError) -> String {
        let text = try cellText(cell, &scratch, column)
        if Naming.containsControlCharacter(text) {
            throw FieldError(offset: cell.start, message: "the \(column) column holds a control character")
        }
        return text
    }

    private func cellText(_ cell: CSVCell, _ scratch: inout [UInt8], _ column: String) throws(FieldError) -> String {
        guard let text = withCellBytes(cell, &scratch, { String(validating: $0, as: UTF8.self) }) else {
            throw FieldError(offset: cell.start, message: "the \(column) cell is not valid UTF-8")
        }
        return text
    }

    /// The type of a cell in a column no header, option or schema types: an unquoted number
    /// without fraction or exponent that fits 64 bits is INT64, any other unquoted number
    /// DOUBLE (JSON's number grammar: `007`, `+1`, `.5` and `NaN` are text), everything else —
    /// and every quoted cell — STRING.
    private func inferredType(_ cell: CSVCell, _ scratch: inout [UInt8]) -> FieldType {
        guard !cell.quoted else { return .string }
        return withCellBytes(cell, &scratch) { bytes in
            var first = 0, last = bytes.count
            while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
            while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
            // An integer beyond 64 bits stays text, like an ID; JSON would reject it.
            switch Self.numberKind(UnsafeBufferPointer(rebasing: bytes[first..<last])) {
            case .integer: return .int64
            case .decimal: return .double
            case .largeInteger, nil: return .string
            }
        }
    }

    private enum NumberKind { case integer, largeInteger, decimal }

    /// Whether `bytes` are a JSON number, and which kind: an integer that fits 64 bits, a
    /// larger integer, or a number with a fraction or exponent.
    private static func numberKind(_ bytes: UnsafeBufferPointer<UInt8>) -> NumberKind? {
        var i = 0
        let n = bytes.count
        func digits() -> Int {
            let start = i
            while i < n && bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
            return i - start
        }
        if i < n && bytes[i] == UInt8(ascii: "-") { i += 1 }
        let integerStart = i
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
        var decimal = false
        if i < n && bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return nil }
            decimal = true
        }
        if i < n && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            if i < n && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard digits() > 0 else { return nil }
            decimal = true
        }
        guard i == n else { return nil }
        if decimal { return .decimal }
        return Int64(String(decoding: bytes, as: UTF8.self)) == nil ? .largeInteger : .integer
    }

    /// A cell's text for a message, whole up to 200 characters, in quotes.
    private static func quoted(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.count <= 200 ? "'\(text)'" : "'\(text.prefix(200))…' (\(text.count) characters)"
    }

    /// Converts a cell: STRING cells are their text; INT64 and DOUBLE cells numbers; TIMESTAMP
    /// cells milliseconds since 1970 or an ISO 8601 date-time; references, assets and locations
    /// plain text (a record name, a path, `lat,lon`) or JSON; everything else JSON text
    /// (base64 in a bare cell, lists as JSON arrays).
    /// The value of a cell of `type`; `number`: the column's field is `NUMBER PREFERRED AS …`
    /// in the schema, and a number the preferred type cannot hold is DOUBLE.
    private func cellValue(_ cell: CSVCell, _ scratch: inout [UInt8], as declared: FieldType, number: Bool = false, key: String, zone: RecordZone.ID) throws(FieldError) -> FieldValue? {
        try cellValueAndText(cell, &scratch, as: declared, number: number, key: key, zone: zone).value
    }

    /// ``cellValue(_:_:as:number:key:zone:)``, and for a reference or location (or a list of
    /// them) whose JSON holds what its typed value cannot (VALIDATE or no action, a zoneID,
    /// some location members only), the field's JSON to keep (``Stratus/Record/JSONExtras/fields``),
    /// as a JSON reader keeps it.
    private func cellValueAndText(
        _ cell: CSVCell, _ scratch: inout [UInt8], as declared: FieldType, number: Bool = false, encrypted: Bool = false, key: String, zone: RecordZone.ID
    ) throws(FieldError) -> (value: FieldValue?, kept: String?) {
        let context = self.context
        var kept: String?
        let result: Result<FieldValue?, FieldError> = withCellBytes(cell, &scratch) { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return .success(nil) }
            var type = declared
            func plain() -> String? { String(validating: bytes, as: UTF8.self) }
            func invalid(_ what: String) -> FieldError {
                FieldError(offset: cell.start, message: "field '\(key)': \(type.rawValue) cell \(Self.quoted(bytes)) \(what)")
            }
            // Surrounding spaces mean nothing in numbers and JSON.
            var first = 0, last = bytes.count
            while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
            while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
            let startsJSON = first < last && (bytes[first] == UInt8(ascii: "{") || bytes[first] == UInt8(ascii: "["))
            // Whether the cell read as JSON, but its value was refused (not its syntax).
            var valueRefused = false
            if number && type == .int64, let kind = Self.numberKind(UnsafeBufferPointer(rebasing: bytes[first..<last])), kind != .integer { type = .double }
            switch type {
            case .string:
                guard let text = plain() else { return .failure(invalid("is not valid UTF-8")) }
                return .success(.string(text))
            case .bytes:
                guard let data = Base64.decode(UnsafeBufferPointer(rebasing: bytes[first..<last])) else { return .failure(invalid("is not valid base64")) }
                return .success(.bytes(data))
            case .reference where !startsJSON:
                guard let text = plain() else { return .failure(invalid("is not valid UTF-8")) }
                do throws(StratusError) { try Naming.checkRecordName(text, allowSystemNames: true) } catch { return .failure(invalid("names a bad record: \(error.message)")) }
                return .success(.reference(Record.Reference(recordID: Record.ID(recordName: text, zoneID: zone), action: .none)))
            case .asset where !startsJSON:
                guard let text = plain() else { return .failure(invalid("is not valid UTF-8")) }
                guard !JSONCursor.isRemoteURL(text) else {
                    return .failure(invalid("is not a local file; download the asset and give its path"))
                }
                switch JSONCursor.localAsset(text, quoted: text, context: context) {
                case .success(let asset): return .success(.asset(asset))
                case .failure(let refusal): return .failure(invalid(refusal.message))
                }
            case .int64, .double, .timestamp:
                let trimmed = UnsafeBufferPointer(rebasing: bytes[first..<last])
                if type == .timestamp, let date = ISO8601Timestamp.date(trimmed) { return .success(.date(date)) }
                let expected = switch type {
                case .int64: "is not a whole number in the 64-bit range"
                case .double: "is not a number"
                // A local time would mean whatever the importing machine's zone is.
                default: ISO8601Timestamp.date(Array(trimmed) + Array("Z".utf8)) != nil
                    ? "is a date-time without a zone; add one (2024-01-01T09:30:00Z for UTC, or an offset such as +02:00)"
                    : "is neither milliseconds since 1970 nor an ISO 8601 date-time such as 2024-01-01T09:30:00Z"
                }
                switch Self.numberKind(trimmed) {
                case .integer?: break
                case .largeInteger?, .decimal?: if type == .int64 { return .failure(invalid(expected)) }
                case nil: return .failure(invalid(expected))
                }
                // A number of the right form whose value the type cannot hold says why.
                return json().mapError { error in valueRefused ? error : invalid(expected) }
            case .location where !startsJSON:
                let parts = (plain() ?? "").split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard parts.count == 2, let latitude = parts[0], let longitude = parts[1], latitude.isFinite, longitude.isFinite else {
                    return .failure(invalid("must be 'latitude,longitude' or a JSON object"))
                }
                return .success(.location(Location(latitude: latitude, longitude: longitude)))
            default:
                return json()
            }

            /// Lists, and references, locations and assets written as objects: JSON text.
            func json() -> Result<FieldValue?, FieldError> {
                let what = type.rawValue.hasSuffix("_LIST") ? "a JSON array such as [\"a\",\"b\"] or [1,2]" : "valid JSON"
                var c = JSONCursor(base: base, limit: last, isComplete: true, endName: "end of the cell", pos: first)
                let token: Token
                do throws(ScanFailure) {
                    token = try c.scanValue()
                } catch {
                    if case .syntax(_, let message) = error { return .failure(invalid("is not \(what) (\(message))")) }
                    return .failure(invalid("is not \(what)"))
                }
                if let problem = c.problem { return .failure(invalid("is not \(what) (\(problem.message))")) }
                c.skipSpace()
                if c.pos < last { return .failure(invalid("is not \(what) (unexpected text after the value)")) }
                if token.kind == .null { return .success(nil) }
                do throws(FieldError) {
                    let value = try c.value(token, as: number ? c.numberType(token, preferred: type) : type, key: key, zone: zone, context: context)
                    if c.objectValueLosesText(token, as: value.type) {
                        kept = "{\"value\":" + c.compactText(token) + ",\"type\":\"" + value.type.rawValue + "\"" + (encrypted ? ",\"isEncrypted\":true}" : "}")
                    }
                    return .success(value)
                } catch {
                    valueRefused = true
                    return .failure(FieldError(offset: cell.start, message: error.message))
                }
            }
        }
        return (try result.get(), kept)
    }
}
