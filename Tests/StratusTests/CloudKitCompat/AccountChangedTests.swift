import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Counts the account-changed notifications posted while it observes them.
private final class AccountChangeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = 0
    private var observer: (any NSObjectProtocol)?

    init() {
        observer = NotificationCenter.default.addObserver(forName: .AccountChanged, object: nil, queue: nil) { [weak self] _ in
            guard let self else { return }
            self.lock.withLock { self.seen += 1 }
        }
    }

    deinit { observer.map(NotificationCenter.default.removeObserver) }

    var count: Int { lock.withLock { seen } }
}

@Suite("CloudKit's account-changed notification")
struct AccountChangedTests {
    @Test("`.CKAccountChanged` ports as `.AccountChanged` with CloudKit's name, and using a container never posts it")
    func observedAndNeverPosted() async throws {
        #expect(Notification.Name.AccountChanged.rawValue == "CKAccountChangedNotification")
        let counter = AccountChangeCounter()
        try await TemporaryStore.with(prefix: "account-changed") { store in
            let container = try Container(identifier: "iCloud.com.example.account", storePath: store.path(), userName: "alice")
            #expect(try await container.accountStatus() == .available)
            let userID = try await container.userRecordID()
            _ = try await container.publicCloudDatabase.record(for: userID)
            _ = try await container.privateCloudDatabase.save(Record(recordType: "Note"))
        }
        #expect(counter.count == 0)
    }
}
