/// `CKQueryOperationMaximumResults`, the pre-Swift 4.2 spelling of
/// ``QueryOperation/maximumResults``: a ``QueryOperation/resultsLimit`` that asks for the
/// store's default page size (``QueryOperation/defaultResultsLimit`` records) instead of a
/// fixed count. Older CloudKit code (EVCloudKitDao's queries, for one) sets it by this name.
///
/// ```swift
/// let operation = QueryOperation(query: Query(recordType: "Message"))
/// operation.resultsLimit = QueryOperationMaximumResults
/// database.add(operation)
/// ```
public let QueryOperationMaximumResults = QueryOperation.maximumResults
