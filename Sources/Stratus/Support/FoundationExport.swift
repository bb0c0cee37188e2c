// `import CloudKit` makes Foundation visible (CloudKit's module re-exports it), so CloudKit
// files that use `Data`, `UserDefaults` or `NSKeyedArchiver` with only that import must port
// with `import Stratus` alone.
@_exported import Foundation
