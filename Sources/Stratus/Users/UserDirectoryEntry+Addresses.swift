/// The addresses user discovery finds a user by, and how they compare.
extension UserDirectoryEntry {
    static let emailKeyPrefix = "email:"
    static let phoneKeyPrefix = "tel:"
    /// The most bytes an email address has (RFC 5321's path limit).
    static let maximumEmailAddressLength = 254
    /// The digits a phone number has: at least 3 (short numbers), at most 20 (E.164's 15 and
    /// an extension).
    static let phoneDigitRange = 3...20

    /// Checks an email address: `local@domain`, both parts not empty, at most 254 bytes, no
    /// space or control character; answers the key lookups compare (lowercased, as Apple
    /// accounts' addresses compare).
    ///
    /// ```swift
    /// try UserDirectoryEntry.checkEmailAddress("Bob@Example.com")   // "email:bob@example.com"
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    @discardableResult
    public static func checkEmailAddress(_ address: String) throws(StratusError) -> String {
        if address.utf8.count > maximumEmailAddressLength {
            throw StratusError(.invalidArguments, "email address '\(address.prefix(40))…' is longer than \(maximumEmailAddressLength) bytes")
        }
        if address.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) {
            throw StratusError(.invalidArguments, "email address \(address.debugDescription) has a space or control character")
        }
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw StratusError(.invalidArguments, "'\(address)' is not an email address: it needs one '@' with text on both sides (name@example.com)")
        }
        return emailKeyPrefix + address.lowercased()
    }

    /// Checks a phone number: digits (3 to 20), optionally a leading `+`, and spaces, `-`, `.`,
    /// `(` and `)` between them; answers the key lookups compare (the `+` and the digits).
    ///
    /// ```swift
    /// try UserDirectoryEntry.checkPhoneNumber("+1 (555) 010-0100")   // "tel:+15550100100"
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    @discardableResult
    public static func checkPhoneNumber(_ number: String) throws(StratusError) -> String {
        var digits = ""
        for (offset, character) in number.enumerated() {
            if let ascii = character.asciiValue, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(ascii) {
                digits.append(character)
            } else if character == "+" && offset == 0 {
                continue
            } else if !" -.()".contains(character) {
                throw StratusError(.invalidArguments, "phone number \(number.debugDescription) has '\(character)' at position \(offset + 1); use digits, a leading '+', and spaces, '-', '.', '(' or ')' between them")
            }
        }
        guard phoneDigitRange.contains(digits.count) else {
            throw StratusError(.invalidArguments, "phone number \(number.debugDescription) has \(digits.count) digits; a phone number has \(phoneDigitRange.lowerBound) to \(phoneDigitRange.upperBound)")
        }
        return phoneKeyPrefix + (number.hasPrefix("+") ? "+" : "") + digits
    }

    /// The key of an email address, `nil` for one ``checkEmailAddress(_:)`` refuses.
    static func addressKey(emailAddress: String) -> String? { try? checkEmailAddress(emailAddress) }

    /// The key of a phone number, `nil` for one ``checkPhoneNumber(_:)`` refuses.
    static func addressKey(phoneNumber: String) -> String? { try? checkPhoneNumber(phoneNumber) }
}
