import Foundation
import Synchronization
import Stratus
import StratusTransfer

/// A command's `--where`, read against the environment's schema before it runs:
/// - **dates**: a literal compared with a date — `creationDate`, `modificationDate`, or a field
///   the schema declares TIMESTAMP (or TIMESTAMP_LIST) — is read as a TIMESTAMP cell of a CSV
///   file is: milliseconds since 1970, as CloudKit's JSON and `stratus export` write dates, or an
///   ISO 8601 date-time (`'2025-01-01T00:00:00Z'`, `'2025-01-01'`). Without this, a number
///   compared with a date matched nothing, silently;
/// - **names**: a record type or field the development schema lacks gets a note on stderr, and
///   a record type production lacks is a usage error (64), as a missing index is;
/// - **kinds**: a string compared with a field the schema declares INT64 or DOUBLE, a number
///   with a STRING field, or a date, reference, location or bytes with either, is a usage error
///   (64): it would match no record, silently.
///
/// ```swift
/// let typed = try WhereClause.typed(try QueryPredicate(format: "due < 1735689600000"), by: schema)
/// // due < CAST(757382400, "NSDate")
/// ```
enum WhereClause {
    /// `predicate` with the literals its date keys are compared with made dates.
    ///
    /// - Throws: ``UsageError`` quoting a literal that is neither.
    static func typed(_ predicate: QueryPredicate, by schema: RecordTypeSchema?) throws -> QueryPredicate {
        try checkConditionShapes(predicate, by: schema)
        try checkLiteralKinds(predicate, by: schema)
        return try predicate
            .mappingValues(of: { isDate($0, schema) }) { key, value in try date(value, key) }
            .mappingValues(of: { isReference($0, schema) }) { key, value in try reference(value, key, isList: isReferenceList(key, schema)) }
    }

    /// Refuses a condition whose form cannot match a field of the type the schema declares:
    /// a list field compared as one value (`tags == 'red'`, which CloudKit writes
    /// `tags CONTAINS 'red'` or `ANY tags == 'red'`), a scalar field searched as a list, a
    /// prefix of a field that holds no strings, a distance from a field that holds no location,
    /// and a location compared with a value. Each would match no record, silently.
    ///
    /// - Throws: ``UsageError`` naming the field, its type and the form to write.
    private static func checkConditionShapes(_ predicate: QueryPredicate, by schema: RecordTypeSchema?) throws {
        guard let schema else { return }
        func declared(_ key: QueryKey) -> (name: String, type: FieldType)? {
            guard case .field(let name) = key, let type = schema.field(name)?.type else { return nil }
            return (name, type)
        }
        // As the schema language writes it (`NUMBER`, `LIST<REFERENCE>`), as `schema export` shows.
        func typeText(_ name: String) -> String { schema.field(name)?.schemaLanguageType ?? name }
        func check(_ predicate: QueryPredicate) throws {
            switch predicate {
            case .all, .none: return
            case .and(let parts): for part in parts { try check(part) }
            case .not(let part): try check(part)
            case .condition(let condition): try check(condition)
            }
        }
        func check(_ condition: Condition) throws {
            switch condition {
            case .compare(let key, _, _), .between(let key, _, _), .in(let key, _):
                guard let (name, type) = declared(key) else { return }
                if type.isList {
                    throw UsageError(message: "--where: \(name) is \(typeText(name)) in the schema, a list, which a condition matches by its elements: write '\(name) CONTAINS value', 'ANY \(name) == value' or 'ANY \(name) IN {…}' (compared as one value, the condition would match no record)")
                }
                if type == .location {
                    throw UsageError(message: "--where: \(name) is LOCATION in the schema, which a condition compares only by distance: write 'distanceToLocation:fromLocation:(\(name), LOCATION(lat, lon)) < KILOMETRES'")
                }
            case .beginsWith(let key, _):
                guard let (name, type) = declared(key), type != .string else { return }
                let hint = type == .stringList ? ": write 'ANY \(name) BEGINSWITH …' for a list of strings" : " (the condition would match no record)"
                throw UsageError(message: "--where: \(name) is \(typeText(name)) in the schema, and BEGINSWITH matches a STRING field's prefix\(hint)")
            case .listContains(let key, _), .listContainsAny(let key, _), .listAnyBeginsWith(let key, _):
                guard let (name, type) = declared(key), !type.isList else { return }
                throw UsageError(message: "--where: \(name) is \(typeText(name)) in the schema, not a list: CONTAINS and ANY match the elements of a list field; compare it with ==, IN or BEGINSWITH (the condition would match no record)")
            case .distance(let key, _, _, _):
                guard let (name, type) = declared(key), type != .location else { return }
                throw UsageError(message: "--where: \(name) is \(typeText(name)) in the schema, and distanceToLocation:fromLocation: measures from a LOCATION field (the condition would match no record)")
            case .tokens, .hasParent:
                return
            }
        }
        try check(predicate)
    }

    private static func isReference(_ key: QueryKey, _ schema: RecordTypeSchema?) -> Bool {
        guard case .field(let name) = key, let type = schema?.field(name)?.type else { return false }
        return type == .reference || type == .referenceList
    }

    private static func isReferenceList(_ key: QueryKey, _ schema: RecordTypeSchema?) -> Bool {
        guard case .field(let name) = key else { return false }
        return schema?.field(name)?.type == .referenceList
    }

    /// A literal compared with a REFERENCE field: a string is the record name it refers to,
    /// as `--set owner:REFERENCE=user-7` and `recordID == 'r01'` read one.
    private static func reference(_ value: FieldValue, _ key: QueryKey, isList: Bool) throws -> FieldValue {
        switch value {
        case .reference: return value
        case .string(let name):
            do {
                try Naming.checkRecordName(name, allowSystemNames: true)
            } catch {
                throw UsageError(message: "--where: \(key) is a REFERENCE, and '\(name)' is no record name: \(error.message)")
            }
            return .reference(Record.Reference(recordID: Record.ID(recordName: name), action: .none))
        default:
            let form = isList ? "'\(key) CONTAINS \"name\"'" : "'\(key) == \"name\"'"
            throw UsageError(message: "--where: \(key) is \(isList ? "a LIST<REFERENCE>" : "a REFERENCE") in the schema: compare it with a record name (\(form)) or REFERENCE(\"name\"), not \(value.type.rawValue.first.map { "AEIOU".contains($0) } == true ? "an" : "a") \(value.type.rawValue) (the condition would match no record)")
        }
    }

    /// What the literals compared with a declared field must be for the condition to match
    /// anything: a field holds values of its declared type only.
    private enum LiteralKind {
        case string, number
    }

    private static func literalKind(_ key: QueryKey, _ schema: RecordTypeSchema?) -> LiteralKind? {
        guard case .field(let name) = key, let type = schema?.field(name)?.type else { return nil }
        switch type {
        case .string, .stringList: return .string
        case .int64, .int64List, .double, .doubleList: return .number
        default: return nil
        }
    }

    /// Refuses a string compared with a number field, or a number with a string field: such a
    /// condition matches no record, so `update` and `delete` in a cron job would change nothing
    /// and say nothing was wrong.
    ///
    /// - Throws: ``UsageError`` naming the field, its type and the literal.
    private static func checkLiteralKinds(_ predicate: QueryPredicate, by schema: RecordTypeSchema?) throws {
        guard let schema else { return }
        _ = try predicate.mappingValues(of: { literalKind($0, schema) != nil }) { key, value in
            guard case .field(let name) = key, let field = schema.field(name) else { return value }
            let type = field.schemaLanguageType
            switch (literalKind(key, schema), value) {
            case (.number?, .string(let text)):
                throw UsageError(message: "--where: \(name) is \(type) in the schema, and '\(text)' is a string, which no \(type) field holds: the condition would match no record (write a number without quotes)")
            case (.string?, .int64), (.string?, .double):
                let number = switch value {
                case .int64(let integer): String(integer)
                case .double(let real): String(real)
                default: "\(value)"
                }
                throw UsageError(message: "--where: \(name) is \(type) in the schema, and \(number) is a number, which no \(type) field holds: the condition would match no record (quote it: '\(number)')")
            case (_?, .date), (_?, .reference), (_?, .location), (_?, .bytes):
                // `s == now`, `i == REFERENCE("m1")`: as silent as a number against a string.
                let kind = switch value {
                case .date: "a date"
                case .reference: "a reference"
                case .location: "a location"
                default: "bytes"
                }
                throw UsageError(message: "--where: \(name) is \(type) in the schema, and the condition compares it with \(kind), which no \(type) field holds: it would match no record")
            default:
                return value
            }
        }
    }

    /// The `--where` of a command, typed by the container's schema of `recordType`. A record
    /// type the environment's schema does not declare and no record has gets a note on stderr
    /// (the answer is still empty, exit 0): a mistyped `--type` should not pass for an empty
    /// answer unseen. (Production refuses such a query, as CloudKit does.)
    static func typed(_ predicate: QueryPredicate, recordType: String, sortedBy sorts: [RecordSortDescriptor] = [],
                      in container: Container) async throws -> QueryPredicate {
        let schema = try await container.schema()
        let typeSchema = schema.recordType(recordType)
        try checkSortKeys(sorts, of: typeSchema)
        if typeSchema == nil, container.environment == .development, (try await container.recordCountsByType()[recordType] ?? 0) == 0 {
            let declared = schema.recordTypes.map(\.recordType).filter { $0 != "Users" }.sorted()
            let known = declared.isEmpty ? "declares no type yet" : "declares " + declared.joined(separator: ", ")
            StratusCommand.log("note: no record has the type \(recordType), and the development schema \(known) (a type is declared by `stratus schema import` or by the first save of one of its records)")
        }
        if typeSchema == nil, container.environment == .production, recordType != "Users" {
            // Refused here as production's missing index is (64): both say the command cannot
            // run against this environment, where the store's own `unknownItem` reads as
            // "some records were missing" (1).
            throw UsageError(message: "the production schema has no record type \(recordType) (CloudKit: Did not find record type); deploy the development schema (`stratus schema deploy`) or use --environment development")
        }
        if let typeSchema, container.environment == .development {
            // A sort by a field no record has still answers every record, in name order; scripts
            // take the first line of stderr for the cursor, so that note is advice, as the
            // index advice is: on a terminal, or with STRATUS_ADVICE=always.
            noteUndeclaredFields(fieldNames(of: predicate), of: typeSchema, untilKnownWhetherAnyMatched: true)
            if QueryCommand.givesAdvice { noteUndeclaredFields(sorts.map(\.key), of: typeSchema, untilKnownWhetherAnyMatched: false) }
        }
        guard predicate != .all && predicate != .none else { return predicate }
        try checkQueryableTypes(predicate, of: typeSchema)
        let typedPredicate = try typed(predicate, by: typeSchema)
        try checkRunnable(typedPredicate, recordType: recordType)
        return typedPredicate
    }

    /// Refuses a condition on a field the schema declares `BYTES` or `ASSET` (or a list of
    /// them): CloudKit indexes no such field, and whatever it is compared with, the condition
    /// matches no record, so an `update` or `delete` would change nothing and exit 0.
    ///
    /// - Throws: ``UsageError`` naming the field and its type.
    private static func checkQueryableTypes(_ predicate: QueryPredicate, of schema: RecordTypeSchema?) throws {
        guard let schema else { return }
        for name in fieldNames(of: predicate) {
            guard let field = schema.field(name), [.bytes, .bytesList, .asset, .assetList].contains(field.type) else { continue }
            throw UsageError(message: "--where: \(name) is \(field.schemaLanguageType) in the schema, which no query compares (CloudKit indexes no BYTES or ASSET field): the condition would match no record")
        }
    }

    /// Refuses before any record is read, as the usage error it is, a condition no query runs
    /// (bytes compared with `==`): the operation would refuse it only once running, without
    /// saying which option was wrong.
    private static func checkRunnable(_ predicate: QueryPredicate, recordType: String) throws {
        do {
            try Query(recordType: recordType, predicate: predicate).validate()
        } catch let error as StratusError where error.code == .invalidArguments {
            throw UsageError(message: "--where: \(error.message)")
        }
    }

    /// A filter on a field the development schema does not declare matches nothing (a
    /// development save declares every field it stores; only records kept from a field a schema
    /// import dropped may hold it), and a sort by one orders by record name alone: a mistyped
    /// name (`ratng`) gets a note on stderr rather than passing for an empty answer or the
    /// order asked for unseen. (Production refuses such a query, as CloudKit does.)
    ///
    /// Records kept from a dropped field can match, so a `--where` field's note waits for the command to know:
    /// ``sayFieldNotes(nothingMatched:)`` says it only when nothing matched (a script that found
    /// records reads no note), in one line however many fields it names.
    private static func noteUndeclaredFields(_ names: [String], of schema: RecordTypeSchema, untilKnownWhetherAnyMatched deferred: Bool) {
        var undeclared: [String] = []
        for name in names where schema.field(name) == nil && !undeclared.contains(name) {
            guard case .field = QueryKey(name) else { continue }
            undeclared.append(name)
        }
        guard !undeclared.isEmpty else { return }
        let declared = schema.fields.map(\.name).filter { !$0.hasPrefix("___") }.sorted()
        let named = listed(undeclared.map { "'\($0)'" })
        // `parent` named the record's parent up to 0.15.0: a job written then now asks for a field.
        let parentHint = undeclared.contains("parent") ? "; the record's parent is ___parent (a plain parent is a field named parent, as in CloudKit)" : ""
        let note = "note: \(schema.recordType) has no field\(undeclared.count == 1 ? "" : "s") \(named) in the development schema, which declares every field a save stores; a misspelt name? (the type's fields: \(declared.isEmpty ? "none" : listed(declared)))\(parentHint)"
        if deferred { pendingFieldNotes.withLock { $0.append(note) } } else { StratusCommand.log(note) }
    }

    /// At most 20 names, then how many more: a predicate of 500 conditions, or a type of 1,000
    /// fields, makes one readable line.
    private static func listed(_ names: [String]) -> String {
        names.count <= 20 ? names.joined(separator: ", ") : names.prefix(20).joined(separator: ", ") + " and \(names.count - 20) more"
    }

    private static let pendingFieldNotes = Mutex<[String]>([])

    /// Says the notes on `--where` fields the schema does not declare when the command's query
    /// matched nothing (else drops them), before the command's summary line.
    static func sayFieldNotes(nothingMatched: Bool) {
        let notes = pendingFieldNotes.withLock { notes in
            defer { notes = [] }
            return notes
        }
        guard nothingMatched else { return }
        var said: Set<String> = []
        for note in notes where said.insert(note).inserted { StratusCommand.log(note) }
    }

    /// The fields `predicate` compares, in the order it names them.
    private static func fieldNames(of predicate: QueryPredicate) -> [String] {
        var names: [String] = []
        _ = predicate.mappingValues(of: { key in
            if case .field(let name) = key { names.append(name) }
            return false
        }) { _, value in value }
        return names
    }

    /// The CSV column types the environment's schema gives `recordType`'s fields, and which of
    /// them are encrypted: a column then has its declared type whatever the first record holds
    /// (or lacks). A NUMBER field holds INT64 and DOUBLE alike: its column is DOUBLE, which
    /// takes whole numbers as written. A system field has a column of its own.
    static func csvColumnTypes(of recordType: String, in container: Container) async throws -> (types: [String: FieldType], encrypted: Set<String>) {
        guard let schema = try await container.schema().recordType(recordType) else { return ([:], []) }
        var types: [String: FieldType] = [:], encrypted: Set<String> = []
        for field in schema.fields where field.systemField == nil {
            types[field.name] = field.isNumber ? (field.type.isList ? .doubleList : .double) : field.type
            if field.isEncrypted { encrypted.insert(field.name) }
        }
        return (types, encrypted)
    }

    /// The query of a command's ``QuerySelection``, typed by the container's schema.
    static func typed(_ query: Query, in container: Container) async throws -> Query {
        let predicate = try await typed(query.predicate, recordType: query.recordType, sortedBy: query.sortDescriptors ?? [], in: container)
        guard predicate != query.predicate else { return query }
        let typedQuery = Query(recordType: query.recordType, predicate: predicate)
        typedQuery.sortDescriptors = query.sortDescriptors
        return typedQuery
    }

    /// Refuses a `--sort` key whose declared type has no order (a list, a location, bytes, an
    /// asset: every record would sort as if it had no value). An undeclared key is left alone,
    /// as ``noteUndeclaredFields(_:of:)`` says why.
    ///
    /// - Throws: ``UsageError`` naming the key and its type.
    private static func checkSortKeys(_ sorts: [RecordSortDescriptor], of schema: RecordTypeSchema?) throws {
        guard let schema else { return }
        for sort in sorts where sort.distanceFrom == nil {
            guard case .field(let name) = QueryKey(sort.key), let field = schema.field(name) else { continue }
            if field.type.isList || [.location, .bytes, .asset].contains(field.type) {
                throw UsageError(message: "--sort \(name): \(name) is \(field.schemaLanguageType) in the schema, which has no order (every record would sort as if it had no value); sort by a field that holds one string, number, date or reference")
            }
        }
    }

    private static func isDate(_ key: QueryKey, _ schema: RecordTypeSchema?) -> Bool {
        switch key {
        case .creationDate, .modificationDate: true
        case .field(let name): schema?.field(name).map { $0.type == .timestamp || $0.type == .timestampList } ?? false
        default: false
        }
    }

    /// `value` as a date, read as a CSV TIMESTAMP cell reads its text.
    private static func date(_ value: FieldValue, _ key: QueryKey) throws -> FieldValue {
        let text: String
        switch value {
        case .date: return value
        case .int64(let number): text = String(number)
        case .double(let number) where number.isFinite: text = String(number)
        case .string(let string):
            // A quoted year or ISO 8601 basic date ('2025', '20250101') would read as that many
            // milliseconds after 1970, and match the wrong records without a word.
            if (1...8).contains(string.utf8.count), string.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                throw UsageError(message: "--where: \(key) is a date, and '\(string)' is ambiguous: a year or a date without dashes would be read as \(string) milliseconds after 1970; write an ISO 8601 date such as '2025-01-01', or milliseconds without quotes")
            }
            text = string
        default: throw notADate(value, key)
        }
        var options = RecordReadOptions()
        options.format = .csv
        options.csvRecordType = "WhereDate"
        let cell = text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) ? nil : text
        guard let cell, let reader = try? RecordReader(data: Data("recordName,when:TIMESTAMP\nwhere,\(cell)\n".utf8), options: options),
              case .record(let record, _)? = try? reader.next(), case .date(let date)? = record.fieldValue(forKey: "when") else {
            throw notADate(value, key)
        }
        return .date(date)
    }

    private static func notADate(_ value: FieldValue, _ key: QueryKey) -> UsageError {
        let literal = switch value {
        case .string(let text): "'\(text)'"
        case .int64(let number): String(number)
        case .double(let number): String(number)
        default: "a \(value.type.rawValue)"
        }
        return UsageError(message: "--where: \(key) is a date, and \(literal) is neither milliseconds since 1970 (as CloudKit's JSON and export write dates) nor an ISO 8601 date-time such as '2025-01-01T09:30:00Z'")
    }
}
