extension Container {
    /// One of a container's two environments, as in CloudKit: each keeps its own schema and its
    /// own data.
    ///
    /// In development, saving creates record types and fields (without indexes) and types are
    /// enforced once a field exists; production rejects unknown types and fields, and queries
    /// that filter or sort on fields without an index. ``deploySchema()`` copies the development
    /// schema to production, additively.
    ///
    /// ```swift
    /// let live = try Container(identifier: "com.example.todo", environment: .production)
    /// let development = live.container(in: .development)
    /// ```
    public enum Environment: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
        case development
        case production

        public var description: String { rawValue }

        /// What engines key the environment's data by (``DatabaseContext/storageContainer``).
        func storageContainer(for containerIdentifier: String) -> String {
            switch self {
            case .development: containerIdentifier
            // A control character, which container identifiers never hold (``Container/checkIdentifier(_:)``).
            case .production: containerIdentifier + Self.productionSuffix
            }
        }

        private static let productionSuffix = "\u{1F}production"

        /// The container and environment whose data an engine keys by `storageContainer`.
        static func split(storageContainer: String) -> (containerIdentifier: String, environment: Environment) {
            storageContainer.hasSuffix(productionSuffix)
                ? (String(storageContainer.dropLast(productionSuffix.count)), .production)
                : (storageContainer, .development)
        }
    }

    /// The same container in another environment, as the same user.
    ///
    /// ```swift
    /// let production = container.container(in: .production)
    /// ```
    public func container(in environment: Environment) -> Container {
        if environment == self.environment { return self }
        return Container(identifier: identifier, engine: engine, environment: environment, user: user, retryPolicy: retryPolicy)
    }
}
