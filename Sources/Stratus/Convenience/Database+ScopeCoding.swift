import Foundation

// `Database.Scope` is not `Codable`, as `CKDatabase.Scope` is not: an app's own
// `extension CKDatabase.Scope: Codable` then ports without a warning. Stratus's own tokens,
// cursors and copy keys write a scope as its raw value, which is what the conformance wrote.

extension Database.Scope {
    /// The scope as Stratus's tokens, cursors and copy keys store it: its raw value, as the
    /// conformance of earlier versions wrote it. A type stores this and lists it in its
    /// `CodingKeys` under its own name, so that its `Codable` conformance is still synthesized.
    struct Coded: Codable, Hashable, Sendable {
        let scope: Database.Scope

        init(_ scope: Database.Scope) { self.scope = scope }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            let rawValue = try container.decode(Int.self)
            guard let scope = Database.Scope(rawValue: rawValue) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "no database scope has the raw value \(rawValue)")
            }
            self.scope = scope
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(scope.rawValue)
        }
    }
}
