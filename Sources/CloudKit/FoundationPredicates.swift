import Foundation
import Stratus

// CloudKit code makes its "every record" queries and subscriptions with Foundation's
// `NSPredicate(value: true)`, which Linux's Foundation has (its `NSPredicate(format:)` does not
// parse; `QueryPredicate(format:)` does). These initializers take such a predicate as CloudKit's
// do, so that code stays as written.

extension Query {
    /// `CKQuery(recordType:predicate:)` with Foundation's `NSPredicate(value:)`, or an
    /// `NSCompoundPredicate` of such predicates.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let everyNote = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
    /// ```
    ///
    /// - Precondition: `predicate` is made by `NSPredicate(value:)` or of such predicates with
    ///   AND or NOT. A block predicate stops the program, as CloudKit raises an exception for
    ///   it; a condition on fields is a ``QueryPredicate`` (`QueryPredicate(format:)`).
    public convenience init(recordType: String, predicate: NSPredicate) {
        self.init(recordType: recordType, predicate: QueryPredicate(foundationPredicate: predicate, in: "CKQuery(recordType:predicate:)"))
    }
}

extension QuerySubscription {
    /// `CKQuerySubscription(recordType:predicate:subscriptionID:options:)` with Foundation's
    /// `NSPredicate(value:)`, or an `NSCompoundPredicate` of such predicates.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let subscription = CKQuerySubscription(recordType: "Note", predicate: NSPredicate(value: true),
    ///                                        subscriptionID: "notes", options: [.firesOnRecordCreation])
    /// ```
    ///
    /// - Precondition: as for `CKQuery(recordType:predicate:)` with an `NSPredicate`.
    public convenience init(recordType: String, predicate: NSPredicate, subscriptionID: Subscription.ID,
                            options: Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) {
        self.init(recordType: recordType, predicate: QueryPredicate(foundationPredicate: predicate, in: "CKQuerySubscription(recordType:predicate:…)"),
                  subscriptionID: subscriptionID, options: options)
    }

    /// `CKQuerySubscription(recordType:predicate:options:)` with Foundation's
    /// `NSPredicate(value:)`: a subscription named with a new UUID.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let subscription = CKQuerySubscription(recordType: "Note", predicate: NSPredicate(value: true))
    /// ```
    ///
    /// - Precondition: as for `CKQuery(recordType:predicate:)` with an `NSPredicate`.
    public convenience init(recordType: String, predicate: NSPredicate,
                            options: Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) {
        self.init(recordType: recordType, predicate: predicate, subscriptionID: UUID().uuidString, options: options)
    }
}

extension QueryPredicate {
    /// The predicate a Foundation `NSPredicate(value:)`, or AND and NOT of such, stands for.
    /// Linux's Foundation tells a predicate's kind only by comparison: a value predicate is
    /// equal to another of the same value, a block predicate to none.
    fileprivate init(foundationPredicate predicate: NSPredicate, in call: String) {
        if let compound = predicate as? NSCompoundPredicate {
            let parts = compound.subpredicates.map { QueryPredicate(foundationPredicate: $0, in: call) }
            let values = parts.map { $0 == QueryPredicate(value: true) }
            switch compound.compoundPredicateType {
            case .and: self = QueryPredicate(value: !values.contains(false))
            case .not where values.count == 1: self = QueryPredicate(value: !values[0])
            case .not: preconditionFailure("\(call): NOT takes one predicate, not \(values.count)")
            case .or: preconditionFailure("\(call): CloudKit refuses OR; run one query per alternative, or use IN for one field")
            @unknown default: preconditionFailure("\(call): an NSCompoundPredicate of an unknown type")
            }
        } else if predicate.isEqual(NSPredicate(value: true)) {
            self = QueryPredicate(value: true)
        } else if predicate.isEqual(NSPredicate(value: false)) {
            self = QueryPredicate(value: false)
        } else {
            preconditionFailure("\(call) takes Foundation's NSPredicate(value:) on Linux, where NSPredicate(format:) cannot parse and CloudKit refuses block predicates; write a condition as QueryPredicate(format:)")
        }
    }
}

/// `NSSortDescriptor(key:ascending:)` as CloudKit code sorts a query: a ``RecordSortDescriptor``.
///
/// Linux's Foundation has no key-value coding, so its `NSSortDescriptor(key:ascending:)` is
/// unavailable; in an expression this name makes the record sort CloudKit's `sortDescriptors`
/// take.
///
/// ```swift
/// import CloudKit
///
/// let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
/// query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
/// ```
///
/// As a type (`[NSSortDescriptor]`) the name is ambiguous with Foundation's class: write
/// `RecordSortDescriptor` (or `Foundation.NSSortDescriptor` for Foundation's).
public typealias NSSortDescriptor = RecordSortDescriptor
