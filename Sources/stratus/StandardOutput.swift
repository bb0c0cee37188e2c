import Foundation
import StratusPostgres

/// Writes a command's answer to stdout, and fails when it cannot be written: a full disk or a
/// closed pipe is exit 73 with a message, never a crash (`FileHandle.write(_:)` traps on
/// errors) nor exit 0 with the answer lost (`print` buffers, and the buffer's failure to flush
/// at exit is silent).
///
/// ```swift
/// try StandardOutput.write("42\n")
/// ```
enum StandardOutput {
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func write(_ text: String) throws {
        var text = text
        try text.withUTF8 { try write(UnsafeRawBufferPointer($0)) }
    }

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func write(_ data: Data) throws {
        try data.withUnsafeBytes { try write($0) }
    }

    /// A line: `text` and a newline, as `print` writes it.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func line(_ text: String) throws {
        try write(text + "\n")
    }

    private static func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard var next = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let written = Foundation.write(STDOUT_FILENO, next, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                throw CommandFailure.system(.cannotCreateOutput, "cannot write to standard output")
            }
            next += written
            remaining -= written
        }
    }
}

/// Writes messages to stderr, best effort: a message that cannot be written is dropped (a full
/// disk under the log must not stop a job or hide its exit code). Control characters other
/// than newline and tab are shown escaped (`\u{1B}`, `\u{D}`): messages quote names and values
/// from untrusted input, and raw escape sequences would drive the reader's terminal. The
/// progress line's own return and erase go apart from the text (`terminalControl`).
/// Passwords are never shown: every URL's password is hidden, and so is the password of a
/// command-line word or `$STRATUS_STORE` / `$STRATUS_READ_STORE` that holds one, wherever a
/// message quotes it (`unexpected argument 'postgresql://u:pw@db1/app'` for a forgotten
/// `--store`).
///
/// ```swift
/// StandardError.write("stratus: imported 3\n")
/// ```
enum StandardError {
    static func write(_ text: String, afterTerminalControl terminalControl: String = "") {
        let text = SecretWords.hidden(in: text)
        var shown = text
        if text.unicodeScalars.contains(where: isHidden) {
            shown = ""
            for scalar in text.unicodeScalars {
                if isHidden(scalar) {
                    shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                } else {
                    shown.unicodeScalars.append(scalar)
                }
            }
        }
        shown = terminalControl + shown
        shown.withUTF8 { bytes in
            guard var next = UnsafeRawPointer(bytes.baseAddress) else { return }
            var remaining = bytes.count
            while remaining > 0 {
                let written = Foundation.write(STDERR_FILENO, next, remaining)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                next += written
                remaining -= written
            }
        }
    }

    /// C0 and C1 control characters and DEL, but for newline and tab.
    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}

/// The command-line words and store variables that hold a password, and how messages show them.
enum SecretWords {
    /// Each word that holds a password, with the form messages show instead; longest first,
    /// so that a word inside another is replaced after it. A URL is also found with one slash
    /// after its scheme, as a path the system normalized shows it (`postgresql:/u:pw@db1/x`).
    static let replacements: [(word: String, shown: String)] = {
        let environment = ProcessInfo.processInfo.environment
        let words = CommandLine.arguments.dropFirst() + ["STRATUS_STORE", "STRATUS_READ_STORE"].compactMap { environment[$0] }
        var found: [String: String] = [:]
        for word in words {
            let shown = shownForm(of: word)
            guard shown != word else { continue }
            found[word] = shown
            if word.contains("://") {
                found[word.replacingOccurrences(of: "://", with: ":/")] = shown.replacingOccurrences(of: "://", with: ":/")
            }
        }
        return found.map { ($0.key, $0.value) }.sorted { $0.word.count > $1.word.count }
    }()

    /// `word` with its passwords hidden: those of the URLs in it (also of one written with a
    /// single slash after its scheme), and a libpq `key=value` string's `password` (of a word
    /// that has both `=` and "password", which a path or a name seldom has).
    static func shownForm(of word: String) -> String {
        if let scheme = word.prefixMatch(of: #/[A-Za-z][A-Za-z0-9+.\-]*:\/(?!\/)/#) {
            let length = word.distance(from: word.startIndex, to: scheme.range.upperBound)
            let doubled = String(word.prefix(length)) + "/" + String(word.dropFirst(length))
            let shown = PostgresConnectionString.redactingWholeURL(doubled)
            return shown == doubled ? word : String(shown.prefix(length)) + String(shown.dropFirst(length + 1))
        }
        if let equals = word.firstIndex(of: "="), word.hasPrefix("-"), word[equals...].contains("://") {
            // `--store=URL`: the option's name, then the URL.
            return String(word[...equals]) + shownForm(of: String(word[word.index(after: equals)...]))
        }
        // The whole word is one URL: a quote or a space in its password does not end it here.
        var shown = PostgresConnectionString.redactingWholeURL(word)
        if shown == word { shown = PostgresConnectionString.redactingURLs(in: word) }
        if shown == word, word.contains("="), word.lowercased().contains("password") {
            shown = PostgresConnectionString.redacted(word)
        }
        return shown
    }

    /// `text` with every secret word replaced by its shown form, and every URL's password hidden,
    /// also of a URL with one slash after its scheme (a path the system normalized: `the folder
    /// postgresql:/u:pw@db1 does not exist`).
    static func hidden(in text: String) -> String {
        var text = text
        for (word, shown) in replacements where text.contains(word) {
            text = text.replacingOccurrences(of: word, with: shown)
        }
        text = PostgresConnectionString.redactingURLs(in: text)
        guard text.contains(":/"), text.contains("@") else { return text }
        return text.replacing(#/[A-Za-z][A-Za-z0-9+.\-]*:\/(?!\/)[^\s'"`]*/#) { match in shownForm(of: String(match.output)) }
    }
}
