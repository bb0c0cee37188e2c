/// The version of this Stratus library (and of the `stratus` tool built with it).
///
/// A type of its own rather than `Stratus.version`: a type named like its module would hide the
/// module's name, so that `Stratus.Record` no longer compiled in apps.
///
/// ```swift
/// print("Stratus \(StratusVersion.current)")
/// ```
public enum StratusVersion {
    /// Semantic version text, such as `0.10.0`.
    public static let current = "0.15.0"
}
