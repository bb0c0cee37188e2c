import Foundation
import Stratus

/// The `--token-file` of `changes`, `notifications` and `watch`: opened as the tool names it,
/// and the way a command ends when its feed refuses the token.
extension ChangeTokenFile {
    /// Opens (locks and reads) the token file the user named.
    ///
    /// - Throws: ``UsageError`` for a path with a line break: the file holds the path of its
    ///   output's link, which is named after it. ``JobFileError`` as ``ChangeTokenFile/init(path:)``.
    static func opened(path: String) throws -> ChangeTokenFile {
        if path.contains(where: \.isNewline) { throw UsageError(message: "the token file's path has a line break, which a token file cannot hold; name it without one") }
        return try ChangeTokenFile(path: path)
    }

    /// How `command` ends when its feed refused the token in `path`: a token of another history
    /// (another kind, user, zone, container or store) is a usage error (64) that keeps the file,
    /// as `stratus changes` says of one: it is still good for the job and store that made it
    /// (if this store replaced that one, `startAgain` says what removing it does); an expired
    /// one is a data error (65), whose file is done with.
    static func refused(_ error: StratusError, path: String?, command: String, startAgain: String) -> ExitCode {
        let file = path ?? "the token file"
        // A token of another store (the store at this path was replaced: a copy moved into
        // its place, a restore) is done with, as its help says: no options reach the old store.
        if let mismatch = error.underlyingError as? ServerChangeToken.Mismatch, mismatch.isFromAnotherStore {
            StratusCommand.usageFailure(
                "\(command): \(file) holds the position of \(mismatch.tokenHistory), and belongs to another store (a copy moved into its place, a restore, or another store named): if --store names the wrong one, run with the store the token was made for; if this store took its place, \(startAgain)",
                pointer: "Run 'stratus \(command) --help' for usage.")
        }
        if let mismatch = error.underlyingError as? ServerChangeToken.Mismatch {
            StratusCommand.usageFailure(
                "\(command): \(file) holds the position of \(mismatch.tokenHistory); this run asks for \(mismatch.requestedHistory): run with the options the token was made with, or give another --token-file",
                pointer: "Run 'stratus \(command) --help' for usage.")
        }
        StratusCommand.log(error.message)
        StratusCommand.log("the token in \(file) has expired: \(startAgain)")
        return .dataError
    }
}
