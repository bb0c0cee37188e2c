import Foundation

/// `churn verify`: checks exported changes against the writers' logs.
///
///   churn verify --log a.log [--log b.log …] [--at-least-once] EXPORT.ndjson…
///
/// The exports are read in the order given, as one stream; an unterminated last line of a
/// file (a run killed while writing) is ignored. A change is a record line (recordName,
/// recordChangeTag, fields.version) or a deletion line (recordName, "deleted": true).
/// Exactly once, as Stratus defines it for coalesced changes, means:
/// - every record state exported was committed (its name, version and change tag are in a log);
/// - no state and no deletion is exported twice;
/// - each record's states arrive in the order they were committed, a deletion last;
/// - each record's last exported change is its final state in the logs (nothing is lost).
/// With `--at-least-once`, repeated lines are allowed (and counted) and the rest must hold.
struct HistoryCheck {
    enum Step: Equatable {
        case saved(version: Int64, changeTag: String)
        case deleted
    }

    var histories: [String: [Step]] = [:]
    var problems: [String] = []

    static func run(_ arguments: [String]) -> Int32 {
        var words = arguments
        var logs: [String] = []
        while let index = words.firstIndex(of: "--log"), index + 1 < words.count {
            logs.append(words[index + 1])
            words.removeSubrange(index...index + 1)
        }
        let atLeastOnce = words.contains("--at-least-once")
        words.removeAll { $0 == "--at-least-once" }
        guard !logs.isEmpty else {
            FileHandle.standardError.write(Data("usage: churn verify --log FILE… [--at-least-once] EXPORT…\n".utf8))
            return 64
        }
        var check = HistoryCheck()
        for log in logs { check.readLog(log) }
        let summary = check.verify(exports: words, atLeastOnce: atLeastOnce)
        for problem in check.problems.prefix(20) { FileHandle.standardError.write(Data("churn verify: \(problem)\n".utf8)) }
        if check.problems.count > 20 { FileHandle.standardError.write(Data("churn verify: … \(check.problems.count - 20) more\n".utf8)) }
        print(summary)
        return check.problems.isEmpty ? 0 : 1
    }

    static func lines(_ path: String) -> [Substring] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let text = String(decoding: data, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // The last element is empty after a final newline, or an unterminated (torn) line.
        lines.removeLast()
        return lines.filter { !$0.isEmpty }
    }

    static func object(_ line: Substring) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    mutating func readLog(_ path: String) {
        for line in Self.lines(path) {
            guard let entry = Self.object(line), let name = entry["recordName"] as? String else {
                problems.append("\(path): unreadable log line \(line.prefix(60))")
                continue
            }
            if entry["op"] as? String == "delete" {
                histories[name, default: []].append(.deleted)
            } else if let version = (entry["version"] as? NSNumber)?.int64Value, let tag = entry["changeTag"] as? String {
                histories[name, default: []].append(.saved(version: version, changeTag: tag))
            }
        }
    }

    mutating func verify(exports: [String], atLeastOnce: Bool) -> String {
        var lastIndex: [String: Int] = [:]        // record name → index of its last exported step
        var seen = Set<String>()
        var exported = 0, repeats = 0
        for path in exports {
            for line in Self.lines(path) {
                guard let change = Self.object(line), let name = change["recordName"] as? String else {
                    problems.append("\(path): unreadable export line \(line.prefix(60))")
                    continue
                }
                let step: Step
                if change["deleted"] as? Bool == true {
                    step = .deleted
                } else {
                    let fields = change["fields"] as? [String: Any]
                    let version = ((fields?["version"] as? [String: Any])?["value"] as? NSNumber)?.int64Value ?? -1
                    step = .saved(version: version, changeTag: change["recordChangeTag"] as? String ?? "")
                }
                exported += 1
                let key = "\(name) \(step)"
                if !seen.insert(key).inserted {
                    repeats += 1
                    if !atLeastOnce { problems.append("\(name): exported twice: \(step)") }
                    continue
                }
                guard let history = histories[name] else {
                    problems.append("\(name): exported, but no writer logged it")
                    continue
                }
                guard let index = history.firstIndex(of: step) else {
                    problems.append("\(name): exported state \(step) was never committed")
                    continue
                }
                if let previous = lastIndex[name], previous >= index {
                    problems.append("\(name): \(step) arrived after a later change of the record")
                }
                lastIndex[name] = index
            }
        }
        for (name, history) in histories {
            guard let index = lastIndex[name] else {
                problems.append("\(name): never exported (its final state is \(history.last!))")
                continue
            }
            if index != history.count - 1 {
                problems.append("\(name): last exported \(history[index]), but its final state is \(history.last!)")
            }
        }
        let changes = histories.values.reduce(0) { $0 + $1.count }
        return "verified \(exported) exported change(s) against \(changes) logged change(s) of \(histories.count) record(s): "
            + (problems.isEmpty ? "ok" : "\(problems.count) problem(s)") + (repeats > 0 ? ", \(repeats) repeated" : "")
    }
}
