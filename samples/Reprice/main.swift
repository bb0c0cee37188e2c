// Reprice: a three-stage pipeline over a large store that survives being killed.
//
//   swift run -c release reprice generate --store PATH|URL --count 1000000
//   swift run -c release reprice run --store PATH|URL [--job NAME] [--batch N]
//   swift run -c release reprice verify --store PATH|URL --count 1000000
//
// `generate` fills the store with Product records p-0000000…: a category, a price and a
// revision 0; every tenth product is discontinued. `run` raises the price of every product on
// sale by 10% and counts the change in its revision, in three stages on three queues:
//
//   QueryOperation (every page, one snapshot) → TransformOperation (price × 1.1, revision + 1)
//       → ModifyRecordsOperation (change tags checked)
//
// with a PipelineCheckpoint, so each batch's transaction also records the query's cursor.
// Kill `run` at any moment (kill -9 included) and start it again: it goes on after the last
// committed batch. The transform is not idempotent — a product processed twice would end with
// revision 2 and its price raised twice — so `verify` checks exactly once: every product on
// sale at revision 1 with its price raised once, every discontinued product untouched.
// Once the whole pipeline completed, the job's position is removed: `run` again after
// "repriced in …" is a new repricing, not a resumption (a kill after that line, before the
// process exits, ends a finished job).
// Exit status 0, or 1 with the problems on stderr.
import Foundation
import Stratus
import StratusPostgres
import StratusSQLite

func takeOption(_ name: String, from arguments: inout [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("reprice: \(message)\n".utf8))
    exit(1)
}

func say(_ message: String) { FileHandle.standardError.write(Data("reprice: \(message)\n".utf8)) }

/// The products, and what a repricing does to them: all derived from the product's number.
enum Catalog {
    static let categories = ["books", "music", "garden", "kitchen", "toys", "tools", "games", "sports", "office", "pets"]
    static func name(_ i: Int) -> String { "p-" + String(repeating: "0", count: max(0, 7 - String(i).count)) + String(i) }
    static func number(_ name: String) -> Int? { Int(name.dropFirst(2)) }
    static func basePrice(_ i: Int) -> Double { Double(i % 1_000) + 0.99 }
    static func isDiscontinued(_ i: Int) -> Bool { i % 10 == 9 }
    static func raised(_ price: Double) -> Double { (price * 110).rounded() / 100 }

    static func product(_ i: Int) -> Record {
        let record = Record(recordType: "Product", recordID: Record.ID(recordName: name(i)))
        record["category"] = categories[i % categories.count]
        record["price"] = basePrice(i)
        record["revision"] = Int64(0)
        record["discontinued"] = Int64(isDiscontinued(i) ? 1 : 0)
        return record
    }
}

/// Products 0..<count, generated as they are read, for the importer.
final class ProductSource: RecordSource {
    private let count: Int
    private var next = 0
    init(count: Int) { self.count = count }
    func nextItem() throws -> RecordSourceItem? {
        guard next < count else { return nil }
        defer { next += 1 }
        return .record(Catalog.product(next), line: next + 1)
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "" : arguments.removeFirst()
guard let storePath = takeOption("--store", from: &arguments) else {
    fail("usage: reprice generate|run|verify --store PATH|URL [--count N] [--job NAME] [--batch N]")
}
let count = Int(takeOption("--count", from: &arguments) ?? "1000000") ?? 1_000_000
let job = takeOption("--job", from: &arguments) ?? "reprice"
let batch = Int(takeOption("--batch", from: &arguments) ?? "1000") ?? 1_000
if let unknown = arguments.first { fail("unknown argument '\(unknown)'") }

do {
    // A PostgreSQL URL or an SQLite file, as `stratus --store` takes them.
    let container = PostgresEngine.isStoreURL(storePath)
        ? try Container(identifier: "com.example.reprice", postgresURL: storePath, userName: "reprice")
        : try Container(identifier: "com.example.reprice", storePath: storePath, userName: "reprice")
    let database = container.publicCloudDatabase
    let start = Date()

    switch command {
    case "generate":
        var options = RecordImporter.Options()
        options.writeMode = .forceReplace
        options.preservesSystemFields = false
        let summary = try await RecordImporter(database: database, options: options).run(from: ProductSource(count: count))
        say(String(format: "generated %d products in %.1f s", summary.created + summary.updated + summary.unchanged, Date().timeIntervalSince(start)))

    case "run":
        // 1. Every product on sale, a page (a batch) at a time, from one snapshot.
        let query = QueryOperation(query: try Query(recordType: "Product", predicate: QueryPredicate(format: "discontinued == 0")))
        query.fetchAllResults = true
        query.resultsLimit = batch
        query.desiredKeys = ["price", "revision"]
        query.checkpoint = PipelineCheckpoint(job: job)
        // 2. The new price, and the change counted.
        let reprice = TransformOperation(transforming: query) { (products: [Record]) -> [Record] in
            for product in products {
                // Read as typed values: `as? Double` would read through an NSNumber.
                let price: Double = product["price"] ?? 0, revision: Int64 = product["revision"] ?? 0
                product["price"] = Catalog.raised(price)
                product["revision"] = revision + 1
            }
            return products
        }
        // 3. Saved only if nobody changed the product since it was read.
        // Products that failed come in the final result (partialFailure, by record ID): a
        // per-record block would have the save make each product as stored, for nobody.
        let save = ModifyRecordsOperation(savingRecordsFrom: reprice)
        save.isAtomic = false
        let stages: [DatabaseOperation] = [query, reprice, save]
        let queues = ["read", "reprice", "save"].map { name -> OperationQueue in
            let queue = OperationQueue()
            queue.name = "reprice.\(name)"
            queue.maxConcurrentOperationCount = 1
            return queue
        }
        let result: Result<Void, any Error> = await withCheckedContinuation { continuation in
            save.modifyRecordsResultBlock = { continuation.resume(returning: $0) }
            for (stage, queue) in zip(stages, queues) {
                stage.database = database
                queue.addOperation(stage)
            }
        }
        if case .failure(let error) = result {
            guard let error = error as? StratusError, error.code == .partialFailure else { fail("the pipeline stopped: \(error)") }
            let failures = error.partialErrorsByRecordID.map { "\($0.key.recordName): \($0.value)" }.sorted()
            fail("\(failures.count) products failed, e.g. \(failures.prefix(3))")
        }
        say(String(format: "repriced in %.1f s", Date().timeIntervalSince(start)))

    case "verify":
        var problems: [String] = []
        var seen = 0
        for try await product in database.allRecords(matching: Query(recordType: "Product"), pageSize: 5_000) {
            let name = product.recordID.recordName
            guard let i = Catalog.number(name), i < count else {
                problems.append("\(name) is not a generated product")
                continue
            }
            seen += 1
            let price = product["price"] as? Double, revision = product["revision"] as? Int64
            let expected = Catalog.isDiscontinued(i) ? (Catalog.basePrice(i), Int64(0)) : (Catalog.raised(Catalog.basePrice(i)), Int64(1))
            if price != expected.0 || revision != expected.1 {
                problems.append("\(name): price \(price.map(String.init(describing:)) ?? "none"), revision \(revision.map(String.init) ?? "none"); expected \(expected.0), revision \(expected.1)")
            }
        }
        if seen != count { problems.append("\(seen) products in the store, not \(count)") }
        if !problems.isEmpty { fail("\(problems.count) problem(s): \(problems.prefix(5).joined(separator: "; "))") }
        print("ok: \(count) products, each repriced exactly once")

    default:
        fail("usage: reprice generate|run|verify --store PATH|URL [--count N] [--job NAME] [--batch N]")
    }
} catch {
    fail("\(error)")
}
