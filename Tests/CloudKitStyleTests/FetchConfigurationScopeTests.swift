import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Coodly's `FetchConfiguration.swift` (Apache 2.0, Copyright 2019 Coodly LLC; the search index
// did not name its repository), ported mechanically. Its CloudKit habit: the app makes
// `CKDatabase.Scope` `CustomStringConvertible` itself, as CloudKit's is not (an imported
// `NS_ENUM` prints as its type name), with names of its own choosing (its shared database reads
// "private") and an `@unknown default`, and reads `database.databaseScope.description` for its
// logs. CinemaKit's `DefaultChangesManager.swift` and several CloudKit REST clients carry the
// same extension. No substitutions besides the README's.

internal class FetchConfiguration {
    private let container: Container
    private let database: Database
    private let zone: RecordZone
    internal let recordType: String

    internal init(container: Container, database: Database, zone: RecordZone, recordType: String) {
        self.container = container
        self.database = database
        self.zone = zone
        self.recordType = recordType
    }

    internal var containerIdentifier: String {
        container.containerIdentifier ?? "-"
    }

    internal var databaseScope: String {
        database.databaseScope.description
    }

    internal var zoneName: String {
        zone.zoneID.zoneName
    }
}

extension Database.Scope: CustomStringConvertible {
    public var description: String {
        switch self {
        case .public:
            return "public"
        case .private:
            return "private"
        case .shared:
            return "private"
        @unknown default:
            return "unknown-\(rawValue)"
        }
    }
}

// MARK: - Tests

@Suite struct FetchConfigurationScopeTests {
    @Test(arguments: TestEngine.all) func theConfigurationNamesItsDatabaseAsTheAppDoes(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zone = RecordZone(zoneName: "Entries")
            let shared = FetchConfiguration(container: container, database: container.sharedCloudDatabase,
                                            zone: zone, recordType: "Entry")
            #expect(shared.databaseScope == "private")
            #expect(shared.containerIdentifier == "iCloud.com.example.app")
            #expect(shared.zoneName == "Entries")
            let everyone = FetchConfiguration(container: container, database: container.publicCloudDatabase,
                                              zone: .default(), recordType: "Entry")
            #expect(everyone.databaseScope == "public")
        }
    }

    /// Interpolation and `String(describing:)` go through the conformance, which is the app's
    /// alone, as on iOS.
    @Test func aScopePrintsThroughTheAppsConformance() {
        #expect("\(Database.Scope.shared)" == "private")
        #expect(String(describing: Database.Scope.public) == "public")
        #expect([Database.Scope.shared].description == "[private]")
    }

    /// Stratus's own messages keep naming the database it is: the app's names are for its logs.
    @Test(arguments: TestEngine.all) func stratusMessagesNameTheScopeThemselves(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            do {
                _ = try await container.sharedCloudDatabase.subscription(for: "never-saved")
                Issue.record("a subscription never saved should be unknownItem")
            } catch let error as StratusError {
                #expect(error.code == .unknownItem)
                #expect(error.localizedDescription.contains("the shared database"))
            }
            #expect("\(container.sharedCloudDatabase)".contains(", shared,"))
        }
    }
}
