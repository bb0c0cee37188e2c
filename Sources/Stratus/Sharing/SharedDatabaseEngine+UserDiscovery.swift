// The shared database's engine reads and writes the user directory as the store's own engine.
extension SharedDatabaseEngine {
    func findUsers(containerIdentifier: String, addressKeys: [String], userRecordNames: [String]) throws -> [UserDirectoryEntry] {
        try base.findUsers(containerIdentifier: containerIdentifier, addressKeys: addressKeys, userRecordNames: userRecordNames)
    }

    func saveUserDiscoverability(containerIdentifier: String, login: String, userRecordName: String, isDiscoverable: Bool) throws {
        try base.saveUserDiscoverability(containerIdentifier: containerIdentifier, login: login, userRecordName: userRecordName, isDiscoverable: isDiscoverable)
    }
}
