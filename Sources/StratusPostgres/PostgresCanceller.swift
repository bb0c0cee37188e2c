import CLibPQ
import Foundation
import Stratus

/// Stops the statement a ``PostgresConnection`` is running, from any thread.
///
/// The stopped statement fails with `operationCancelled`; when nothing runs, nothing happens.
///
/// ```swift
/// let canceller = try connection.makeCanceller()
/// DispatchQueue.global().asyncAfter(deadline: .now() + 1) { canceller.cancel() }
/// try connection.execute("SELECT pg_sleep(60)")   // throws operationCancelled
/// ```
public final class PostgresCanceller: @unchecked Sendable {
    // @unchecked: the PGcancel is never changed after creation, libpq documents PQcancel as
    // safe to call from any thread, and the shared flag is a Mutex.
    private let handle: OpaquePointer
    private let request: CancelRequest

    init(cancel: OpaquePointer, request: CancelRequest) {
        self.handle = cancel
        self.request = request
    }

    deinit { PQfreeCancel(handle) }

    /// Asks the server to stop the running statement. Answers whether the request reached
    /// the server (it may still arrive after the statement finished).
    @discardableResult
    public func cancel() -> Bool {
        request.set()
        var message = [CChar](repeating: 0, count: 256)
        return PQcancel(handle, &message, Int32(message.count)) == 1
    }
}

extension PostgresConnection {
    /// A canceller for the statements of this connection.
    ///
    /// - Throws: `serviceUnavailable` when the connection is broken.
    public func makeCanceller() throws -> PostgresCanceller {
        guard let cancel = PQgetCancel(handle) else {
            throw failure(nil, sql: nil, wasInTransaction: false)
        }
        return PostgresCanceller(cancel: cancel, request: cancelRequest)
    }
}
