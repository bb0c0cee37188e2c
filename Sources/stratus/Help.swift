/// The help texts, made from the command table's declarations.
enum Help {
    /// Column where option descriptions start.
    private static let descriptionColumn = 24
    private static let width = 96

    /// `stratus COMMAND --help`: usage, what it does, every option with its default, exit codes.
    static func text(for command: any Command.Type) -> String {
        // The `--quiet` every command takes, where the command does not name one of its own.
        let implicitQuiet = !command.options.contains { $0.name == "--quiet" } && command.ownOptions.contains { $0.name == "--quiet" }
        var out = command.usage.enumerated().map { index, line in usageLine(implicitQuiet ? line + " [--quiet]" : line, first: index == 0) }.joined(separator: "\n")
        out += "\n\n" + command.discussion + "\n"
        if !command.ownOptions.isEmpty {
            out += "\nOptions:\n" + command.ownOptions.map(describe).joined()
        }
        for group in command.optionGroups {
            out += "\n\(group.title):\n" + group.options.map(describe).joined()
        }
        out += "\n" + ExitCode.help + "\n"
        if let notes = command.exitNotes { out += notes + "\n" }
        return out
    }

    /// `stratus --help`: the commands, the store options and the exit codes.
    static func overview(_ commands: [any Command.Type]) -> String {
        var out = """
            usage: stratus COMMAND [options]
                   stratus help COMMAND | stratus COMMAND --help | stratus --version

            Commands:

            """
        let nameWidth = max(10, (commands.map { $0.name.count }.max() ?? 0) + 2)
        for command in commands {
            out += "  " + command.name.padding(toLength: nameWidth, withPad: " ", startingAt: 0) + command.summary + "\n"
        }
        out += "\nStore options (the commands that read or write one store's records; copy names its\nstores with --from and --to, info and check take --store only):\n" + OptionGroup.store.options.map(describe).joined()
        out += "\nData goes to stdout; progress, summaries and errors go to stderr.\n"
        out += "\n" + ExitCode.help + "\n\nRun 'stratus help COMMAND' for a command's options.\n"
        return out
    }

    /// A usage line, wrapped under the command's name: `usage: stratus import [FILE|-] [--format …`.
    private static func usageLine(_ line: String, first: Bool) -> String {
        let lead = first ? "usage: " : "       "
        let words = line.split(separator: " ")
        let prefix = lead + words.prefix(2).joined(separator: " ")
        let indent = String(repeating: " ", count: prefix.count + 1)
        var out = prefix, current = prefix
        // Keep bracketed groups such as "[--output FILE [--force]]" on one line.
        var groups: [String] = []
        var depth = 0
        for word in words.dropFirst(2) {
            if depth > 0 { groups[groups.count - 1] += " " + word } else { groups.append(String(word)) }
            depth += word.filter { $0 == "[" || $0 == "(" }.count - word.filter { $0 == "]" || $0 == ")" }.count
        }
        for group in groups {
            if current.count + 1 + group.count > width {
                out += "\n" + indent + group
                current = indent + group
            } else {
                out += " " + group
                current += " " + group
            }
        }
        return out
    }

    /// One option: `  --name VALUE   help (default: …)`, wrapped.
    static func describe(_ option: Option) -> String {
        let head = "  " + option.name + (option.value.map { " " + $0 } ?? "")
        var text = option.help
        if let defaultValue = option.defaultValue { text += " (default: \(defaultValue))" }
        if option.repeatable { text += "; may be repeated" }
        let lines = wrap(text, width: width - descriptionColumn)
        var out = ""
        if head.count + 2 <= descriptionColumn {
            out += head.padding(toLength: descriptionColumn, withPad: " ", startingAt: 0) + lines[0] + "\n"
        } else {
            out += head + "\n" + String(repeating: " ", count: descriptionColumn) + lines[0] + "\n"
        }
        for line in lines.dropFirst() { out += String(repeating: " ", count: descriptionColumn) + line + "\n" }
        return out
    }

    private static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        lines.append(line)
        return lines
    }
}
