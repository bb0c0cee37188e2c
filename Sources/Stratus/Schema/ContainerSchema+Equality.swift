extension ContainerSchema {
    /// Equal when the same roles are created and the record types are equal, in whatever order.
    public static func == (lhs: ContainerSchema, rhs: ContainerSchema) -> Bool {
        lhs.roles == rhs.roles && lhs.recordTypes.count == rhs.recordTypes.count && Set(lhs.recordTypes) == Set(rhs.recordTypes)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(roles)
        hasher.combine(Set(recordTypes))
    }
}
