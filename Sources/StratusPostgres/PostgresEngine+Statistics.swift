import Foundation
import Synchronization

/// When this engine asks PostgreSQL to analyze the records and their words again: after it has
/// inserted 1,000 records into a zone, then 4,000, 16,000 and so on (each four times the last).
///
/// PostgreSQL plans with the statistics `ANALYZE` last gathered, and autovacuum gathers them
/// again only after a tenth of a table changed, and at most once a minute. A zone filled since
/// (an import into a new zone, the cron job's first step) is, to the planner, a zone of no
/// rows: a word search in it then joins every record with every word of the zone (20,000
/// records took 106 s instead of 0.04 s, measured). Fourfold steps keep the planner's idea of
/// a growing zone within four times its size, at a handful of analyses per import (each
/// samples 300 rows per unit of the statistics target, 30,000 at PostgreSQL's default of 100,
/// whatever the table's size).
struct StatisticsSchedule: Sendable {
    static let firstAnalysis = 1_000
    static let growth = 4

    /// Zones whose counts are kept at most: a service that lives for months and writes into a
    /// zone per user would otherwise keep an entry for every zone it ever wrote. A zone
    /// forgotten starts counting again from its first step (1,000), so the largest are kept.
    static let maximumZones = 4_096

    /// Records this engine inserted into each zone (by its row), and the count at which the
    /// zone's next analysis is due.
    private var inserted: [Int64: (count: Int, nextAnalysis: Int)] = [:]

    /// The zones whose counts are kept (see ``maximumZones``).
    var zonesCounted: Int { inserted.count }
    /// Set once the login role turned out neither to own the tables (`ANALYZE` is their
    /// owner's) nor to be allowed the owner's `stratus_analyze()`.
    var mayNotAnalyze = false

    /// Counts `counts` (records inserted by one committed transaction, by zone row) and answers
    /// whether an analysis is due.
    mutating func note(_ counts: [Int64: Int]) -> Bool {
        var due = false
        for (zone, added) in counts where added > 0 {
            if inserted[zone] == nil && inserted.count >= Self.maximumZones { forgetSmallZones() }
            var entry = inserted[zone] ?? (0, Self.firstAnalysis)
            entry.count += added
            if entry.count >= entry.nextAnalysis {
                due = true
                while entry.nextAnalysis <= entry.count { entry.nextAnalysis *= Self.growth }
            }
            inserted[zone] = entry
        }
        return due && !mayNotAnalyze
    }

    /// Makes room for another zone: the zones that have not yet reached their first analysis
    /// go (a small zone plans well enough without one), and when most have, all but the
    /// largest quarter.
    private mutating func forgetSmallZones() {
        inserted = inserted.filter { $0.value.count >= Self.firstAnalysis }
        if inserted.count >= Self.maximumZones / 2 {
            let largest = inserted.sorted { $0.value.count > $1.value.count }.prefix(Self.maximumZones / 4)
            inserted = Dictionary(uniqueKeysWithValues: largest.map { ($0.key, $0.value) })
        }
    }
}

extension PostgresEngine {
    /// The advisory lock an analysis holds, so that of processes whose inserts make one due at
    /// once, one runs it (`"STRATANA"`).
    static let analysisLock: Int64 = 0x5354_5241_5441_4E41

    /// The columns an analysis gathers statistics of: those queries find rows by (zones,
    /// types, names, words). Leaving out the documents (`fields`, `exact_fields`) and their
    /// expression indexes, which autovacuum's full analyses keep, makes it cheap: an import of
    /// 200,000 records took 1.18 times as long with full analyses, 1.02 times with these
    /// (paired runs, BENCHMARKS.md).
    static func analyzedColumns(schema: String?) -> String {
        let prefix = schema.map { "\($0)." } ?? ""
        return "\(prefix)records (zone_id, owner, record_type, record_name, parent_name, change_seq), \(prefix)record_tokens (zone_id, token, record_name)"
    }

    /// Analyzes `records` and `record_tokens` when the records this engine inserted make it
    /// due (``StatisticsSchedule``). Called after a write commits. A member of the row-level
    /// security group asks the tables' owner's `stratus_analyze()`; a role that is neither
    /// skips. An analysis that another (of any process) is running, or that waits more than a
    /// moment for autovacuum's, is skipped.
    func analyzeIfGrown(_ inserted: [Int64: Int]) {
        guard !inserted.isEmpty, statistics.withLock({ $0.note(inserted) }) else { return }
        do {
            try pool.withTransaction(isolation: .readCommitted) { connection in
                let row = try connection.query("""
                    SELECT pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE'),
                           pg_catalog.has_function_privilege(p.oid, 'EXECUTE')
                    FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure('stratus_analyze()')
                    WHERE c.oid = pg_catalog.to_regclass('records')
                    """).first
                let (owns, delegated) = (try row?.bool(0) ?? false, try row?.bool(1) ?? false)
                guard owns || delegated else {
                    statistics.withLock { $0.mayNotAnalyze = true }
                    return
                }
                guard !owns else {
                    if try connection.query("SELECT pg_try_advisory_xact_lock(\(Self.analysisLock))")[0].bool(0) == true {
                        try connection.executeScript("SET LOCAL lock_timeout = '200ms'; ANALYZE \(Self.analyzedColumns(schema: nil))")
                    }
                    return
                }
                try connection.execute("SELECT stratus_analyze()")
            }
        } catch {
            // The statistics are a help to the planner, never a condition of the write, which committed.
        }
    }
}
