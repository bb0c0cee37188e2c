/// The known word a mistyped one most likely meant, for usage errors: `unknown option --stor;
/// did you mean --store?`.
///
/// ```swift
/// Suggestion.nearest(to: "--stor", among: ["--store", "--zone"])       // ["--store"]
/// Suggestion.didYouMean("--versoin", among: ["--help", "--version"])  // "; did you mean --version?"
/// ```
enum Suggestion {
    /// The candidates `word` is a unique prefix of (`--stor` for `--store`), else those nearest
    /// to it by edit distance (a letter added, left out, changed, or two swapped), when that is
    /// at most 2 (1 for words of 4 letters or fewer, whose every neighbour is near); empty when
    /// none is close.
    static func nearest(to word: String, among candidates: [String]) -> [String] {
        let known = Array(Set(candidates)).sorted()
        let bare = Array(word.drop { $0 == "-" })
        guard !bare.isEmpty, !known.contains(word) else { return [] }
        let extending = known.filter { $0.hasPrefix(word) && $0.count > word.count }
        if extending.count == 1, bare.count >= 2 { return extending }
        let limit = bare.count <= 4 ? 1 : 2
        var best: [String] = []
        var bestDistance = limit + 1
        for candidate in known {
            let distance = editDistance(bare, Array(candidate.drop { $0 == "-" }), limit: limit)
            if distance < bestDistance {
                best = [candidate]
                bestDistance = distance
            } else if distance == bestDistance {
                best.append(candidate)
            }
        }
        return best
    }

    /// `; did you mean X?` (or `X or Y?` for two equally near), or the empty string.
    static func didYouMean(_ word: String, among candidates: [String]) -> String {
        let found = nearest(to: word, among: candidates)
        guard !found.isEmpty, found.count <= 2 else { return "" }
        return "; did you mean \(found.joined(separator: " or "))?"
    }

    /// The optimal string alignment distance between `a` and `b` (Levenshtein, with a swap of
    /// two neighbours counted as one edit); any answer past `limit` is `limit + 1`.
    static func editDistance(_ a: [Character], _ b: [Character], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        if a.isEmpty || b.isEmpty { return min(max(a.count, b.count), limit + 1) }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], beforePrevious[j - 2] + 1)
                }
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return min(previous[b.count], limit + 1)
    }
}
