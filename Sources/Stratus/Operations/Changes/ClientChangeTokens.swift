import Foundation
import Synchronization

/// The client change tokens (`clientChangeTokenData`) modify requests of this process carried,
/// per store, database, user and zone, for ``FetchRecordZoneChangesOperation`` to hand back.
///
/// CloudKit keeps them per device on its servers; Stratus treats a process as a device. The
/// store's engine SPI has no place for them, and a token only means something to the client
/// that sent it, so another process (a new "device") gets `nil`, as CloudKit answers a device
/// that never sent one.
final class ClientChangeTokens: Sendable {
    static let shared = ClientChangeTokens()

    private struct Key: Hashable {
        var store: String
        var context: DatabaseContext
        var zoneID: RecordZone.ID
    }

    private let tokens = Mutex<[Key: Data]>([:])

    /// Keeps `token` as the latest of each of `zoneIDs` in `database`.
    func record(_ token: Data, for zoneIDs: Set<RecordZone.ID>, in database: Database) {
        guard !zoneIDs.isEmpty, let store = try? database.engine.storeIdentifier else { return }
        // The context the operations ran in (the user's record name and roles, as the fetch sees them).
        let context = (try? database.resolvedContext()) ?? database.context
        tokens.withLock { tokens in
            for zoneID in zoneIDs { tokens[Key(store: store, context: context, zoneID: context.canonical(zoneID))] = token }
        }
    }

    /// The latest token a request of this process wrote to `zoneID`, or `nil`.
    func token(for zoneID: RecordZone.ID, context: DatabaseContext, store: String) -> Data? {
        tokens.withLock { $0[Key(store: store, context: context, zoneID: context.canonical(zoneID))] }
    }
}
