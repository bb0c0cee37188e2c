import Foundation

/// A name as CloudKit's JSON spells it (`namePrefix`, `givenName`, `middleName`, `familyName`,
/// `nameSuffix`, `nickname`): how a share's participants and the user directory store names.
extension PersonNameComponents {
    /// The parts that are set, by CloudKit's keys.
    ///
    /// ```swift
    /// PersonNameComponents(givenName: "Bob").cloudKitParts   // ["givenName": "Bob"]
    /// ```
    var cloudKitParts: [String: String] {
        ["namePrefix": namePrefix, "givenName": givenName, "middleName": middleName,
         "familyName": familyName, "nameSuffix": nameSuffix, "nickname": nickname].compactMapValues { $0 }
    }

    /// The name whose parts ``cloudKitParts`` gave; other keys are not read.
    init(cloudKitParts parts: [String: String]) {
        self.init()
        namePrefix = parts["namePrefix"]
        givenName = parts["givenName"]
        middleName = parts["middleName"]
        familyName = parts["familyName"]
        nameSuffix = parts["nameSuffix"]
        nickname = parts["nickname"]
    }
}
