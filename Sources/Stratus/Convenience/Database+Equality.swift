import Foundation

/// Databases compare as `CKDatabase`s do, as objects: a database equals itself, so code that
/// groups work by database (`if element.database == database`, a `Set<Database>`, a
/// dictionary keyed by database) ports unchanged.
///
/// The database that `configuredWith(configuration:group:body:)` hands its body is the same
/// database with a configuration, so it equals the one it was made from: they share one
/// operation queue, which every ``Container`` makes once per database. Two containers opened
/// on the same store are two objects, and so are their databases, as two `CKContainer`s'.
///
/// ```swift
/// var pending: [Database: [Record]] = [:]
/// pending[container.privateCloudDatabase, default: []].append(note)
/// assert(container.privateCloudDatabase != container.publicCloudDatabase)
/// ```
extension Database: Hashable {
    public static func == (lhs: Database, rhs: Database) -> Bool {
        lhs.operationQueue === rhs.operationQueue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(operationQueue))
    }
}
