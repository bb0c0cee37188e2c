/// One `stratus` subcommand: what its help says, how its words become a value (validation,
/// which never touches a store), and what it does when run.
///
/// The command table (``StratusCommand/commands``) lists every type that conforms; `main`
/// parses with ``parse(_:)``, then calls ``run()``. Help text is made from these declarations
/// only, so an option cannot be accepted without being described.
protocol Command {
    /// The word after `stratus`.
    static var name: String { get }
    /// One line for `stratus --help`.
    static var summary: String { get }
    /// The usage lines, each starting with `stratus NAME`.
    static var usage: [String] { get }
    /// What the command does, after the usage lines.
    static var discussion: String { get }
    /// The command's own options.
    static var options: [Option] { get }
    /// The shared option groups it takes, in the order its help lists them.
    static var optionGroups: [OptionGroup] { get }
    /// What its exit codes mean beyond ``ExitCode/help``, if anything.
    static var exitNotes: String? { get }

    /// Checks the words and makes the command; nothing is opened or written.
    ///
    /// - Throws: ``UsageError`` naming the option or argument that is wrong.
    static func parse(_ arguments: ParsedArguments) throws -> Self

    /// Does the work; the answer is the process's exit status.
    func run() async throws -> ExitCode
}

extension Command {
    static var optionGroups: [OptionGroup] { [.store] }
    static var exitNotes: String? { nil }

    /// Every option the command accepts: its own, then its groups'.
    static var allOptions: [Option] { ownOptions + optionGroups.flatMap(\.options) }

    /// The command's own options, with `--quiet` where neither they nor its groups have one:
    /// every command takes it, so that a cron job can give it to each command it runs.
    static var ownOptions: [Option] {
        let declared = options + optionGroups.flatMap(\.options)
        return declared.contains { $0.name == "--quiet" } ? options : options + [.quietOnSuccess]
    }
}

/// One option: its name, the value it takes (none for a flag), what it does and its default.
struct Option {
    let name: String
    /// The placeholder of its value (`N`, `FILE`), or nil for a flag.
    let value: String?
    let help: String
    /// The value used when the option is not given, as help shows it; flags are off by default.
    let defaultValue: String?
    /// Whether it may be given more than once (each value counts, not only the last).
    let repeatable: Bool

    /// An option that takes a value.
    init(_ name: String, _ value: String, _ help: String, default defaultValue: String, repeatable: Bool = false) {
        self.name = name
        self.value = value
        self.help = help
        self.defaultValue = defaultValue
        self.repeatable = repeatable
    }

    /// A flag: present or not.
    init(flag name: String, _ help: String) {
        self.name = name
        value = nil
        self.help = help
        defaultValue = nil
        repeatable = false
    }

    var takesValue: Bool { value != nil }

    /// `--quiet` of a command that has no progress or advice of its own to silence.
    static let quietOnSuccess = Option(flag: "--quiet", "no notes on stderr that report nothing wrong (what was written, what was created), and no report of work done (assets gc); errors and warnings still go there")
}

/// Options several commands share, declared once.
struct OptionGroup {
    let title: String
    let placeholder: String
    let options: [Option]
}
