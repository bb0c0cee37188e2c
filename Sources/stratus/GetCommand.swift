import Foundation
import Stratus
import StratusTransfer

/// `stratus get NAME...`: records by name, as NDJSON.
struct GetCommand {
    static let usage = """
        usage: stratus get RECORD_NAME... [--fields K1,K2] [store options]

        Prints each record as one line of CloudKit record JSON on stdout; a missing record is
        reported on stderr and makes the exit code 1.
        """

    var store: StoreOptions
    var names: [String]
    var fields: [String]?

    init(_ arguments: inout Arguments) throws {
        store = try StoreOptions(&arguments)
        fields = try arguments.value("--fields").map { $0.split(separator: ",").map(String.init) }
        try arguments.rejectUnknownOptions()
        names = arguments.words
        if names.isEmpty { throw UsageError(message: "name at least one record") }
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase()
        let ids = names.map { Record.ID(recordName: $0, zoneID: store.zoneID) }
        let results = try await database.records(for: ids, desiredKeys: fields)
        var missing = 0
        for id in ids {
            switch results[id] {
            case .success(let record)?:
                print(RecordJSONWriter.json(for: record))
            case .failure(let error)?:
                missing += 1
                FileHandle.standardError.write(Data("stratus: \(id.recordName): \(error)\n".utf8))
            case nil:
                missing += 1
            }
        }
        return missing == 0 ? .success : .someFailed
    }
}
