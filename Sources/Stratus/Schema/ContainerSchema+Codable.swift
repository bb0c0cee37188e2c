import Foundation

extension ContainerSchema: Codable {
    private enum CodingKeys: String, CodingKey {
        case roles, recordTypes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        roles = Set(try container.decodeIfPresent([SecurityRole].self, forKey: .roles) ?? [])
        recordTypes = try container.decode([RecordTypeSchema].self, forKey: .recordTypes)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(roles.sorted(), forKey: .roles)
        try container.encode(recordTypes, forKey: .recordTypes)
    }
}
