import Foundation

/// An import's checkpoint kept in a file, as `stratus import --checkpoint` keeps it: where the
/// import stopped, which input it belongs to (a name and a size) and, when given, where the
/// input goes (a container, database, zone…), so that it is never applied to another input or
/// another destination.
///
/// Each save replaces the file whole (a temporary file beside it, synced, renamed over it, the
/// folder synced), so a crash or a kill leaves the old checkpoint or the new one, and a save
/// that fails (a full disk) leaves the old one. The file is locked while the object lives: a
/// second run of the job (an overlapping cron job) is refused with ``JobFileError/Reason/inUse(lockFile:)``.
///
/// ```swift
/// let input = "/data/records.ndjson"
/// let size = (try FileManager.default.attributesOfItem(atPath: input)[.size] as? NSNumber)?.int64Value   // a link's own size: resolve links first
/// let checkpoint = try ImportCheckpointFile(path: "/var/lib/jobs/records.checkpoint", input: input, inputSize: size)
/// let summary = try await RecordImporter(database: database).run(from: reader, checkpoint: checkpoint)
/// ```
///
/// The file is one JSON object (the format `stratus` has always written):
///
/// ```
/// {"input":"/data/records.ndjson","inputSize":104857600,"committedItems":42000,"pendingItems":[17,18],"rejectedItems":3}
/// ```
public final class ImportCheckpointFile: ImportCheckpointStore {
    private struct Contents: Codable {
        var input: String
        var inputSize: Int64?
        var committedItems: Int
        /// The import's name in the store (see ``ImportCheckpoint/job``); absent in files of
        /// earlier versions.
        var job: String?
        /// Items before `committedItems` not settled yet (see ``ImportCheckpoint/pendingItems``);
        /// absent when there are none.
        var pendingItems: [Int]?
        /// Settled items that were rejected (see ``ImportCheckpoint/itemsRejected``); absent
        /// when there are none, and in files of earlier versions.
        var rejectedItems: Int?
        /// Rejects the reject sink failed to take (see ``ImportCheckpoint/unreportedRejections``);
        /// absent when there are none.
        var unreportedRejects: [RecordRejection]?
        /// Where the import writes (see ``ImportCheckpointFile/init(path:input:inputSize:destination:)``);
        /// absent when not given, and in files of earlier versions.
        var destination: String?
    }

    /// The largest file taken for a checkpoint: one lists the items still waiting for a parent,
    /// a few bytes each, so a larger file (a sparse file, another file named by mistake) is
    /// refused before it is read into memory.
    public static let maximumSize = 64 << 20

    /// The file's name as given.
    public var path: String { file.path }
    private let file: JobFile
    private let input: String
    private let inputSize: Int64?
    private let destination: String?

    /// Locks the checkpoint file `path` of the import of `input` (its path, or any name that
    /// tells it from other inputs) of `inputSize` bytes (nil when unknown, as for a pipe) into
    /// `destination` (any text that tells where the records go, such as the container, database
    /// and zone; nil: not checked). Nothing is read or written yet: a missing file is a new import.
    ///
    /// ```swift
    /// let checkpoint = try ImportCheckpointFile(path: "import.checkpoint", input: "records.ndjson", inputSize: 4_096,
    ///                                           destination: "container iCloud.com.example.notes, the private database, zone Notes")
    /// ```
    ///
    /// - Throws: ``JobFileError``: `inUse` while another run (or another object) holds the
    ///   file, `notARegularFile`, `cannotWrite` when its lock file cannot be made.
    public init(path: String, input: String, inputSize: Int64? = nil, destination: String? = nil) throws {
        file = try JobFile(path: path, file: .importCheckpoint)
        self.input = input
        self.inputSize = inputSize
        self.destination = destination
    }

    /// The checkpoint an earlier run saved, or nil when there is no file.
    ///
    /// ```swift
    /// if let saved = try checkpoint.load() { print("going on after \(saved.itemsSettled) items") }
    /// ```
    ///
    /// - Throws: ``JobFileError``: `belongsToAnotherJob` for the checkpoint of another input
    ///   or of an import into another destination (a file that names none is taken as this one's),
    ///   `damaged`, `holdsAnotherKind`, `newerFormat`, `tooLarge` (over ``maximumSize``),
    ///   `cannotRead`. The file is left as it is.
    public func load() throws -> ImportCheckpoint? {
        guard let data = try file.contents(atMost: Self.maximumSize) else { return nil }
        let contents = try file.decodeCheckpoint(Contents.self, from: data, key: "input")
        guard contents.input == input && contents.inputSize == inputSize else {
            // The same name with another size: a file that changed, or a link pointed elsewhere.
            let size = { (bytes: Int64?) in bytes.map { "\($0) bytes" } ?? "of unknown size" }
            let grown = contents.input == input ? ", when it was \(size(contents.inputSize)) (it is \(size(inputSize)) now: another input under that name)" : " (\(size(contents.inputSize)))"
            throw file.refusal(.belongsToAnotherJob("the import of \(contents.input)\(grown)"))
        }
        if let saved = contents.destination, let destination, saved != destination {
            // Going on elsewhere would skip, in the new destination, the items the earlier runs
            // wrote into theirs.
            throw file.refusal(.belongsToAnotherJob("the import into \(saved) (this one imports into \(destination))"))
        }
        // Counts no run writes: a file edited or damaged, whose position would mean nothing.
        if contents.committedItems < 0 || (contents.rejectedItems ?? 0) < 0 || (contents.pendingItems ?? []).contains(where: { $0 < 0 }) {
            throw file.refusal(.damaged("its counts of items are out of range (committedItems \(contents.committedItems))"))
        }
        return ImportCheckpoint(itemsSettled: contents.committedItems, job: contents.job, pendingItems: contents.pendingItems ?? [],
                                itemsRejected: contents.rejectedItems ?? 0, unreportedRejections: contents.unreportedRejects ?? [])
    }

    /// Replaces the saved checkpoint durably.
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`; the file then holds the checkpoint it held.
    public func save(_ checkpoint: ImportCheckpoint) throws {
        let contents = Contents(input: input, inputSize: inputSize, committedItems: checkpoint.itemsSettled, job: checkpoint.job,
                                pendingItems: checkpoint.pendingItems.isEmpty ? nil : checkpoint.pendingItems,
                                rejectedItems: checkpoint.itemsRejected == 0 ? nil : checkpoint.itemsRejected,
                                unreportedRejects: checkpoint.unreportedRejections.isEmpty ? nil : checkpoint.unreportedRejections,
                                destination: destination)
        try file.replace(with: try JobFile.checkpointEncoder.encode(contents))
    }

    /// Removes the file, once the whole input is settled.
    public func remove() throws {
        file.remove()
    }
}
