/// The words after the command name, consumed as options are read.
struct Arguments {
    private(set) var words: [String]

    init(_ words: [String]) { self.words = words }

    /// Removes `--name VALUE` (or `--name=VALUE`) and returns the value; the last one wins.
    mutating func value(_ name: String) throws -> String? {
        var found: String?
        var index = 0
        while index < words.count {
            if words[index] == name {
                guard index + 1 < words.count else { throw UsageError(message: "\(name) needs a value") }
                found = words[index + 1]
                words.removeSubrange(index...index + 1)
            } else if words[index].hasPrefix(name + "=") {
                found = String(words[index].dropFirst(name.count + 1))
                words.remove(at: index)
            } else {
                index += 1
            }
        }
        return found
    }

    /// Removes every `--name VALUE` and returns the values in order.
    mutating func values(_ name: String) throws -> [String] {
        var found: [String] = []
        while let value = try firstValue(name) { found.append(value) }
        return found
    }

    private mutating func firstValue(_ name: String) throws -> String? {
        guard let index = words.firstIndex(where: { $0 == name || $0.hasPrefix(name + "=") }) else { return nil }
        if words[index] == name {
            guard index + 1 < words.count else { throw UsageError(message: "\(name) needs a value") }
            let value = words[index + 1]
            words.removeSubrange(index...index + 1)
            return value
        }
        let value = String(words[index].dropFirst(name.count + 1))
        words.remove(at: index)
        return value
    }

    /// Removes a `--flag` and says whether it was there.
    mutating func flag(_ name: String) -> Bool {
        guard let index = words.firstIndex(of: name) else { return false }
        words.remove(at: index)
        return true
    }

    /// Fails on anything left that looks like an option.
    func rejectUnknownOptions() throws {
        if let unknown = words.first(where: { $0.hasPrefix("--") }) {
            throw UsageError(message: "unknown option \(unknown)")
        }
    }
}
