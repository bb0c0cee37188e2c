import Stratus

extension Option {
    static let recordType = Option("--type", "TYPE", "the record type", default: "none; required")
    static let predicate = Option("--where", "PREDICATE", #"a CloudKit predicate, e.g. "checked == 0 AND title BEGINSWITH 'B'""#, default: "every record (TRUEPREDICATE)")
    static let sort = Option("--sort", "KEY[:desc]", "sort by KEY, ascending unless :desc; ties are broken by record name", default: "record name", repeatable: true)
    static let fields = Option("--fields", "K1,K2", "only these fields", default: "every field")
}

/// Which records a command reads: `--type`, `--where`, `--sort`, `--fields`.
struct QuerySelection {
    var recordType: String?
    var predicateText: String?
    var sorts: [RecordSortDescriptor] = []
    var fields: [String]?

    /// Reads the options the command declares; `--where` is parsed here, so that a bad
    /// predicate is a usage error before anything is opened.
    init(_ arguments: ParsedArguments) throws {
        recordType = arguments.value("--type")
        predicateText = arguments.value("--where")
        if let predicateText { _ = try Self.predicate(predicateText) }
        sorts = try arguments.values("--sort").map(Self.sortDescriptor)
        fields = try arguments.list("--fields")
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
