import Foundation

@_spi(StratusEngine)
extension UserDirectoryEntry {
    /// How engines store an entry's roles: a JSON array of role names, sorted, so that equal
    /// sets are equal text.
    ///
    /// ```swift
    /// let text = UserDirectoryEntry.storedRoles(["moderator"])   // ["moderator"]
    /// ```
    public static func storedRoles(_ roles: Set<SecurityRole>) -> String {
        let names = roles.map(\.name).sorted()
        // An array of strings always encodes.
        return String(decoding: (try? JSONEncoder().encode(names)) ?? Data("[]".utf8), as: UTF8.self)
    }

    /// The roles ``storedRoles(_:)`` wrote.
    ///
    /// - Throws: `badDatabase` for text that is not an array of role names.
    public static func roles(stored text: String) throws -> Set<SecurityRole> {
        do {
            return Set(try JSONDecoder().decode([String].self, from: Data(text.utf8)).map { SecurityRole($0) })
        } catch {
            throw StratusError(.badDatabase, "the roles of a user directory entry do not decode: \(error)")
        }
    }

    /// The error an engine reports when the entry's record name is another login's already
    /// (record names are unique per container).
    public func duplicateRecordNameError(containerIdentifier: String) -> StratusError {
        StratusError(.constraintViolation, "login '\(login)' cannot have user record name \(userRecordName): another login of \(containerIdentifier) has it (or it is saved twice)")
    }
}
