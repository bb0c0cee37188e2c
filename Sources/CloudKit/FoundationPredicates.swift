import Foundation
import Stratus
import Synchronization

// CloudKit code makes its predicates with Foundation's `NSPredicate(format:)` and
// `NSPredicate(value: true)` and sorts with `NSSortDescriptor(key:ascending:)`. Linux's
// Foundation has the class but parses no format and has no key-value coding, so under
// `import CloudKit` this module gives those calls their CloudKit meaning: `CKQuery` and
// `CKQuerySubscription` take the predicates, and the sort is a ``RecordSortDescriptor``.

extension Query {
    /// `CKQuery(recordType:predicate:)` with a Foundation `NSPredicate`: one made by
    /// `NSPredicate(format:)` or `NSPredicate(value:)`, or an `NSCompoundPredicate` of such
    /// predicates with AND or NOT.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let everyNote = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
    /// let pinned = CKQuery(recordType: "Note", predicate: NSPredicate(format: "pinned == 1"))
    /// ```
    ///
    /// - Precondition: `predicate` is made so. A block predicate, or OR, stops the program, as
    ///   CloudKit raises an exception for them.
    public convenience init(recordType: String, predicate: NSPredicate) {
        self.init(recordType: recordType, predicate: QueryPredicate(foundationPredicate: predicate, in: "CKQuery(recordType:predicate:)"))
    }
}

extension QuerySubscription {
    /// `CKQuerySubscription(recordType:predicate:subscriptionID:options:)` with a Foundation
    /// `NSPredicate`, as `CKQuery(recordType:predicate:)` takes one.
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

    /// `CKQuerySubscription(recordType:predicate:options:)` with a Foundation `NSPredicate`: a
    /// subscription named with a new UUID.
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
    /// The predicate a Foundation `NSPredicate` stands for: one made by
    /// `NSPredicate(format:)` (this module's), by `NSPredicate(value:)`, or AND and NOT of such.
    /// Linux's Foundation tells a value predicate only by comparison: it is equal to another of
    /// the same value, where a block predicate is equal to none.
    fileprivate init(foundationPredicate predicate: NSPredicate, in call: String) {
        if let parsed = FormatPredicates.parsed(for: predicate) {
            self = parsed
        } else if let compound = predicate as? NSCompoundPredicate {
            let parts = compound.subpredicates.map { QueryPredicate(foundationPredicate: $0, in: call) }
            switch compound.compoundPredicateType {
            case .and:
                let conditions = parts.filter { $0 != .all }
                self = conditions.contains(.none) ? .none : QueryPredicate(andPredicateWithSubpredicates: conditions)
            case .not where parts.count == 1:
                switch parts[0] {
                case .all: self = .none
                case .none: self = .all
                default: self = QueryPredicate(notPredicateWithSubpredicate: parts[0])
                }
            case .not: preconditionFailure("\(call): NOT takes one predicate, not \(parts.count)")
            case .or: preconditionFailure("\(call): CloudKit refuses OR; run one query per alternative, or use IN for one field")
            @unknown default: preconditionFailure("\(call): an NSCompoundPredicate of an unknown type")
            }
        } else if predicate.isEqual(NSPredicate(value: true)) {
            self = .all
        } else if predicate.isEqual(NSPredicate(value: false)) {
            self = .none
        } else if let parsed = FormatPredicates.parsed(askingBlockOf: predicate) {
            // A copy of an `NSPredicate(format:)`: another object with the same block.
            self = parsed
        } else {
            preconditionFailure("\(call) takes predicates made by NSPredicate(format:) or NSPredicate(value:); CloudKit refuses block predicates")
        }
    }
}

extension NSPredicate {
    /// `NSPredicate(format:…)` as CloudKit code writes it, for `CKQuery` and
    /// `CKQuerySubscription`: the format is parsed by ``QueryPredicate/init(format:_:)`` (Linux's
    /// Foundation parses no predicate format; its own initializer is unavailable).
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let predicate = NSPredicate(format: "owner == %@ AND done == %@", ownerReference, NSNumber(value: false))
    /// let query = CKQuery(recordType: "Task", predicate: predicate)
    /// ```
    ///
    /// `evaluate(with:)` answers for a `CKRecord` as a query of its type would match it.
    ///
    /// - Precondition: the format parses, as `NSPredicate(format:)` raises an exception for one
    ///   that does not; the program stops with the position and the reason.
    ///   `try QueryPredicate(format:)` throws instead.
    public convenience init(format predicateFormat: String, _ arguments: Any...) {
        self.init(format: predicateFormat, argumentArray: arguments)
    }

    /// `NSPredicate(format:argumentArray:)` as CloudKit code writes it (see
    /// ``NSPredicate/init(format:_:)``).
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// let predicate = NSPredicate(format: "color IN %@", argumentArray: [["red", "green"]])
    /// ```
    ///
    /// - Precondition: the format parses.
    public convenience init(format predicateFormat: String, argumentArray arguments: [Any]?) {
        let parsed: QueryPredicate
        do {
            parsed = try QueryPredicate(format: predicateFormat, argumentArray: arguments)
        } catch {
            preconditionFailure("NSPredicate(format:): \(error)")
        }
        self.init { object, _ in
            if let question = object as? FormatPredicates.Question {
                question.parsed = parsed
                return false
            }
            guard let record = object as? Record else {
                preconditionFailure("NSPredicate(format: \"\(predicateFormat)\").evaluate(with:) reads CKRecords only; Linux's Foundation has no key-value coding")
            }
            do {
                return try record.matches(parsed)
            } catch {
                preconditionFailure("NSPredicate(format: \"\(predicateFormat)\").evaluate(with:): \(error)")
            }
        }
        FormatPredicates.remember(parsed, for: self)
    }
}

/// What each `NSPredicate(format:)` of this process parsed to, found again by the predicate
/// object when a query or subscription is made of it: Linux's `NSPredicate` keeps no format,
/// and an initializer of Foundation's class cannot return a subclass that would.
private enum FormatPredicates {
    private struct Entry {
        weak var predicate: NSPredicate?
        let parsed: QueryPredicate
    }

    private static let entries = Mutex<(byObject: [ObjectIdentifier: Entry], sweepAt: Int)>(([:], 64))

    static func remember(_ parsed: QueryPredicate, for predicate: NSPredicate) {
        entries.withLock { table in
            // Entries of predicates freed since are dropped now and then, so the table stays
            // the size of the predicates alive.
            if table.byObject.count >= table.sweepAt {
                table.byObject = table.byObject.filter { $0.value.predicate != nil }
                table.sweepAt = max(64, table.byObject.count * 2)
            }
            table.byObject[ObjectIdentifier(predicate)] = Entry(predicate: predicate, parsed: parsed)
        }
    }

    /// Handed to a predicate's block to ask what it stands for: the block of an
    /// `NSPredicate(format:)` answers with what it parsed. Linux's `copy()` of a block predicate
    /// is a new object with the same block (wrappers that make a predicate `Sendable` copy it),
    /// which the table does not know but the block still answers for.
    final class Question: @unchecked Sendable {
        var parsed: QueryPredicate?
    }

    /// What a predicate the table does not know stands for, asked of its block; `nil` for a
    /// block that is not an `NSPredicate(format:)`'s (CloudKit refuses block predicates).
    static func parsed(askingBlockOf predicate: NSPredicate) -> QueryPredicate? {
        let question = Question()
        _ = predicate.evaluate(with: question)
        return question.parsed
    }

    static func parsed(for predicate: NSPredicate) -> QueryPredicate? {
        entries.withLock { table in
            // An address reused by a later object is another predicate: the entry's own is gone.
            guard let entry = table.byObject[ObjectIdentifier(predicate)], entry.predicate === predicate else { return nil }
            return entry.parsed
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
/// `RecordSortDescriptor` (or `CloudKit.NSSortDescriptor`), or `Foundation.NSSortDescriptor`
/// for Foundation's.
public typealias NSSortDescriptor = RecordSortDescriptor
