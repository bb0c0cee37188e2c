import Foundation

/// CloudKit's alert texts: what a subscription's ``NotificationInfo`` sets, and what each of
/// its notifications carries (``StratusNotification/alertBody`` and the rest), with the fields
/// the `…LocalizationArgs` name replaced by the values of the record that fired.
///
/// One type for both, so that a text CloudKit adds is added once. Encoded flat, with nil texts
/// left out: a subscription's definition and a notification's payload store its keys among
/// their own.
///
/// ```swift
/// var alert = NotificationAlert(alertBody: "New order")
/// alert.titleLocalizationArgs = ["customer"]
/// ```
struct NotificationAlert: Hashable, Sendable, Codable {
    var alertBody: String?
    var alertLocalizationKey: String?
    var alertLocalizationArgs: [String]?
    var title: String?
    var titleLocalizationKey: String?
    var titleLocalizationArgs: [String]?
    var subtitle: String?
    var subtitleLocalizationKey: String?
    var subtitleLocalizationArgs: [String]?
    var alertActionLocalizationKey: String?
    var alertLaunchImage: String?
    var soundName: String?
    var category: String?

    var isEmpty: Bool { self == NotificationAlert() }
}
