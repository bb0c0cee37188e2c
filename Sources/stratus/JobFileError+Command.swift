import Foundation
import Stratus

extension JobFileError {
    /// The refusal as the tool reports it from `stratus COMMAND` (`command`: `import`,
    /// `update`, `delete`, `copy`, `changes`…): ``commandFailure`` where there is one, else a
    /// ``UsageError`` (64, with the pointer to the command's help) for a checkpoint that is
    /// another job's, another command's, damaged or of a later format. Its words name the
    /// command and the option, where the library's name neither.
    func commandError(command: String) -> any Error {
        if let commandFailure { return commandFailure }
        switch reason {
        case .holdsAnotherKind(let held):
            let holds = held.map { "the checkpoint of a `stratus \(Self.command(writing: $0))`" } ?? "no Stratus checkpoint"
            let expected = file == .importCheckpoint ? "an import checkpoint" : "a checkpoint of `stratus \(command)`"
            return UsageError(message: "the checkpoint file \(path) holds \(holds), not \(expected); name another file for --checkpoint (this one is left as it is)")
        case .damaged(let what):
            return UsageError(message: "the checkpoint file \(path) is a checkpoint of `stratus \(command)` that Stratus cannot read (\(what)): it was edited or damaged; remove it to start over")
        case .belongsToAnotherJob(let owner) where file != .importCheckpoint:
            return UsageError(message: "the checkpoint \(path) belongs to another command (\(owner)); name another file for --checkpoint, or remove it if that job is over")
        default:
            return UsageError(message: message)
        }
    }

    /// The refusal as a failure with its own exit code, as the README documents them: a file in
    /// use (75), not a regular file (64), unreadable (66, or 77 without the right), too large
    /// (65), unwritable (73), and every refusal of a token file, which the feed cannot start
    /// from (65). Nil for a checkpoint refused as a usage error (see ``commandError(command:)``).
    var commandFailure: CommandFailure? {
        switch reason {
        case .inUse: return CommandFailure(.temporaryFailure, message)
        case .notARegularFile: return CommandFailure(.usage, message)
        case .cannotRead(let code): return CommandFailure(code == EACCES || code == EPERM ? .permissionDenied : .inputMissing, message)
        case .tooLarge: return CommandFailure(.dataError, message)
        // A lock or job file another user made (a run as root before): the access is missing,
        // as for a file that cannot be read; other failures are the output's (a full disk).
        case .cannotWrite(let code): return CommandFailure(code == EACCES || code == EPERM ? .permissionDenied : .cannotCreateOutput, message)
        case .holdsAnotherKind(nil) where file == .changeTokenFile:
            return CommandFailure(.dataError, "the token file \(path) does not hold a change token; name another file for --token-file (this one is left as it is)")
        case .holdsAnotherKind, .damaged, .newerFormat, .belongsToAnotherJob:
            return file == .changeTokenFile ? CommandFailure(.dataError, message) : nil
        }
    }

    /// The first word of the command whose checkpoint is of kind `kind` (the first word of a
    /// pipeline checkpoint's command line, which the tool writes as its owner).
    private static func command(writing kind: FileKind) -> String {
        switch kind {
        case .importCheckpoint: "import"
        case .pipelineCheckpoint(let owner): owner.split(separator: " ").first.map(String.init) ?? owner
        case .copyCheckpoint: "copy"
        case .changeTokenFile: "changes"
        }
    }
}
