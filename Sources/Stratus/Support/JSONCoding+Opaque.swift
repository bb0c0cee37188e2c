import Foundation

extension JSONEncoder {
    /// The encoder of Stratus's own JSON (cursors, change tokens, stored subscription
    /// definitions): sorted keys, and a non-finite number (a predicate built with `.nan`, which
    /// an archive may hold before any check ran) written as text, so encoding never fails.
    static func stratusValues() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return encoder
    }
}

extension JSONDecoder {
    /// Reads what ``JSONEncoder/stratusValues()`` writes.
    static func stratusValues() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return decoder
    }
}
