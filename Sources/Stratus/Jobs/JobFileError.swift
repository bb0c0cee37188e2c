import Foundation

/// Why a job's file (``ImportCheckpointFile``, ``PipelineCheckpointFile``,
/// ``CopyCheckpointFile``, ``ChangeTokenFile``) could not be used: which file, what it was
/// opened as, and what was wrong, with a message that names the file.
///
/// A file refused as damaged, as another job's or as another kind of file is left as it is:
/// it may be another job's state, named by mistake.
///
/// ```swift
/// do {
///     let checkpoint = try ImportCheckpointFile(path: "/var/lib/jobs/import.checkpoint", input: "/data/records.ndjson")
///     _ = try await importer.run(from: reader, checkpoint: checkpoint)
/// } catch let error as JobFileError where error.reason == .notARegularFile {
///     print(error.message)
/// }
/// ```
public struct JobFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What a job's file holds, or was opened to hold.
    public enum FileKind: Sendable, Hashable {
        /// An ``ImportCheckpointFile``.
        case importCheckpoint
        /// A ``PipelineCheckpointFile`` of the job it says it belongs to.
        case pipelineCheckpoint(belongsTo: String)
        /// A ``CopyCheckpointFile``.
        case copyCheckpoint
        /// A ``ChangeTokenFile``.
        case changeTokenFile

        /// How a message names the file: "checkpoint" or "token file".
        var noun: String { self == .changeTokenFile ? "token file" : "checkpoint" }

        /// How a message names the file when it speaks of its contents: "checkpoint file".
        var fileNoun: String { self == .changeTokenFile ? "token file" : "checkpoint file" }

        /// What such a file is, for a message: "an import checkpoint".
        var described: String {
            switch self {
            case .importCheckpoint: "an import checkpoint"
            case .pipelineCheckpoint(let job): "the pipeline checkpoint of '\(job)'"
            case .copyCheckpoint: "a copy checkpoint"
            case .changeTokenFile: "a change token file"
            }
        }
    }

    /// What was wrong with the file.
    public enum Reason: Sendable, Hashable {
        /// Another run (another process, or another object of this one) holds the file's lock.
        case inUse(lockFile: String)
        /// The name is a device, a pipe or a folder, which the job would replace or fail to.
        case notARegularFile
        /// The file could not be read; the system's `errno`.
        case cannotRead(errno: Int32)
        /// The file is larger than any such file (`limit` bytes): another file named by mistake.
        case tooLarge(limit: Int)
        /// The file holds something else: another kind of job file, or nil for anything else.
        case holdsAnotherKind(FileKind?)
        /// The file is of the kind expected but does not read (edited or damaged): what failed.
        case damaged(String)
        /// The file was written by a later version of Stratus in a format this one does not read.
        case newerFormat(Int)
        /// The file belongs to another job: the input, or the job, it names.
        case belongsToAnotherJob(String)
        /// The file could not be written or its lock made; the system's `errno`. The file holds
        /// what it held before.
        case cannotWrite(errno: Int32)
    }

    /// The file's name as it was given.
    public let path: String
    /// What the file was opened as.
    public let file: FileKind
    /// What was wrong.
    public let reason: Reason
    /// What was wrong and where, for a person to read.
    public let message: String

    public var description: String { message }

    /// The refusal of the file `path`, opened as `file`, for `reason`; `message` replaces the
    /// one made from them (for a system call's failure, which names the call).
    package init(path: String, file: FileKind, reason: Reason, message: String? = nil) {
        self.path = path
        self.file = file
        self.reason = reason
        self.message = message ?? Self.message(path: path, file: file, reason: reason)
    }

    private static func message(path: String, file: FileKind, reason: Reason) -> String {
        let noun = file.noun
        let startOver = file == .changeTokenFile ? "remove it to start from the beginning" : "remove it to start over"
        switch reason {
        case .inUse(let lockFile):
            return "another run is using the \(noun) \(path) (it holds \(lockFile)); try again later"
        case .notARegularFile:
            return "the \(noun) \(path) is not a regular file (a device, a pipe or a folder): name a file the job may create and replace"
        case .cannotRead(let code):
            return "cannot read the \(noun) \(path): \(String(cString: strerror(code)))"
        case .tooLarge(let limit):
            return "the \(noun) \(path) is larger than any \(noun) (\(limit / (1 << 20)) MiB); is it the right file?"
        case .holdsAnotherKind(let held):
            if file == .changeTokenFile && held == nil {
                return "the token file \(path) does not hold a change token; name another file (this one is left as it is)"
            }
            let holds = held?.described ?? "no Stratus checkpoint"
            return "the \(file.fileNoun) \(path) holds \(holds), not \(file.described); name another file (this one is left as it is)"
        case .damaged(let what):
            return "the \(file.fileNoun) \(path) is \(file.described) that Stratus cannot read (\(what)): it was edited or damaged; \(startOver)"
        case .newerFormat(let format):
            return "the \(noun) \(path) was written by a later version of Stratus (format \(format); this version reads format \(JobFile.format)): go on with that version, or \(startOver)"
        case .belongsToAnotherJob(let owner):
            if file == .importCheckpoint { return "the checkpoint \(path) belongs to \(owner), not to this import; run that import again to go on, or remove the checkpoint to start over" }
            return "the \(noun) \(path) belongs to another job (\(owner)); name another file, or remove it if that job is over"
        case .cannotWrite(let code):
            return "cannot write the \(noun) \(path): \(String(cString: strerror(code)))"
        }
    }
}
