import Synchronization

/// Who a container's databases act as: a login, resolved through the container's user
/// directory the first time an operation needs it, or no user at all.
///
/// The directory is read once per container (and the containers made from it for the other
/// environment): open a new container to see entries changed since.
final class ContainerUser: Sendable {
    /// The login; `nil` for a caller who is not signed in.
    let login: String?
    let containerIdentifier: String
    private let resolved = Mutex<UserDirectoryEntry?>(nil)

    /// Why no operation can run: the container's identifier or the login is one CloudKit
    /// would refuse. A container cannot fail to open (`CKContainer(identifier:)` does not), so
    /// its operations fail instead.
    let refusal: StratusError?

    init(login: String?, containerIdentifier: String) {
        self.login = login
        self.containerIdentifier = containerIdentifier
        do {
            try Container.checkOpening(identifier: containerIdentifier, userName: login)
            refusal = nil
        } catch {
            refusal = error
        }
    }

    /// The login's directory entry, or the derived one when the directory has none; `nil` for
    /// no user.
    func entry(engine: any StorageEngine) throws -> UserDirectoryEntry? {
        if let refusal { throw refusal }
        guard let login else { return nil }
        if let known = resolved.withLock({ $0 }) { return known }
        let found = try engine.fetchUserDirectory(containerIdentifier: containerIdentifier, logins: [login]).first { $0.hasLogin(login) }
            ?? UserDirectoryEntry(login: login, userRecordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: containerIdentifier, login: login))
        resolved.withLock { $0 = found }
        return found
    }

    /// The context an operation of `database` runs in, with the user's record name and roles.
    ///
    /// - Throws: `notAuthenticated` for the private and shared databases of a caller who is not
    ///   signed in; store errors.
    func context(for base: DatabaseContext, engine: any StorageEngine) throws -> DatabaseContext {
        let entry = try entry(engine: engine)
        if entry == nil && base.scope != .public {
            throw StratusError(.notAuthenticated, "the \(base.scope.name) database needs a signed-in user; this container has none (open it with a user name)")
        }
        return DatabaseContext(containerIdentifier: base.containerIdentifier, environment: base.environment, scope: base.scope,
                               userName: login, userRecordName: entry?.userRecordName, roles: entry?.roles ?? [])
    }
}
