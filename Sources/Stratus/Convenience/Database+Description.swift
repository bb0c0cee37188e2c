import Foundation

/// A database prints as a `CKDatabase` does, naming its container and scope, so code that
/// logs a database, or a protocol that asks for `debugDescription` (as test doubles of
/// `CKDatabase` do: `protocol DatabaseType { var debugDescription: String { get } … }`), ports.
///
/// ```swift
/// print(container.privateCloudDatabase)   // <Database: iCloud.com.example.app, private, development>
/// ```
extension Database: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String {
        "<Database: \(context.containerIdentifier), \(context.scope.name), \(context.environment)>"
    }

    public var debugDescription: String { description }
}
