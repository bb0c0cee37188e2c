import Dispatch
import Foundation
import StratusPostgres
import Synchronization

/// SIGINT, SIGTERM and SIGHUP (the session that started a job closed) ask a long command to
/// stop after its current batch, so that it can save its checkpoint; a second SIGINT or
/// SIGTERM stops at once (a second SIGHUP, which a closing terminal sends, does not; nor does
/// the same signal again within ``duplicateWindowNanoseconds``, which is one request delivered
/// twice). A signal the command was started ignoring stays ignored, as POSIX asks of programs
/// that catch signals: SIGHUP under `nohup`, SIGINT for `stratus … &` in a script (whose
/// Ctrl-C is meant for the script's foreground, not for its background jobs).
enum Interruption {
    private static let received = Atomic<Int32>(0)
    private nonisolated(unsafe) static var sources: [DispatchSourceSignal] = []

    /// The signals a long command handles: those of SIGINT, SIGTERM and SIGHUP that the command
    /// was not started ignoring. Read once, before ``install(_:)`` ignores them itself.
    static let handledSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP].filter { number in
        var disposition = sigaction()
        // Handlers are C function pointers, compared by address.
        return sigaction(number, nil, &disposition) != 0
            || unsafeBitCast(disposition.__sigaction_handler.sa_handler, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self)
    }

    private static let forcing = Atomic<Bool>(false)

    /// Where signal handlers run: a serial queue of its own, which gets a thread even while
    /// the global queue's threads (as many as the cores) are all blocked in the work, as a
    /// batch's writer or a wait for an `--exec` command blocks them.
    private static let handlerQueue = DispatchQueue(label: "stratus.signals")

    /// When the first signal came (`DispatchTime` uptime nanoseconds).
    private static let firstSignalTime = Atomic<UInt64>(0)

    /// How soon after the first a signal of the same number is taken for the same request:
    /// `timeout` sends its signal to the command and then to its whole process group, so a
    /// cron job's `timeout 1h stratus import …` delivers SIGTERM twice at once, and a person
    /// who wants out at once presses Ctrl-C again after reading the first signal's message.
    static let duplicateWindowNanoseconds: UInt64 = 500_000_000

    /// Waits for the process's end when a second signal is ending it: the command's own exit
    /// (a failure from the statements the handler cancelled) must not take its place.
    static func yieldToForcedExit() {
        guard forcing.load(ordering: .sequentiallyConsistent) else { return }
        while true { sleep(60) }
    }

    /// The signal received, or 0.
    static var signal: Int32 { received.load(ordering: .relaxed) }

    /// The signal received, waiting up to `seconds` for one to be noted: a child this process
    /// ran ended by SIGINT, SIGTERM or SIGHUP may have had it as part of this process's group
    /// (Ctrl-C, a service manager's stop), and the handler notes it on another thread.
    static func signal(waitingUpTo seconds: Double) -> Int32 {
        let deadline = DispatchTime.now() + seconds
        while signal == 0 && DispatchTime.now() < deadline { usleep(10_000) }
        return signal
    }

    /// The signals that stop at once when they come second, as the stop message names them:
    /// `SIGINT or SIGTERM`, or `SIGTERM` alone for a command started ignoring SIGINT.
    private static var secondSignals: String {
        [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")].filter { handledSignals.contains($0.0) }.map(\.1).joined(separator: " or ")
    }

    /// Call once, from the main thread, before the work starts; `stop` runs on the first signal
    /// (from another thread) and asks the work to stop after its current batch.
    static func install(_ stop: @escaping @Sendable () -> Void) {
        for number in handledSignals {
            Foundation.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: handlerQueue)
            source.setEventHandler {
                // A closing terminal sends SIGHUP twice (the shell forwards one, the kernel
                // sends another to the foreground group): only SIGINT or SIGTERM after the
                // first signal mean "stop at once".
                if number == SIGHUP && received.load(ordering: .relaxed) != 0 { return }
                let now = DispatchTime.now().uptimeNanoseconds
                if received.load(ordering: .relaxed) == number
                    && now &- firstSignalTime.load(ordering: .relaxed) < duplicateWindowNanoseconds
                {
                    return
                }
                if received.exchange(number, ordering: .relaxed) != 0 {
                    // A second signal: the user really wants out. A PostgreSQL backend waiting
                    // for a lock would outlive this process, holding its connection slot: its
                    // statement is cancelled first, and the command, failing for it, leaves the
                    // exit to this handler (``yieldToForcedExit()``).
                    forcing.store(true, ordering: .sequentiallyConsistent)
                    PostgresConnectionPool.cancelStatementsInFlight(timeout: 2)
                    exit(128 + number)
                }
                firstSignalTime.store(now, ordering: .relaxed)
                // On a terminal the signal's ^C (or the live progress line) ends the line first;
                // a log gets no blank line.
                let lineBreak = isatty(STDERR_FILENO) == 1 ? "\n" : ""
                let second = secondSignals.isEmpty ? "only SIGKILL stops it at once" : "a second \(secondSignals) stops at once"
                StandardError.write(lineBreak + "stratus: stopping after the current batch (signal \(number)); \(second)\n")
                stop()
            }
            source.resume()
            sources.append(source)
        }
    }

    /// What a batch job stopped by a signal says before its summary: how to go on.
    ///
    /// - Parameters:
    ///   - job: the job's noun (`import`, `update`, `delete`).
    ///   - done: what stays done (`imported`, `updated`, `deleted`).
    static func logStopped(_ job: String, done: String, checkpointPath: String?) {
        StratusCommand.log(checkpointPath.map { "stopped: run the same command again (with --checkpoint \($0)) to go on after the last committed batch" }
            ?? "stopped: what was \(done) stays \(done); with --checkpoint FILE, a stopped \(job) can go on where it stopped")
    }

    /// What a batch job says when its `--checkpoint` file was left by an earlier run that
    /// stopped: it goes on from there, and its summary counts only its own work.
    static func logResuming(from checkpointPath: String) {
        StratusCommand.note("going on from the checkpoint \(checkpointPath): what an earlier run did is not done again, and the summary counts this run's records")
    }
}
