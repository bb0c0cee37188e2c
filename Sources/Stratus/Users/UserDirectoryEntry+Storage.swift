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

// MARK: - Discovery

@_spi(StratusEngine)
extension UserDirectoryEntry {
    /// One address of an entry as engines store it: the key lookups compare
    /// (``addressKey(emailAddress:)``, ``addressKey(phoneNumber:)``) and the address as given.
    public struct StoredAddress: Hashable, Sendable {
        public var key: String
        public var address: String

        public init(key: String, address: String) {
            self.key = key
            self.address = address
        }
    }

    /// The entry's addresses as engines store them, emails first, each in the order given.
    /// The entry was checked (``validate()``); an address that is not valid has no key and is
    /// left out.
    public var storedAddresses: [StoredAddress] {
        emailAddresses.compactMap { address in Self.addressKey(emailAddress: address).map { StoredAddress(key: $0, address: address) } }
            + phoneNumbers.compactMap { number in Self.addressKey(phoneNumber: number).map { StoredAddress(key: $0, address: number) } }
    }

    /// Sets the entry's addresses from what an engine stored (``storedAddresses``, in order).
    public mutating func setAddresses(stored addresses: [StoredAddress]) {
        emailAddresses = addresses.filter { $0.key.hasPrefix(Self.emailKeyPrefix) }.map(\.address)
        phoneNumbers = addresses.filter { $0.key.hasPrefix(Self.phoneKeyPrefix) }.map(\.address)
    }

    /// How engines store a name: a JSON object of its parts (`namePrefix`, `givenName`,
    /// `middleName`, `familyName`, `nameSuffix`, `nickname`), keys sorted; `nil` for none.
    ///
    /// ```swift
    /// UserDirectoryEntry.storedNameComponents(PersonNameComponents(givenName: "Bob"))   // {"givenName":"Bob"}
    /// ```
    public static func storedNameComponents(_ name: PersonNameComponents?) -> String? {
        guard let parts = name?.cloudKitParts else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // A dictionary of strings always encodes.
        return String(decoding: (try? encoder.encode(parts)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The name ``storedNameComponents(_:)`` wrote.
    ///
    /// - Throws: `badDatabase` for text that is not an object of strings.
    public static func nameComponents(stored text: String?) throws -> PersonNameComponents? {
        guard let text else { return nil }
        let parts: [String: String]
        do {
            parts = try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
        } catch {
            throw StratusError(.badDatabase, "the name of a user directory entry does not decode: \(error)")
        }
        return PersonNameComponents(cloudKitParts: parts)
    }

    /// The error an engine reports when an entry's address is another login's already.
    public func duplicateAddressError(_ address: String, otherLogin: String, containerIdentifier: String) -> StratusError {
        StratusError(.constraintViolation, "login '\(login)' cannot have address '\(address)': login '\(otherLogin)' of \(containerIdentifier) has it (an address finds one user)")
    }
}
