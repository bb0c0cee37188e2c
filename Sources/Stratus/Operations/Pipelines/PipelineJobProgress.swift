import Foundation

/// What a pipeline's writing stages record about their job in each batch's transaction: the
/// source's position after the batch, and how many items the job's writes refused up to and
/// including it (so that a resumed job reports, and limits, the failures of its earlier runs).
///
/// The text is `stf1_<failures>_<position>`; a bare position (what versions before the count
/// recorded) has no failures.
struct PipelineJobProgress: Sendable, Hashable {
    var position: PipelinePosition
    var failures: Int

    private static let prefix = "stf1_"

    var text: String {
        failures == 0 ? position.serialized : Self.prefix + String(failures) + "_" + position.serialized
    }

    /// - Throws: ``StratusError`` `invalidArguments` for text that is neither form.
    init(text: String) throws {
        guard text.hasPrefix(Self.prefix) else {
            self.init(position: try PipelinePosition(serialized: text), failures: 0)
            return
        }
        let rest = text.dropFirst(Self.prefix.count)
        guard let separator = rest.firstIndex(of: "_"), let failures = Int(rest[..<separator]), failures >= 0 else {
            throw StratusError(.invalidArguments, "'\(text.prefix(24))' is not a pipeline job's progress (a count of failures and a position after \(Self.prefix))")
        }
        self.init(position: try PipelinePosition(serialized: String(rest[rest.index(after: separator)...])), failures: failures)
    }

    init(position: PipelinePosition, failures: Int) {
        self.position = position
        self.failures = failures
    }

    /// The failures the store's record of `job` counts (0 when it holds none).
    ///
    /// - Throws: what the store throws; `invalidArguments` for a record that cannot be read.
    static func failuresRecorded(for job: String, in engine: any StorageEngine) throws -> Int {
        guard let text = try engine.jobProgressText(job) else { return 0 }
        return try PipelineJobProgress(text: text).failures
    }
}
