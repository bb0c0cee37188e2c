import CLibPQ
import Foundation
import Stratus

/// PostgreSQL connection strings as libpq reads them: URLs (`postgresql://user@host/db`) and
/// `key=value` lists (`host=db1 dbname=app`). Stratus never builds one from user values by
/// hand and never shows one with its password.
///
/// ```swift
/// PostgresConnectionString.redacted("postgres://app:secret@db1/stratus")
/// // "postgres://app:***@db1/stratus"
/// let other = try PostgresConnectionString.replacing(["dbname": "test_1"], in: url)
/// ```
public enum PostgresConnectionString {
    /// Whether `text` is a PostgreSQL URL (`postgresql://…` or `postgres://…`, the scheme in
    /// any case, as RFC 3986 reads schemes; Stratus gives libpq the scheme in lowercase).
    public static func isURL(_ text: String) -> Bool {
        schemeLength(text) != nil
    }

    /// Whether `text` begins with a PostgreSQL scheme and a colon (`postgresql:`, `postgres:`, in
    /// any case), a URL or not: `postgresql:/host/db` (one slash) is none, and no file path either.
    ///
    /// ```swift
    /// PostgresConnectionString.hasPostgresScheme("postgresql:/db1/app")   // true
    /// PostgresConnectionString.isURL("postgresql:/db1/app")               // false
    /// ```
    public static func hasPostgresScheme(_ text: String) -> Bool {
        let lowered = text.prefix(11).lowercased()
        return lowered.hasPrefix("postgresql:") || lowered.hasPrefix("postgres:")
    }

    /// The length of the scheme and `://` that `text` begins with, if it is a URL.
    private static func schemeLength(_ text: String) -> Int? {
        let lowered = text.prefix(13).lowercased()
        if lowered.hasPrefix("postgresql://") { return 13 }
        if lowered.hasPrefix("postgres://") { return 11 }
        return nil
    }

    /// `conninfo` as libpq reads it: a URL's scheme in lowercase (libpq knows no other case).
    public static func normalized(_ conninfo: String) -> String {
        guard let length = schemeLength(conninfo) else { return conninfo }
        return conninfo.prefix(length).lowercased() + conninfo.dropFirst(length)
    }

    /// Refuses a URL whose user name or password libpq would read as another part, which
    /// messages would then show: more than one `@` before the host (libpq ends the user part at
    /// the first `@` and takes the rest of the password for the host), or an `@` after the first
    /// `/` (a `/` of the password not percent-encoded: libpq ends the host at it and reads the
    /// password's head as the port, or its tail as the host and database, which its messages
    /// quote). Nothing of the URL is echoed.
    static func checkUserInfo(_ conninfo: String) throws {
        guard let length = schemeLength(conninfo) else { return }
        var rest = conninfo.dropFirst(length)
        // As libpq reads it: the user part ends at the first '@' that comes before any '/'.
        if let stop = rest.firstIndex(where: { $0 == "@" || $0 == "/" }), rest[stop] == "@" {
            let host = rest[rest.index(after: stop)...].prefix { $0 != "/" && $0 != "?" }
            if host.contains("@") {
                throw StratusError(.invalidArguments, "a PostgreSQL URL has more than one '@' before its host (not shown: it may hold a password); write an '@' of the user name or password as %40")
            }
            rest = rest[host.endIndex...]
        }
        let path = rest.drop { $0 != "/" }.prefix { $0 != "?" }
        guard path.contains("@") else { return }
        throw StratusError(.invalidArguments, "a PostgreSQL URL has an '@' after its first '/' (not shown: it may hold a password); write a '/' of the user name or password as %2F, and an '@' of a database name as %40")
    }

    /// `conninfo` with every password replaced by `***`, for messages and logs.
    ///
    /// Works on malformed strings too: what follows a `password` key that cannot be read is
    /// hidden whole.
    public static func redacted(_ conninfo: String) -> String {
        isURL(conninfo) ? redactedURL(conninfo) : redactedKeywords(conninfo)
    }

    /// The settings written in `conninfo`, by libpq keyword (`host`, `port`, `dbname`,
    /// `user`…), without libpq's defaults or environment variables.
    ///
    /// - Throws: `invalidArguments` when libpq cannot read `conninfo`, or a URL's user part holds
    ///   more than one `@`; the message shows the string redacted, or not at all.
    public static func settings(in conninfo: String) throws -> [String: String] {
        try checkUserInfo(conninfo)
        let conninfo = normalized(conninfo)
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            let reason = error.map { String(cString: $0) } ?? "out of memory"
            PQfreemem(error)
            throw malformed(conninfo, reason: reason)
        }
        defer { PQconninfoFree(options) }
        var settings: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { settings[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return settings
    }

    /// A URL holding exactly `settings` (libpq keywords), each percent-encoded as a query
    /// parameter: `postgresql://?dbname=app&host=db1`.
    public static func url(_ settings: [String: String]) -> String {
        let query = settings.sorted { $0.key < $1.key }.map { "\(percentEncoded($0.key))=\(percentEncoded($0.value))" }
        return "postgresql://?" + query.joined(separator: "&")
    }

    /// `conninfo` with some settings replaced or added, as a URL (see ``url(_:)``): the way to
    /// point at another database of the same server.
    ///
    /// - Throws: `invalidArguments` when libpq cannot read `conninfo`.
    public static func replacing(_ changes: [String: String], in conninfo: String) throws -> String {
        url(try settings(in: conninfo).merging(changes) { $1 })
    }

    /// The error for a connection string libpq cannot read. libpq's reason may quote the
    /// string, so it is shown only when the string holds no password.
    static func malformed(_ conninfo: String, reason: String) -> StratusError {
        let shown = redacted(conninfo)
        var detail = shown == conninfo ? ": " + messageLine(reason) : ""
        if detail.isEmpty, isURL(conninfo) {
            // A URL with a password: libpq's reason (an unknown parameter, a bad %-escape) is
            // shown unless what it quotes is part of the user name, the password or a password
            // parameter.
            let secrets = urlSecrets(conninfo)
            let quoted = messageLine(reason).matches(of: #/"([^"]*)"/#).map { String($0.output.1) }
            if !quoted.contains(where: { token in !token.isEmpty && secrets.contains { $0.contains(token) || token.contains($0) } }) {
                detail = ": " + messageLine(reason)
            } else {
                detail = ": the user name or a password is not written right (percent-encode its special characters; not shown)"
            }
        }
        return StratusError(.invalidArguments, "the PostgreSQL connection string \(shown.isEmpty ? "''" : shown) cannot be read\(detail)")
    }

    /// The parts of a URL that may hold a password: the user part (see ``userInfoEnd(_:)``) and
    /// the values of `password` parameters, as written.
    private static func urlSecrets(_ url: String) -> [String] {
        guard let length = schemeLength(url) else { return [] }
        let rest = url.dropFirst(length)
        var secrets: [String] = []
        var tail = rest
        if let at = userInfoEnd(rest) {
            secrets.append(String(rest[..<at]))
            tail = rest[rest.index(after: at)...]
        }
        if let question = tail.firstIndex(of: "?") {
            for parameter in tail[tail.index(after: question)...].split(separator: "&") {
                let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(pair[0])
                if isSecret(key.removingPercentEncoding ?? key), pair.count == 2 { secrets.append(String(pair[1])) }
            }
        }
        return secrets.filter { !$0.isEmpty }
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// A libpq message on one line: libpq ends a reason without a full stop and puts its hint
    /// on the next line (`Connection refused` / `Is the server running…`), so a line that ends
    /// in a letter or digit gets one, and a line that ends in a quote a semicolon
    /// (`… for user "carol"; password retrieved from file …`).
    static func messageLine(_ text: String) -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return lines.dropFirst().reduce(lines.first ?? "") { joined, line in
            let last = joined.last
            let separator = last.map { $0.isLetter || $0.isNumber } == true ? ". " : last == "\"" ? "; " : " "
            return joined + separator + line
        }
    }

    // MARK: - Redaction

    /// Where the user part of a URL ends (after `scheme://`): at the last `@` before the first
    /// `/`, so that whatever libpq takes for the user name and password (it ends them at the
    /// first `@`, and reads on past a `?`) is inside; or, when an `@` comes after the first `/`
    /// (before any `?`) and a `:` before it, at the last such `@`: a password with an unencoded
    /// `/` (and maybe an `@` too), which libpq would misread and ``checkUserInfo(_:)`` refuses.
    static func userInfoEnd(_ rest: Substring, slashInPassword: Bool = true) -> Substring.Index? {
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let beforeSlash = rest[..<slash].lastIndex(of: "@")
        guard slashInPassword, slash < rest.endIndex, rest[..<slash].contains(":") else { return beforeSlash }
        let path = rest[slash...].prefix { $0 != "?" }
        return path.lastIndex(of: "@") ?? beforeSlash
    }

    private static func redactedURL(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://")?.upperBound else { return url }
        var result = String(url[..<schemeEnd])
        var rest = url[schemeEnd...]
        // The unencoded-'/' reading is libpq's: a URL of another scheme (`https://host:8443/@x`)
        // keeps its port and path, unless the scheme is a typo of PostgreSQL's.
        let postgresLike = result.lowercased().hasPrefix("postg")
        if let at = userInfoEnd(rest, slashInPassword: postgresLike) {
            let userInfo = rest[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                result += userInfo[..<colon] + ":***"
            } else if let question = userInfo.firstIndex(of: "?") {
                // libpq reads `host?password=x@y` as the user `host?password=x`.
                result += userInfo[..<question] + "?***"
            } else {
                result += userInfo
            }
            result += "@"
            rest = rest[rest.index(after: at)...]
        }
        guard let questionMark = rest.firstIndex(of: "?") else { return result + rest }
        result += rest[..<questionMark] + "?"
        let parameters = rest[rest.index(after: questionMark)...].split(separator: "&", omittingEmptySubsequences: false)
        result += parameters.map { parameter -> String in
            let key = parameter.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            return isSecret(key.removingPercentEncoding ?? key) ? "\(key)=***" : String(parameter)
        }.joined(separator: "&")
        return result
    }

    /// `word`, one URL of any scheme from start to end (a command-line word, a variable's
    /// value), with its password hidden even where it holds a quote or a space, which end a URL
    /// that ``redactingURLs(in:)`` finds inside a message.
    ///
    /// ```swift
    /// PostgresConnectionString.redactingWholeURL("postgresql://u:pa'ss@db1/app")   // "postgresql://u:***@db1/app"
    /// ```
    public static func redactingWholeURL(_ word: String) -> String {
        word.prefixMatch(of: #/[A-Za-z][A-Za-z0-9+.\-]*:\/\//#) == nil ? word : redactedURL(word)
    }

    /// `text` with the password of every URL in it hidden, whatever its scheme (`***`, as
    /// ``redacted(_:)`` hides it): for messages that quote what a user typed, which may be a
    /// URL with its scheme mistyped, or one given where no URL was expected. A URL runs from its
    /// scheme to the next space or quote. The form of a URL that help shows,
    /// `postgresql://[user[:password]@]host…` (a `[` after the scheme), is left as it is.
    ///
    /// ```swift
    /// PostgresConnectionString.redactingURLs(in: "unexpected argument 'postgresq://u:pw@db1/app'")
    /// // "unexpected argument 'postgresq://u:***@db1/app'"
    /// ```
    public static func redactingURLs(in text: String) -> String {
        guard text.contains("://") else { return text }
        let pattern = #/[A-Za-z][A-Za-z0-9+.\-]*:\/\/[^\s'"`]*/#
        return text.replacing(pattern) { match in
            let url = String(match.output)
            return url.contains("://[") ? url : redactedURL(url)
        }
    }

    /// Reads `key = value` pairs as libpq does (values unquoted up to a space, or in single
    /// quotes; backslash escapes either way) and hides the values of `password`.
    private static func redactedKeywords(_ conninfo: String) -> String {
        let characters = Array(conninfo)
        var result = ""
        var i = 0
        func skipSpaces() { while i < characters.count, characters[i].isWhitespace { result.append(characters[i]); i += 1 } }
        while true {
            skipSpaces()
            guard i < characters.count else { return result }
            var key = ""
            while i < characters.count, characters[i] != "=", !characters[i].isWhitespace { key.append(characters[i]); i += 1 }
            result += key
            skipSpaces()
            guard i < characters.count, characters[i] == "=" else {
                // Not a `key=value` list libpq can read: hide the rest if a password may be in it.
                let remainder = String(characters[i...])
                return (key + remainder).lowercased().contains("password") ? result + "***" : result + remainder
            }
            result.append("="); i += 1
            skipSpaces()
            var value = ""
            if i < characters.count, characters[i] == "'" {
                value.append("'"); i += 1
                var closed = false
                while i < characters.count {
                    let c = characters[i]
                    value.append(c); i += 1
                    if c == "\\", i < characters.count { value.append(characters[i]); i += 1; continue }
                    if c == "'" { closed = true; break }
                }
                if !closed && isSecret(key) { return result + "***" }
            } else {
                while i < characters.count, !characters[i].isWhitespace {
                    let c = characters[i]
                    value.append(c); i += 1
                    if c == "\\", i < characters.count { value.append(characters[i]); i += 1 }
                }
            }
            result += isSecret(key) ? "***" : value
        }
    }

    /// Whether a connection parameter holds a secret: the password, and the passphrase of
    /// the client's SSL key (`sslpassword`).
    private static func isSecret(_ key: String) -> Bool {
        let key = key.lowercased()
        return key == "password" || key == "sslpassword"
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    private static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
