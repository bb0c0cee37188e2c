import Foundation

/// How Stratus compares text: string equality ignores case, and tokenized search
/// (`self CONTAINS`) ignores case and diacritics and skips stop words, as CloudKit does.
///
/// Engines store ``equalityKey(_:)`` beside each string and ``tokens(in:)`` of searchable
/// fields, so that queries on them can use indexes.
///
/// ```swift
/// TextSearch.tokens(in: "The Café at Bob's")   // ["cafe", "bob", "s"]
/// TextSearch.equalityKey("Milk") == TextSearch.equalityKey("MILK")   // true
/// ```
public enum TextSearch {
    /// Words too common to search for; they are dropped from searches and from indexed text.
    public static let stopWords: Set<String> = [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
        "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
        "they", "this", "to", "was", "will", "with",
    ]

    /// The form string equality compares: the string lowercased (Unicode-aware).
    public static func equalityKey(_ text: String) -> String {
        text.lowercased()
    }

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
}
