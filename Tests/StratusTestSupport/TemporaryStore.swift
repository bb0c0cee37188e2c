import Foundation

/// A fresh, empty temporary directory for one test, removed afterwards.
///
/// Engines put their store inside ``directory``; tests put source files for assets there too.
///
/// ```swift
/// try await TemporaryStore.with { store in
///     let engine = try SQLiteEngine(path: store.path())
///     …
/// }
/// ```
public final class TemporaryStore: Sendable {
    /// The directory, unique to this instance.
    public let directory: URL

    /// Creates a new empty directory under the system's temporary directory.
    ///
    /// - Throws: when the directory cannot be created.
    public init(prefix: String = "stratus-test") throws {
        let base = FileManager.default.temporaryDirectory
        directory = base.appendingPathComponent("\(prefix)-\(UUID().uuidString.lowercased())", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { remove() }

    /// Runs `body` with a fresh store directory and removes the directory afterwards, also when
    /// `body` throws.
    public static func with<T>(prefix: String = "stratus-test", _ body: (TemporaryStore) async throws -> T) async throws -> T {
        let store = try TemporaryStore(prefix: prefix)
        defer { store.remove() }
        return try await body(store)
    }

    /// A path inside the directory (the file need not exist), `store.sqlite` by default.
    public func path(_ name: String = "store.sqlite") -> String {
        directory.appendingPathComponent(name).path
    }

    /// A URL inside the directory.
    public func url(_ name: String) -> URL {
        directory.appendingPathComponent(name)
    }

    /// Writes `bytes` to a new file in the directory and returns its URL.
    ///
    /// - Throws: when the file cannot be written.
    public func writeFile(_ name: String, _ bytes: Data) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: url)
        return url
    }

    /// Removes the directory and everything in it. Safe to call more than once.
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Deterministic bytes of a given length, different for different seeds.
public func patternBytes(count: Int, seed: UInt8 = 0) -> Data {
    var bytes = [UInt8](repeating: 0, count: count)
    var state = UInt32(seed) &* 2_654_435_761 &+ 1
    for i in 0..<count {
        state = state &* 1_664_525 &+ 1_013_904_223
        bytes[i] = UInt8(truncatingIfNeeded: state >> 24)
    }
    return Data(bytes)
}
