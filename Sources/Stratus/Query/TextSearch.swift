import Foundation

/// How Stratus searches text: tokenized search (`self CONTAINS`) ignores case and diacritics
/// and skips stop words, as CloudKit does. (String equality is in ``QueryRules``.)
///
/// Engines store ``tokens(in:)`` of searchable fields, so that searches can use an index.
///
/// ```swift
/// TextSearch.tokens(in: "The Café at Bob's")   // ["cafe", "bob", "s"]
/// ```
public enum TextSearch {
    /// Words too common to search for; they are dropped from searches and from indexed text.
    public static let stopWords: Set<String> = [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
        "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
        "they", "this", "to", "was", "will", "with",
    ]

    /// The distinct search words of `text`: split at anything but letters and digits, case and
    /// diacritics folded, stop words dropped, in order of first appearance.
    public static func tokens(in text: String) -> [String] {
        let folded = text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
        var words: [String] = []
        var seen: Set<String> = []
        var current = ""
        func finishWord() {
            if !current.isEmpty, !stopWords.contains(current), seen.insert(current).inserted { words.append(current) }
            current = ""
        }
        for character in folded {
            if character.isLetter || character.isNumber { current.append(character) } else { finishWord() }
        }
        finishWord()
        return words
    }

    /// The search words of a record's string and string-list values (of the fields named in
    /// `names`, or all): what `self CONTAINS` matches, and what a word index keeps.
    ///
    /// ```swift
    /// TextSearch.words(of: ["title": .string("Buy milk")])   // ["buy", "milk"]
    /// ```
    public static func words(of fields: [String: FieldValue], only names: [String]? = nil) -> Set<String> {
        var words: Set<String> = []
        for (key, value) in fields where names?.contains(key) ?? true {
            switch value {
            case .string(let text): words.formUnion(tokens(in: text))
            case .stringList(let texts): for text in texts { words.formUnion(tokens(in: text)) }
            default: continue
            }
        }
        return words
    }
}
