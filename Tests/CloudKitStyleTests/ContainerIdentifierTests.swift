import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// `CKContainer.containerIdentifier` is a `String?`: ported code unwraps it.
@Suite("Container identifiers, as CKContainer's")
struct ContainerIdentifierTests {
    // if let identifier = container.containerIdentifier { … }
    @Test("containerIdentifier is optional, as CKContainer's", arguments: TestEngine.all)
    func containerIdentifier(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            var seen: String?
            if let identifier = container.containerIdentifier { seen = identifier }
            #expect(seen == "iCloud.com.example.app" && container.identifier == "iCloud.com.example.app")
        }
    }
}
