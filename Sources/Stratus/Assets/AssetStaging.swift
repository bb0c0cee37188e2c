import Foundation
import Synchronization

/// Puts the content of the assets of a request's saves into the store before the records are
/// written, the core's half of the protocol ``AssetContentStore`` describes: each source is
/// opened safely (``AssetSource``), streamed in 1 MiB chunks into an upload while it is hashed
/// (never a whole file in memory), the content identifiers are held, the uploads committed
/// (durable, deduplicated); then the saves name the stored content. After the records are
/// written, ``release(engine:context:candidates:)`` drops the hold and collects what no record
/// names.
///
/// ```swift
/// var staging = try AssetStaging(engine: engine, context: context)
/// let staged = try staging.stage(saves)
/// // … write staged.saves …
/// staging.release(engine: engine, context: context, candidates: outcome.releasedAssetContents)
/// ```
struct AssetStaging {
    /// What staging made of a request's saves.
    struct Outcome {
        /// The saves, in order, their assets naming stored content; a failed save is left as it
        /// was (it is not written).
        var saves: [PreparedSave]
        /// Saves that cannot be written, by index, with why (a refused or missing source).
        var failures: [Int: StratusError]
    }

    let store: any AssetContentStore
    /// Whether the request may name any stored content (the store's administrator: a copy).
    var namesAnyContent = false
    /// The hold's name: this process's holder and a number of its own, so that releasing it
    /// leaves the holds of the process's other requests alone.
    let hold: String
    let maximumSize: Int64
    /// What the hold holds, once staged.
    private(set) var held: Set<String> = []

    private static let holdCounter = Atomic<Int>(0)

    /// Staging for one request in `context`'s database.
    ///
    /// - Throws: ``StratusError`` when the holder's lock cannot be made.
    init(engine: any StorageEngine, context: DatabaseContext, maximumSize: Int64 = Asset.maximumContentSize) throws {
        store = engine.assetContents(for: context)
        namesAnyContent = context.isAdministrator
        let holder = try AssetHolder.shared(in: store.localDirectory)
        hold = "\(holder.name):\(Self.holdCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
        self.maximumSize = maximumSize
    }

    /// Staging into `store` under the hold `hold`, which no holder's liveness guards: for a
    /// store that keeps nothing (a dry run's, see ``WriteSimulation``).
    init(store: any AssetContentStore, hold: String, maximumSize: Int64) {
        self.store = store
        self.hold = hold
        self.maximumSize = maximumSize
    }

    /// Whether any of `saves` has an asset (to store or to keep held until written).
    static func isNeeded(_ saves: [PreparedSave]) -> Bool {
        saves.contains { $0.holdsAsset }
    }

    /// Stores the content of every asset of `saves` that has a source, and holds every content
    /// they name. `progress` gets a save's index and the fraction of its content stored, from
    /// one thread at a time.
    ///
    /// - Throws: store failures (the whole request fails); a source's problem fails its save only.
    mutating func stage(_ saves: [PreparedSave], progress: (@Sendable (Int, Double) -> Void)? = nil) throws -> Outcome {
        var outcome = Outcome(saves: saves, failures: [:])
        let indexes = saves.indices.filter { saves[$0].holdsAsset }
        guard !indexes.isEmpty else { return outcome }
        // Stored content a save may not name here (a fetched asset of one's private record
        // saved into a public one) is stored again from the asset's file, as CloudKit uploads
        // a fetched asset put in another record.
        var hidden: Set<String> = []
        if !namesAnyContent {
            let named = indexes.reduce(into: Set<String>()) { $0.formUnion(FieldValue.assetContentIdentifiers(in: saves[$1].fields)) }
            if !named.isEmpty { hidden = named.subtracting(try store.visibleContent(named)) }
        }

        // Each save's sources are read and uploaded on their own; saves in parallel, because
        // hashing is what an asset import spends its time on.
        let results = StagingResults()
        let reporter = Mutex(())
        let store = self.store, hold = self.hold, maximumSize = self.maximumSize, hiddenContent = hidden
        let workers = min(indexes.count, max(1, ProcessInfo.processInfo.activeProcessorCount))
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 64)
            defer { buffer.deallocate() }
            for position in stride(from: worker, to: indexes.count, by: workers) {
                let index = indexes[position]
                let report: ((Double) -> Void)? = progress.map { progress in { fraction in reporter.withLock { _ in progress(index, fraction) } } }
                let result = Result { () throws(StratusError) in
                    try Self.upload(saves[index], store: store, hold: hold, maximumSize: maximumSize, hidden: hiddenContent, buffer: buffer, progress: report)
                }
                results.set(index, result)
            }
        }
        var uploads: [(upload: any AssetUpload, identifier: String)] = []
        var perSave: [Int: SaveUploads] = [:]
        var unavailable: [Int: Set<String>] = [:]
        var storeFull: StratusError?
        for (index, result) in results.all {
            switch result {
            case .success(let staged):
                perSave[index] = staged
                uploads += staged.uploads.map { ($0.upload, $0.identifier) }
                held.formUnion(staged.identifiers)
            case .failure(let error) where error.code == .quotaExceeded:
                // The store's disk is full (or at a size limit): no save of the request can be
                // written, which is the store's failure, not the record's.
                storeFull = storeFull ?? error
            case .failure(let error):
                outcome.failures[index] = error
            }
        }
        if let storeFull {
            for (upload, _) in uploads { upload.abandon() }
            throw storeFull
        }
        do {
            // Content a save names without uploading it (a fetched record saved again) must be
            // named by a record of this database or the public one (`hidden` otherwise: else any
            // digest would link another user's content; content this request uploads is its
            // own), and still be there now that it is held.
            let present = try store.hold(held, holder: hold).subtracting(hidden.subtracting(uploads.map(\.identifier)))
            for (index, staged) in perSave {
                let gone = staged.named.subtracting(present)
                guard let first = gone.first else { continue }
                let goneKeys = Set(staged.namedByKey.filter { !$0.value.isDisjoint(with: gone) }.keys)
                if goneKeys.isDisjoint(with: saves[index].changedKeys) {
                    // Fields the save does not change (a record read before another version
                    // replaced their content): whether they are written at all, and whether a
                    // stale change tag is the failure to report, the write decides.
                    unavailable[index] = goneKeys
                } else {
                    let id = saves[index].recordID
                    outcome.failures[index] = StratusError(.assetNotAvailable, "record '\(id.recordName)': the stored content \(first.prefix(12))… of an asset is not in the store for this database (no longer, or never named by a record here); save the asset from its file (Asset(fileURL:))", recordID: id)
                    perSave[index] = nil
                }
            }
            try store.commit(uploads)
        } catch {
            for (upload, _) in uploads { upload.abandon() }
            throw error
        }
        for (index, staged) in perSave where outcome.failures[index] == nil {
            outcome.saves[index] = saves[index].replacingAssetFields(staged.fields(store: store), unavailable: unavailable[index] ?? [])
        }
        return outcome
    }

    /// Drops the hold and removes the content among what it held and `candidates` that no
    /// record names. Errors are not the write's: what is left, the next collection removes.
    func release(engine: any StorageEngine, context: DatabaseContext, candidates: Set<String>) {
        guard !held.isEmpty || !candidates.isEmpty else { return }
        _ = try? AssetCollector.collect(store, releasing: hold, candidates: held.union(candidates))
    }

    // MARK: - One save

    /// Bytes read and hashed at a time.
    static let chunkSize = 1 << 20

    /// One save's assets: what was uploaded, and the content it names.
    struct SaveUploads {
        struct Uploaded {
            let upload: any AssetUpload
            let identifier: String
            let size: Int64
        }
        /// The new values of the save's asset fields, each asset as uploaded or as it was.
        var values: [String: [AssetSlot]] = [:]
        var uploads: [Uploaded] = []
        /// Content the save names that it did not upload (already stored), and by which fields.
        var named: Set<String> = []
        var namedByKey: [String: Set<String>] = [:]

        enum AssetSlot {
            case kept(Asset)
            case uploaded(Asset, index: Int)
        }

        var identifiers: Set<String> { named.union(uploads.map(\.identifier)) }

        func fields(store: any AssetContentStore) -> [String: FieldValue] {
            var fields: [String: FieldValue] = [:]
            for (key, slots) in values {
                let assets = slots.map { slot -> Asset in
                    switch slot {
                    case .kept(let asset): return asset
                    case .uploaded(let asset, let index):
                        let upload = uploads[index]
                        return asset.withContent(identifier: upload.identifier, size: upload.size, fileURL: store.contentURL(upload.identifier))
                    }
                }
                fields[key] = slots.count == 1 && !isList[key, default: false] ? .asset(assets[0]) : .assetList(assets)
            }
            return fields
        }

        var isList: [String: Bool] = [:]
    }

    private static func upload(_ save: PreparedSave, store: any AssetContentStore, hold: String, maximumSize: Int64, hidden: Set<String>,
                               buffer: UnsafeMutableRawBufferPointer, progress: ((Double) -> Void)?) throws(StratusError) -> SaveUploads {
        var staged = SaveUploads()
        var work: [(key: String, position: Int, asset: Asset, source: AssetSource)] = []
        do throws(StratusError) {
            for (key, value) in save.fields {
                let assets: [Asset]
                switch value {
                case .asset(let asset): assets = [asset]
                case .assetList(let list):
                    assets = list
                    staged.isList[key] = true
                default: continue
                }
                var slots: [SaveUploads.AssetSlot] = []
                for (position, asset) in assets.enumerated() {
                    if let identifier = asset.storedIdentifier, hidden.contains(identifier), let file = asset.fileURL {
                        // Its bytes, from the file the app was handed.
                        let again = Asset(fileURL: file)
                        slots.append(.kept(again))
                        work.append((key, position, again, try AssetSource.open(again, maximumSize: maximumSize, field: key, recordID: save.recordID)))
                        continue
                    }
                    if let identifier = asset.storedIdentifier {
                        staged.named.insert(identifier)
                        staged.namedByKey[key, default: []].insert(identifier)
                    }
                    slots.append(.kept(asset))
                    if asset.needsContent {
                        work.append((key, position, asset, try AssetSource.open(asset, maximumSize: maximumSize, field: key, recordID: save.recordID)))
                    }
                }
                staged.values[key] = slots
            }
            let total = max(1, work.reduce(0) { $0 + $1.source.size })
            var done: Int64 = 0
            for item in work {
                let size = try copy(item.source, into: store, hold: hold, buffer: buffer, recordID: save.recordID, field: item.key, staged: &staged) { read in
                    progress?(Double(done + read) / Double(total))
                }
                done += size
                staged.values[item.key]![item.position] = .uploaded(item.asset, index: staged.uploads.count - 1)
            }
            return staged
        } catch {
            for uploaded in staged.uploads { uploaded.upload.abandon() }
            throw error
        }
    }

    /// Streams one source into a new upload, hashing it; answers its identifier and size.
    private static func copy(_ source: AssetSource, into store: any AssetContentStore, hold: String, buffer: UnsafeMutableRawBufferPointer,
                             recordID: Record.ID, field: String, staged: inout SaveUploads, progress: (Int64) -> Void) throws(StratusError) -> Int64 {
        let upload: any AssetUpload
        do { upload = try store.beginUpload(holder: hold) } catch { throw StratusError.wrapping(error) }
        var hasher = SHA256Hasher()
        var size: Int64 = 0
        do throws(StratusError) {
            while true {
                let count: Int
                do { count = try source.file.read(into: buffer) } catch {
                    throw StratusError(.assetFileNotFound, "record '\(recordID.recordName)': asset field '\(field)': cannot read \(source.displayPath): \(error.reason)", recordID: recordID)
                }
                if count == 0 { break }
                let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                hasher.update(chunk)
                do { try upload.write(chunk) } catch { throw StratusError.wrapping(error) }
                size += Int64(count)
                if size > source.size {
                    throw StratusError(.assetFileModified, "record '\(recordID.recordName)': asset field '\(field)': \(source.displayPath) grew while it was read", recordID: recordID)
                }
                progress(size)
            }
            if size != source.size {
                throw StratusError(.assetFileModified, "record '\(recordID.recordName)': asset field '\(field)': \(source.displayPath) changed while it was read (\(size) of \(source.size) bytes)", recordID: recordID)
            }
            upload.finishWriting()
        } catch {
            upload.abandon()
            throw error
        }
        let identifier = hasher.finalize().hexadecimal
        if let expected = source.expectedDigest, expected != identifier, source.isStoredContent {
            // A store's content file that bit rot or an edit changed: a copy would keep the
            // damage under a new, self-consistent name, and the backup would look whole.
            upload.abandon()
            throw StratusError(.assetFileModified, "record '\(recordID.recordName)': asset field '\(field)': the source store's content \(expected.prefix(12))… holds bytes whose SHA-256 is \(identifier.prefix(12))… (\(size) bytes): its content file \(source.displayPath) is damaged (a PostgreSQL store's cache file on this machine is made again once removed; a store's own content is named by `stratus check`); the record is not copied", recordID: recordID)
        }
        if let expected = source.expectedDigest, expected != identifier {
            // A backup's content file that bit rot, a truncation or an edit changed: storing it
            // would replace the record's content (and any record's sharing it) with other bytes.
            upload.abandon()
            throw StratusError(.assetFileModified, "record '\(recordID.recordName)': asset field '\(field)': \(source.displayPath) is named like the SHA-256 of its content, as Stratus's exports and stores name content files, but holds content whose SHA-256 is \(identifier) (\(size) bytes): the file changed since it was written (put the exported file back), or its name is no digest (rename the file and its downloadURL to import it as it is)", recordID: recordID)
        }
        staged.uploads.append(.init(upload: upload, identifier: identifier, size: size))
        return size
    }
}

/// The per-save results of the staging threads. Each thread sets its own saves' slots under the
/// lock; the results are read after every thread finished.
private final class StagingResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Int: Result<AssetStaging.SaveUploads, StratusError>] = [:]

    func set(_ index: Int, _ result: Result<AssetStaging.SaveUploads, StratusError>) {
        lock.withLock { results[index] = result }
    }

    var all: [Int: Result<AssetStaging.SaveUploads, StratusError>] { lock.withLock { results } }
}

extension Asset {
    /// The most bytes one asset's content may have: 4 GiB. A larger source is refused with
    /// `limitExceeded` before a byte of it is stored.
    public static let maximumContentSize: Int64 = 4 << 30
}

extension FieldValue {
    /// Whether the value is an asset or a list of assets.
    var holdsAsset: Bool {
        switch self {
        case .asset, .assetList: true
        default: false
        }
    }
}

extension StratusError {
    /// `error` as a ``StratusError`` (an `internalError` naming it when it is not one).
    static func wrapping(_ error: any Error) -> StratusError {
        error as? StratusError ?? StratusError(.internalError, "\(error)")
    }
}
