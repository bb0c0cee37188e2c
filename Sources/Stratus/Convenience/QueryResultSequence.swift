import Foundation

/// Every record matching a query, as an `AsyncSequence` that fetches one page at a time.
///
/// Memory holds one page. Iteration throws the first error a page reports.
///
/// ```swift
/// var count = 0
/// for try await _ in database.allRecords(matching: Query(recordType: "Todo")) { count += 1 }
/// ```
public struct QueryResultSequence: AsyncSequence, Sendable {
    public typealias Element = Record

    let database: Database
    let query: Query
    let zoneID: RecordZone.ID?
    let desiredKeys: [String]?
    let pageSize: Int

    public func makeAsyncIterator() -> Iterator {
        Iterator(sequence: self)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let sequence: QueryResultSequence
        var buffer: [Record] = []
        var bufferIndex = 0
        var cursor: QueryOperation.Cursor?
        var started = false

        init(sequence: QueryResultSequence) { self.sequence = sequence }

        public mutating func next() async throws -> Record? {
            while bufferIndex == buffer.count {
                if started && cursor == nil { return nil }
                let page: (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)
                if let cursor {
                    page = try await sequence.database.records(continuingMatchFrom: cursor, desiredKeys: sequence.desiredKeys, resultsLimit: sequence.pageSize)
                } else {
                    page = try await sequence.database.records(matching: sequence.query, inZoneWith: sequence.zoneID, desiredKeys: sequence.desiredKeys, resultsLimit: sequence.pageSize)
                }
                started = true
                buffer = try page.matchResults.map { try $0.1.get() }
                bufferIndex = 0
                cursor = page.queryCursor
            }
            defer { bufferIndex += 1 }
            return buffer[bufferIndex]
        }
    }
}
