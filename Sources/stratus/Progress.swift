import Foundation

extension OptionGroup {
    /// How commands report progress and their summary on stderr.
    static let progress = OptionGroup(title: "Progress options", placeholder: "[progress options]", options: [
        Option(flag: "--quiet", "no progress and no summary on stderr (rejected or failed records and errors still go there)"),
        Option("--progress", "MODE", "auto (a live line on a terminal, a line every 5 s otherwise), json (one JSON object per line, the summary too) or none (only the summary)", default: "auto"),
    ])
}

/// Progress on stderr: a live line on a terminal, a plain line every few seconds otherwise,
/// JSON lines with `--progress json`, only the summary with `--progress none`, nothing with
/// `--quiet`. Data never goes to stderr.
final class Progress: @unchecked Sendable {
    // @unchecked: the mutable report state is only touched under `lock`; operation blocks
    // report from their threads.
    enum Style {
        case automatic, json
        /// No progress lines; the summary still.
        case summaryOnly
        /// Neither progress nor summary.
        case quiet
    }

    private let style: Style
    private let verb: String
    private let isTerminal = isatty(STDERR_FILENO) != 0
    private let start = Date()
    private let lock = NSLock()
    private lazy var lastReport = start
    /// The count when the clock was last read: importers report every record, and reading the
    /// clock every 256 of them is often enough.
    private var lastChecked: Int?
    private var wroteLiveLine = false

    init(style: Style, verb: String) {
        self.style = style
        self.verb = verb
    }

    /// The style the progress options ask for.
    ///
    /// - Throws: ``UsageError`` for an unknown `--progress` mode.
    static func style(_ arguments: ParsedArguments) throws -> Style {
        if arguments.flag("--quiet") { return .quiet }
        switch arguments.value("--progress") {
        case nil, "auto"?: return .automatic
        case "json"?: return .json
        case "none"?: return .summaryOnly
        case let other?: throw UsageError(message: "--progress takes auto, json or none, not '\(other)'")
        }
    }

    var elapsed: Double { Date().timeIntervalSince(start) }

    /// Reports `done` items (of `total`, when known) if it is time to.
    func update(done: Int, total: Int? = nil) {
        guard style != .quiet && style != .summaryOnly else { return }
        lock.withLock {
            // A call that brings no progress (a job that waits) reads the clock, so a stalled
            // job still says it works.
            if let last = lastChecked, done > last, done - last < 256 { return }
            lastChecked = done
            report(done: done, total: total)
        }
    }

    /// Reports `done` items when the input's size is known: the ETA comes from the share of
    /// its bytes read so far.
    func update(done: Int, bytes: (read: Int, total: Int64?)) {
        guard style != .quiet && style != .summaryOnly else { return }
        guard let total = bytes.total, total > 0, bytes.read > 0 else { return update(done: done) }
        let estimated = Int(Double(done) * Double(total) / Double(bytes.read))
        update(done: done, total: max(done, estimated))
    }

    private func report(done: Int, total: Int?) {
        let now = Date()
        let interval: Double = style == .automatic && isTerminal ? 0.25 : 5
        guard now.timeIntervalSince(lastReport) >= interval else { return }
        lastReport = now
        let rate = Double(done) / max(elapsed, 0.001)
        switch style {
        case .quiet, .summaryOnly: return
        case .json:
            var line = "{\"event\":\"progress\",\"\(verb)\":\(done),\"perSecond\":\(Int(rate)),\"elapsedSeconds\":\(String(format: "%.1f", elapsed))"
            if let total { line += ",\"total\":\(total)" }
            write(line + "}\n")
        case .automatic:
            var line = "\(verb) \(Self.grouped(done))"
            if let total, total > 0 {
                line += " of about \(Self.grouped(total))"
                if rate > 0 { line += String(format: ", ETA %.0f s", Double(max(0, total - done)) / rate) }
            }
            line += " (\(Self.grouped(Int(rate)))/s)"
            if isTerminal {
                write(line, afterTerminalControl: Self.eraseLine)
                wroteLiveLine = true
            } else {
                write(line + "\n")
            }
        }
    }

    /// The final summary line (also in JSON mode, as an object).
    func finish(_ summary: String, json: [String: Int]) {
        lock.lock()
        defer { lock.unlock() }
        if wroteLiveLine { write("", afterTerminalControl: Self.eraseLine) }
        switch style {
        case .quiet: return
        case .json:
            let fields = json.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
            write("{\"event\":\"summary\",\(fields),\"elapsedSeconds\":\(String(format: "%.3f", elapsed))}\n")
        case .automatic, .summaryOnly:
            write(summary + String(format: " in %.1f s\n", elapsed))
        }
    }

    /// Back to the start of the terminal's line, and the line erased.
    private static let eraseLine = "\r\u{1B}[K"

    private func write(_ text: String, afterTerminalControl control: String = "") {
        StandardError.write(text, afterTerminalControl: control)
    }

    /// 1234567 -> "1,234,567".
    static func grouped(_ n: Int) -> String {
        let digits = String(abs(n))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }
}
