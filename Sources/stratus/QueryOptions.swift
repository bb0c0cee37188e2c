import Stratus

extension Option {
    static let recordType = Option("--type", "TYPE", "the record type", default: "none; required")
    static let predicate = Option("--where", "PREDICATE", #"a CloudKit predicate, e.g. "checked == 0 AND title BEGINSWITH 'B'"; at most 500 conditions"#, default: "every record (TRUEPREDICATE)")
    static let sort = Option("--sort", "KEY[:desc]", "sort by KEY, ascending unless :desc; ties are broken by record name; at most 100 keys", default: "record name", repeatable: true)
    static let allZones = Option(flag: "--all-zones", "search every zone of the database instead of one, as CloudKit does for a query without a zone: query pages merge the zones in one order (the query's, then record name, then zone), export reads zone after zone; each record names its zone; not with --zone or CSV")
    static let fields = Option("--fields", "K1,K2", "only these fields; with CSV output a field may name its column type, as in count:INT64", default: "every field")
    /// `--quiet` for a command with no progress to silence, so a cron job can give it to every command.
    static let quietNotes = Option(flag: "--quiet", "no advice on stderr (query: that no index serves it); errors and warnings still go there")
}

/// Which records a command reads: `--type`, `--where`, `--sort`, `--fields`.
struct QuerySelection {
    /// The most `--sort` keys a command takes. Each key is a column of the engine's statement
    /// (SQLite allows 2,000 and PostgreSQL 1,664 in all) and a level of its cursor's condition;
    /// predicates have their own limit, ``QueryPredicate/maximumConditions``.
    static let maximumSortKeys = Query.maximumSortDescriptors

    var recordType: String?
    var predicateText: String?
    var sorts: [RecordSortDescriptor] = []
    var fields: [String]?
    /// Column types given in `--fields` (`count:INT64`), for CSV.
    var fieldTypes: [String: FieldType] = [:]
    /// Fields given an encrypted column type in `--fields` (`secret:ENCRYPTED_BYTES`), for CSV.
    var encryptedFields: Set<String> = []

    /// Reads the options the command declares; `--where` is parsed here, so that a bad
    /// predicate is a usage error before anything is opened.
    init(_ arguments: ParsedArguments) throws {
        recordType = arguments.value("--type")
        if let recordType {
            // Checked before the store is read, whose note on an unknown type would come first.
            do {
                try Naming.checkRecordType(recordType, allowSystemNames: true)
            } catch {
                throw UsageError(message: "--type: \(error.message)")
            }
        }
        predicateText = arguments.value("--where")
        if let predicateText { _ = try Self.predicate(predicateText) }
        sorts = try arguments.values("--sort").map(Self.sortDescriptor)
        if sorts.count > Self.maximumSortKeys {
            throw UsageError(message: "--sort is given \(sorts.count) times; a query sorts by at most \(Self.maximumSortKeys) keys")
        }
        var sortedKeys: Set<String> = []
        for sort in sorts where !sortedKeys.insert(sort.key).inserted {
            // The first would decide every order and the second nothing: say so rather than
            // silently sort the way the first one asks.
            throw UsageError(message: "--sort names '\(sort.key)' twice; give each key once, with :desc for a descending order")
        }
        if let items = try arguments.list("--fields") {
            var names: [String] = []
            for item in items {
                let colon = item.firstIndex(of: ":")
                let name = colon.map { String(item[..<$0]) } ?? item
                // A field named twice, perhaps with two column types, would leave its type to
                // the order of the items: refused, as --sort refuses a key given twice.
                guard !names.contains(name) else {
                    throw UsageError(message: "--fields names '\(name)' twice; give each field once")
                }
                names.append(name)
                guard let colon else { continue }
                let (type, encrypted) = try ParsedArguments.columnType(String(item[item.index(after: colon)...]), in: "--fields", item: item)
                fieldTypes[name] = type
                if encrypted { encryptedFields.insert(name) }
            }
            fields = names
        }
    }

    /// A `--where` as a checkpoint names its job: the canonical form, so that spacing and
    /// quoting make no other job, with `now` as the word (``checkpointedJob(named:predicateText:checkpointPath:)``
    /// adds the moment the job's first run read).
    static func jobText(ofPredicate text: String) -> String {
        // No moment a predicate would name: -123456789.25 s from 2001.
        let moment = Date(timeIntervalSinceReferenceDate: -123_456_789.25)
        func parsed(_ text: String) -> QueryPredicate? {
            QueryPredicate.$parsingMoment.withValue(moment) { try? QueryPredicate(format: text) }
        }
        guard let predicate = parsed(text), let nowCondition = parsed("x == now") else { return text }
        let nowText = String("\(nowCondition)".dropFirst("x == ".count))
        return "\(predicate)".replacingOccurrences(of: nowText, with: "now")
    }

    /// A checkpointed `--where` job: its name, and the moment its predicate's `now` reads.
    /// A job whose predicate reads `now` keeps the moment of its first run in its name (`…;
    /// now=SECONDS`): a run that goes on from the checkpoint an earlier run left reads that
    /// moment again, so it goes on over the records the first run matched (its position is a
    /// place in that query). A job without `now`, or without a checkpoint, is named as it reads.
    ///
    /// - Returns: the name, and the moment (`nil`: the clock's, as any predicate reads `now`).
    static func checkpointedJob(named name: String, predicateText: String, checkpointPath: String?) -> (name: String, moment: Date?) {
        guard let checkpointPath, readsNow(predicateText) else { return (name, nil) }
        let marker = name + "; now="
        // The earlier run's name, read before the file is locked and loaded (which checks it).
        let earlier = PipelineCheckpointFile.jobName(inFileAt: checkpointPath)
        if let earlier, earlier.hasPrefix(marker), let seconds = Double(earlier.dropFirst(marker.count)), seconds.isFinite {
            return (earlier, Date(timeIntervalSinceReferenceDate: seconds))
        }
        // Named without its moment (a checkpoint of this version's first form): goes on as
        // named, `now` the clock's.
        if earlier == name { return (name, nil) }
        let moment = Date()
        return (marker + String(moment.timeIntervalSinceReferenceDate), moment)
    }

    /// Whether the predicate reads `now`: parsed at two moments, it is two predicates (a string
    /// that spells "now" is no reading of it).
    private static func readsNow(_ text: String) -> Bool {
        let one = try? predicate(text, now: Date(timeIntervalSinceReferenceDate: 0))
        let other = try? predicate(text, now: Date(timeIntervalSinceReferenceDate: 1))
        return one != other
    }

    /// `--where` as `predicate(_:)` reads it, with `now` at `moment` (the clock's when nil).
    static func predicate(_ text: String, now moment: Date?) throws -> QueryPredicate {
        guard let moment else { return try predicate(text) }
        return try QueryPredicate.$parsingMoment.withValue(moment) { try predicate(text) }
    }

    static func predicate(_ text: String) throws -> QueryPredicate {
        do {
            return try QueryPredicate(format: text)
        } catch let error as StratusError {
            throw UsageError(message: "--where: \(error.message)")
        }
    }

    static func sortDescriptor(_ text: String) throws -> RecordSortDescriptor {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty else { throw UsageError(message: "--sort takes KEY or KEY:desc, not '\(text)'") }
        if parts.count == 2 && !["asc", "desc"].contains(parts[1]) {
            throw UsageError(message: "--sort direction must be asc or desc, not '\(parts[1])'")
        }
        return RecordSortDescriptor(key: String(parts[0]), ascending: parts.count == 1 || parts[1] == "asc")
    }

    /// The query, or nil without `--type`.
    func makeQuery() throws -> Query? {
        guard let recordType else { return nil }
        let query = Query(recordType: recordType, predicate: try predicateText.map(Self.predicate) ?? .all)
        query.sortDescriptors = sorts
        return query
    }

    /// The query; `--type` is required.
    func requireQuery() throws -> Query {
        guard let query = try makeQuery() else { throw UsageError(message: "--type is required") }
        return query
    }
}

extension ParsedArguments {
    /// `--types NAME:TYPE,...` as column types by field name.
    ///
    /// - Throws: ``UsageError`` naming the pair that is not `NAME:TYPE` with a known type.
    func fieldTypes(_ name: String) throws -> [String: FieldType] {
        guard let text = value(name) else { return [:] }
        var types: [String: FieldType] = [:]
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw UsageError(message: "\(name) takes NAME:TYPE pairs such as count:INT64, not '\(pair)'")
            }
            types[String(parts[0])] = try Self.fieldType(String(parts[1]), in: name, item: String(pair))
        }
        return types
    }

    /// `--types NAME:TYPE,...` as CSV column types by field name, where a type may be encrypted
    /// (`secret:ENCRYPTED_BYTES`, as a CSV header writes it), and the fields so given.
    ///
    /// - Throws: ``UsageError`` naming the pair that is not `NAME:TYPE` with a known type, or
    ///   the field given twice.
    func columnTypes(_ name: String) throws -> (types: [String: FieldType], encrypted: Set<String>) {
        guard let text = value(name) else { return ([:], []) }
        var types: [String: FieldType] = [:]
        var encrypted: Set<String> = []
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw UsageError(message: "\(name) takes NAME:TYPE pairs such as count:INT64, not '\(pair)'")
            }
            let (type, isEncrypted) = try Self.columnType(String(parts[1]), in: name, item: String(pair))
            let field = String(parts[0])
            // Two types for one field leave the column's type to the order of the pairs (and an
            // encrypted one stayed encrypted whatever came after it): ambiguous, as a key given
            // twice in the input is.
            guard types[field] == nil else {
                throw UsageError(message: "\(name) gives the field '\(field)' twice; give each field one type")
            }
            types[field] = type
            if isEncrypted { encrypted.insert(field) }
        }
        return (types, encrypted)
    }

    /// A CSV column's type: a field type, or `ENCRYPTED_` and one (a column of encrypted values).
    static func columnType(_ text: String, in option: String, item: String) throws -> (FieldType, encrypted: Bool) {
        let upper = text.uppercased()
        if upper.hasPrefix("ENCRYPTED_"), let type = FieldType(rawValue: String(upper.dropFirst("ENCRYPTED_".count))) { return (type, true) }
        return (try fieldType(text, in: option, item: item), false)
    }

    static func fieldType(_ text: String, in option: String, item: String) throws -> FieldType {
        guard let type = FieldType(rawValue: text.uppercased()) else {
            throw UsageError(message: "\(option): '\(item)' names the type '\(text)'; the types are \(FieldType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return type
    }
}
