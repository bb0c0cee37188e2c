import Foundation
import Stratus

/// The documented exit codes (sysexits.h values), listed in every command's help and the README.
enum ExitCode: Int32 {
    case success = 0
    /// Finished, but some records were rejected or missing.
    case someFailed = 1
    case usage = 64
    case dataError = 65
    case inputMissing = 66
    case internalError = 70
    case cannotCreateOutput = 73
    /// The store is busy or unavailable, or another run holds a lock; try again later.
    case temporaryFailure = 75
    case permissionDenied = 77
    /// Stopped by SIGHUP (128 + 1), SIGINT (128 + 2) or SIGTERM (128 + 15) after saving the
    /// checkpoint.
    case hungUp = 129
    case interrupted = 130
    case terminated = 143

    /// The exit status for a command stopped by `signal`.
    static func stopped(by signal: Int32) -> ExitCode {
        switch signal {
        case SIGTERM: .terminated
        case SIGHUP: .hungUp
        default: .interrupted
        }
    }

    /// The exit codes, as every command's help lists them.
    static let help = """
        Exit codes: 0 success; 1 finished, but some records were rejected or missing; 64 usage
        error; 65 bad input data; 66 store or input missing (also a PostgreSQL database that does
        not exist); 70 internal error; 73 cannot create output (or the store's disk is full); 75
        temporary failure (store busy, a PostgreSQL server that cannot be reached, or another
        run holds the lock: retry later); 77 permission denied (also a PostgreSQL login the
        server refused); 129/130/143 stopped by SIGHUP/SIGINT/SIGTERM.
        """

    init(for error: StratusError) {
        switch error.code {
        case .invalidArguments: self = .usage
        case .zoneBusy, .serviceUnavailable, .requestRateLimited: self = .temporaryFailure
        case .permissionFailure, .notAuthenticated: self = .permissionDenied
        case .badContainer, .zoneNotFound: self = .inputMissing
        case .unknownItem: self = .someFailed
        // A full disk under the store: nothing is damaged, writing is what failed (70 is for a
        // damaged store, and monitoring must tell the two apart).
        case .quotaExceeded: self = .cannotCreateOutput
        default: self = .internalError
        }
    }
}

/// A command-line mistake: printed as one line and a pointer to the command's help, exit 64.
struct UsageError: Error {
    let message: String
}

/// A failure with its own exit code and message, printed by `main` as `stratus: MESSAGE`.
struct CommandFailure: Error, CustomStringConvertible {
    let code: ExitCode
    let message: String

    /// The message alone, wherever the failure is shown as text (wrapped in another error).
    var description: String { message }

    init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A failed system call: the message plus `strerror(errno)`.
    static func system(_ code: ExitCode, _ message: String) -> CommandFailure {
        CommandFailure(code, "\(message): \(String(cString: strerror(errno)))")
    }
}
