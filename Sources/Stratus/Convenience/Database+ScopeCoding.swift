import Foundation

// `Database.Scope` is not `Codable`, as `CKDatabase.Scope` is not: an app's own
// `extension CKDatabase.Scope: Codable` then ports without a warning. Stratus's own tokens,
// cursors and copy keys write a scope as its raw value, which is what the conformance wrote.

extension KeyedEncodingContainer {
    mutating func encode(_ scope: Database.Scope, forKey key: Key) throws {
        try encode(scope.rawValue, forKey: key)
    }
}

extension KeyedDecodingContainer {
    func decode(_ type: Database.Scope.Type, forKey key: Key) throws -> Database.Scope {
        let rawValue = try decode(Int.self, forKey: key)
        guard let scope = Database.Scope(rawValue: rawValue) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "no database scope has the raw value \(rawValue)")
        }
        return scope
    }
}
