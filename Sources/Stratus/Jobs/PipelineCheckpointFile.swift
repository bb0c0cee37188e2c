import Foundation

/// A pipeline's checkpoint kept in a file, as `stratus update --checkpoint` and `stratus delete
/// --checkpoint` keep it: the job's name in the store (whose position each batch's transaction
/// commits), the position after the last batch every stage completed, and which job the file
/// belongs to, so that it is never applied to another.
///
/// Each save replaces the file whole (a temporary file beside it, synced, renamed over it, the
/// folder synced), so a crash or a kill leaves the old entry or the new one, and a save that
/// fails leaves the old one. The file is locked while the object lives: an overlapping run of
/// the job is refused with ``JobFileError/Reason/inUse(lockFile:)``.
///
/// ```swift
/// let query = QueryOperation(query: Query(recordType: "Product"))
/// query.fetchAllResults = true
/// query.checkpoint = try PipelineCheckpoint(store: PipelineCheckpointFile(path: "/var/lib/jobs/reprice.checkpoint", belongsTo: "reprice by 10%"))
/// ```
///
/// The file is one JSON object (the format `stratus` has always written):
///
/// ```
/// {"command":"update Todo where checked == 0 set checked:INT64=1 …","job":"pipeline-…","position":"stc2_…","recordedInStore":true}
/// ```
public final class PipelineCheckpointFile: PipelineCheckpointStore, @unchecked Sendable {
    // @unchecked: the pipeline calls the store one call at a time, and nothing in it changes
    // after `init` (the lock's descriptor is closed only when the object goes).
    private struct Contents: Codable {
        var command: String
        var job: String
        var position: String?
        /// Absent in files of versions before it was kept (read as false).
        var recordedInStore: Bool?
    }

    /// The largest file taken for a checkpoint: it holds the job's description and one
    /// position, so a larger file (a sparse file, another file named by mistake) is refused
    /// before it is read into memory.
    public static let maximumSize = 16 << 20

    /// The file's name as given.
    public var path: String { file.path }
    private let file: JobFile
    private let owner: String

    /// Locks the checkpoint file `path` of the job described by `belongsTo` (what it does, in
    /// words that tell it from the other jobs: `stratus` gives its command line). Nothing is
    /// read or written yet.
    ///
    /// ```swift
    /// let file = try PipelineCheckpointFile(path: "cleanup.checkpoint", belongsTo: "delete Session where expired == 1")
    /// ```
    ///
    /// - Throws: ``JobFileError``: `inUse` while another run (or another object) holds the
    ///   file, `notARegularFile`, `cannotWrite` when its lock file cannot be made.
    public init(path: String, belongsTo owner: String) throws {
        file = try JobFile(path: path, file: .pipelineCheckpoint(belongsTo: owner))
        self.owner = owner
    }

    /// The job an existing checkpoint file names (what `belongsTo` said when it was saved),
    /// read without locking it, or nil when there is no such file or it holds no checkpoint:
    /// for a job that keeps something of its first run in its name (the moment its predicate
    /// read `now`) and finds it here before it opens the file as that job's.
    ///
    /// ```swift
    /// let earlier = PipelineCheckpointFile.jobName(inFileAt: "cleanup.checkpoint")
    /// ```
    public static func jobName(inFileAt path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path), data.count <= maximumSize else { return nil }
        return (try? JSONDecoder().decode(Contents.self, from: data))?.command
    }

    /// The entry an earlier run saved, or nil when there is no file.
    ///
    /// - Throws: ``JobFileError``: `belongsToAnotherJob` for another job's file, `damaged`,
    ///   `holdsAnotherKind`, `newerFormat`, `tooLarge` (over ``maximumSize``), `cannotRead`.
    ///   The file is left as it is.
    public func load() throws -> PipelineCheckpointStoreEntry? {
        guard let data = try file.contents(atMost: Self.maximumSize) else { return nil }
        let contents = try file.decodeCheckpoint(Contents.self, from: data, key: "command")
        guard contents.command == owner else { throw file.refusal(.belongsToAnotherJob(contents.command)) }
        let position: PipelinePosition?
        do {
            position = try contents.position.map { try PipelinePosition(serialized: $0) }
        } catch {
            throw file.refusal(.damaged("member 'position' holds no position Stratus can read"))
        }
        return PipelineCheckpointStoreEntry(job: contents.job, position: position, isRecordedInStore: contents.recordedInStore ?? false)
    }

    /// Replaces the saved entry durably.
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`; the file then holds the entry it held.
    public func save(_ entry: PipelineCheckpointStoreEntry) throws {
        let contents = Contents(command: owner, job: entry.job, position: entry.position?.serialized,
                                recordedInStore: entry.isRecordedInStore ? true : nil)
        try file.replace(with: try JobFile.checkpointEncoder.encode(contents))
    }

    /// Removes the file, once the whole pipeline completed.
    public func remove() throws {
        file.remove()
    }
}
