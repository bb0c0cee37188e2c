import Foundation

/// `--exec COMMAND`: a shell command that gets each batch as NDJSON on its standard input.
///
/// The command runs as `/bin/sh -c COMMAND`, with the tool's stdout and stderr, and with
/// `STRATUS_BATCH_FIRST` and `STRATUS_BATCH_LAST` (the feed places of the batch's first and
/// last notification: a batch delivered again starts at the same one) and
/// `STRATUS_BATCH_COUNT` in its environment. The batch counts as applied only when the
/// command exits 0.
struct BatchCommand {
    let command: String

    /// Runs the command with `batch` on its standard input and waits for it.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` when it does not exit 0 (the batch is
    ///   delivered again on the next run), `internalError` when it cannot be started.
    func run(_ batch: Data, first: Int64, last: Int64, count: Int) throws {
        // A command that exits without reading all of its input must not kill the tool.
        signal(SIGPIPE, SIG_IGN)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw CommandFailure.system(.internalError, "cannot make a pipe for --exec") }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Neither end leaks into other programs; the command's stdin is a dup2 of the read end.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, readEnd, STDIN_FILENO)
        // The tool ignores SIGPIPE and SIGXFSZ, and the signals it handles until it handles
        // them; the command gets the default dispositions back (ignored signals survive exec),
        // but for those the tool was started ignoring, which stay ignored for it too.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGPIPE, SIGXFSZ] + Interruption.handledSignals { sigaddset(&defaults, number) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        // Nor does it inherit the signals this thread blocks (a blocked SIGTERM would keep a
        // process group's stop from reaching it).
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var environment = ProcessInfo.processInfo.environment
        environment["STRATUS_BATCH_FIRST"] = String(first)
        environment["STRATUS_BATCH_LAST"] = String(last)
        environment["STRATUS_BATCH_COUNT"] = String(count)
        let arguments = ["/bin/sh", "-c", command]
        var pid: pid_t = 0
        let spawned = withCStrings(arguments) { argv in
            withCStrings(environment.map { "\($0.key)=\($0.value)" }) { envp in
                posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
            }
        }
        close(readEnd)
        guard spawned == 0 else {
            close(writeEnd)
            throw CommandFailure(.internalError, "cannot start --exec command: \(String(cString: strerror(spawned)))")
        }
        var writeFailure: Int32 = 0
        batch.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    writeFailure = errno
                    return
                }
                offset += written
            }
        }
        close(writeEnd)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            let how = exited ? "exited with status \(code)" : "was killed by signal \(status & 0x7f)"
            let again = "the batch (places \(first)–\(last)) was not applied and comes again on the next run"
            // The whole process group asked to stop (Ctrl-C, `systemctl stop`): a stop, as when
            // this process alone was signalled, not a failure of the command.
            if !exited, [SIGINT, SIGTERM, SIGHUP].contains(status & 0x7f), case let stop = Interruption.signal(waitingUpTo: 5), stop != 0 {
                throw CommandFailure(ExitCode.stopped(by: stop), "stopped by signal \(stop) while the --exec command ran (it \(how)); \(again)")
            }
            throw CommandFailure(.temporaryFailure, "the --exec command \(how); \(again)")
        }
        if writeFailure != 0 && writeFailure != EPIPE {
            throw CommandFailure(.internalError, "cannot write the batch to the --exec command: \(String(cString: strerror(writeFailure)))")
        }
    }

    /// Runs `body` with `strings` as a NULL-terminated C array.
    private func withCStrings<T>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> T) -> T {
        var pointers = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }
}
