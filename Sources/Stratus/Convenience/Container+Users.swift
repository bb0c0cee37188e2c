extension Container {
    /// The container's user directory: every login with an entry, in login order.
    ///
    /// ```swift
    /// for entry in try await container.users() { print(entry.login, entry.userRecordName, entry.roles) }
    /// ```
    ///
    /// - Throws: store errors.
    public func users() async throws -> [UserDirectoryEntry] {
        let identifier = self.identifier
        return try await publicCloudDatabase.perform { engine, _ in try engine.fetchUserDirectory(containerIdentifier: identifier, logins: nil) }
    }

    /// Saves entries of the container's user directory, replacing those with the same login:
    /// which user record name a login acts as (for the owner of records imported from CloudKit)
    /// and which custom roles it holds. Containers already open keep what they read.
    ///
    /// Whoever can write the store can change the directory: on SQLite, anyone who can write the
    /// file.
    ///
    /// ```swift
    /// let carol = "_5a0f3c9e8b7d6a4f2e1c0b9a8d7e6f5a"   // her user record name in CloudKit
    /// try await container.saveUsers([UserDirectoryEntry(login: "carol", userRecordName: carol, roles: ["moderator"])])
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a bad entry; `constraintViolation` when
    ///   two logins would share a record name; store errors.
    public func saveUsers(_ entries: [UserDirectoryEntry]) async throws {
        for entry in entries { try entry.validate() }
        let identifier = self.identifier
        try await publicCloudDatabase.perform { engine, _ in
            try engine.modifyUserDirectory(containerIdentifier: identifier, saving: entries, deletingLogins: [])
        }
    }

    /// Gives a login custom roles (replacing those it had), keeping its record name: the one its
    /// entry names, else the derived one.
    ///
    /// ```swift
    /// try await container.assignRoles(["moderator"], toLogin: "carol")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a bad login or role; store errors.
    public func assignRoles(_ roles: Set<SecurityRole>, toLogin login: String) async throws {
        try UserDirectoryEntry.checkLogin(login)
        let identifier = self.identifier
        let existing = try await publicCloudDatabase.perform { engine, _ in
            try engine.fetchUserDirectory(containerIdentifier: identifier, logins: [login]).first { $0.hasLogin(login) }
        }
        var entry = existing ?? UserDirectoryEntry(login: login, userRecordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: login))
        entry.roles = roles
        try await saveUsers([entry])
    }

    /// Removes logins from the user directory: they act under their derived record names again,
    /// without custom roles.
    ///
    /// ```swift
    /// try await container.removeUsers(logins: ["carol"])
    /// ```
    ///
    /// - Throws: store errors.
    public func removeUsers(logins: [String]) async throws {
        let identifier = self.identifier
        try await publicCloudDatabase.perform { engine, _ in
            try engine.modifyUserDirectory(containerIdentifier: identifier, saving: [], deletingLogins: logins)
        }
    }
}
