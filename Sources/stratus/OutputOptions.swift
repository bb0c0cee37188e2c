extension OptionGroup {
    /// Where a command writes its data: stdout, or a file.
    static let output = OptionGroup(title: "Output options", placeholder: "[--output FILE [--force]]", options: [
        Option("--output", "FILE", "write to FILE instead of stdout: a file under a temporary name, synced and moved into place when complete (a symbolic link is followed and stays a link); a FIFO, a device or /dev/stdout directly", default: "stdout"),
        Option(flag: "--force", "replace an existing FILE, or create the missing target of a symbolic link"),
    ])
}

/// The output options' values.
struct OutputOptions: Equatable {
    var path: String?
    var force: Bool

    init(_ arguments: ParsedArguments) throws {
        path = arguments.value("--output")
        force = arguments.flag("--force")
        if force && path == nil { throw UsageError(message: "--force needs --output") }
    }
}
