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

    /// Refuses a URL whose user part holds more than one `@`. libpq ends the user part at the
    /// first `@` and Stratus's redaction at the last, so the rest of a password with an `@` in
    /// it would be read as the host and shown in messages. Nothing of the URL is echoed.
    static func checkUserInfo(_ conninfo: String) throws {
        guard let length = schemeLength(conninfo) else { return }
        let rest = conninfo.dropFirst(length)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard authority.filter({ $0 == "@" }).count > 1 else { return }
        throw StratusError(.invalidArguments, "a PostgreSQL URL has more than one '@' before its host (not shown: it may hold a password); write an '@' of the user name or password as %40")
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

    /// The parts of a URL that may hold a password: the user part (before the host's last `@`)
    /// and the values of `password` parameters, as written.
    private static func urlSecrets(_ url: String) -> [String] {
        guard let length = schemeLength(url) else { return [] }
        let rest = url.dropFirst(length)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        var secrets: [String] = []
        if let at = authority.lastIndex(of: "@") { secrets.append(String(authority[..<at])) }
        if let question = rest.firstIndex(of: "?") {
            for parameter in rest[rest.index(after: question)...].split(separator: "&") {
                let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(pair[0])
                if (key.removingPercentEncoding ?? key).lowercased() == "password", pair.count == 2 { secrets.append(String(pair[1])) }
            }
        }
        return secrets.filter { !$0.isEmpty }
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// A libpq message on one line: libpq ends a reason without a full stop and puts its hint
    /// on the next line (`Connection refused` / `Is the server running…`), so a line that ends
    /// in a letter or digit gets one.
    static func messageLine(_ text: String) -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return lines.dropFirst().reduce(lines.first ?? "") { joined, line in
            joined + (joined.last.map { $0.isLetter || $0.isNumber } == true ? ". " : " ") + line
        }
    }

    // MARK: - Redaction

    private static func redactedURL(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://")?.upperBound else { return url }
        let rest = url[schemeEnd...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var result = String(url[..<schemeEnd])
        let authority = rest[..<authorityEnd]
        // The password ends at the last '@' of the authority, wherever the user put others.
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                result += userInfo[..<colon] + ":***"
            } else {
                result += userInfo
            }
            result += authority[at...]
        } else {
            result += authority
        }
        let tail = rest[authorityEnd...]
        guard let questionMark = tail.firstIndex(of: "?") else { return result + tail }
        result += tail[..<questionMark] + "?"
        let parameters = tail[tail.index(after: questionMark)...].split(separator: "&", omittingEmptySubsequences: false)
        result += parameters.map { parameter -> String in
            let key = parameter.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            return (key.removingPercentEncoding ?? key).lowercased() == "password" ? "\(key)=***" : String(parameter)
        }.joined(separator: "&")
        return result
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
                if !closed && key.lowercased() == "password" { return result + "***" }
            } else {
                while i < characters.count, !characters[i].isWhitespace {
                    let c = characters[i]
                    value.append(c); i += 1
                    if c == "\\", i < characters.count { value.append(characters[i]); i += 1 }
                }
            }
            result += key.lowercased() == "password" ? "***" : value
        }
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    private static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
