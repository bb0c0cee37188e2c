extension ContainerSchema {
    /// Checks that this development schema keeps everything `production` has: every record
    /// type, every field, and each field's type. Deploying adds what development has beyond
    /// that; it never removes or retypes, as CloudKit's deploy does not, since production's
    /// records may hold them. A development schema replaced by an import must keep them too.
    ///
    /// ```swift
    /// try development.checkKeeps(production, for: "deploy")
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming every type and field that would be
    ///   removed or retyped.
    public func checkKeeps(_ production: ContainerSchema, for action: String) throws {
        let problems = production.changes(to: self).filter(\.isDestructive).map { change -> String in
            switch change {
            case .recordTypeRemoved(let type): "record type \(type) is in production but not in development"
            case .fieldRemoved(let type, let field): "field '\(field.name)' of \(type) is in production but not in development"
            case .fieldRetyped(let type, let old, let new):
                "field '\(old.name)' of \(type) is \(SchemaChange.text(old).dropFirst(old.name.count + 1)) in production and \(SchemaChange.text(new).dropFirst(new.name.count + 1)) in development"
            default: change.description
            }
        }
        guard !problems.isEmpty else { return }
        throw StratusError(.invalidArguments, "cannot \(action): " + problems.joined(separator: "; ")
                           + " (production keeps every record type and field with its type; add, never remove or retype)")
    }
}
