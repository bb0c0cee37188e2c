/// One engine call of the convenience layer (schemas, the user directory, diagnostics), run as
/// an operation on a database's queue so that it is retried, cancelled and ordered as every
/// other call is.
///
/// ```swift
/// let schema = try await database.perform { engine, context in try engine.fetchSchema(storageContainer: context.storageContainer) }
/// ```
final class EngineTaskOperation<Value: Sendable>: DatabaseOperation, @unchecked Sendable {
    private let task: @Sendable (any StorageEngine, DatabaseContext) throws -> Value
    var resultBlock: (@Sendable (Result<Value, any Error>) -> Void)?
    private var value: Value?

    init(_ task: @escaping @Sendable (any StorageEngine, DatabaseContext) throws -> Value) {
        self.task = task
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        value = try withRetry { try task(engine, context) }
        return nil
    }

    override func complete(with error: StratusError?) {
        if let error { resultBlock?(.failure(error)) } else if let value { resultBlock?(.success(value)) }
    }
}

extension Database {
    /// Runs `task` with the engine and the caller's context on this database's queue.
    func perform<Value: Sendable>(_ task: @escaping @Sendable (any StorageEngine, DatabaseContext) throws -> Value) async throws -> Value {
        let result = Collector<Value>()
        try await run { finish in
            let op = EngineTaskOperation(task)
            op.resultBlock = { outcome in
                if case .success(let value) = outcome { result.append(value) }
                finish(outcome.map { _ in () })
            }
            return op
        }
        guard let value = result.items.first else { throw StratusError(.internalError, "an engine task finished without a result") }
        return value
    }
}
