import Foundation
import Synchronization

/// Attaches downloaded content to the CloudKit assets a database keeps without it (records
/// imported from CloudKit keep each asset's `downloadURL` and metadata, not its content): the
/// job behind `stratus assets attach DIR`.
///
/// A file in the folder is an asset's content when it is named
/// - by the asset's `fileChecksum` in base64url (`+` as `-`, `/` as `_`): `DIR/<checksum>`, or
/// - by the record and field: `DIR/<record name>/<field>` (a list's assets `<field>.<index>`,
///   from 0), the record name with every byte but letters, digits, `.`, `_` and `-` (and a
///   leading `.`) written as `%XX`, so that `Note/NOTE-1` is `Note%2FNOTE-1`.
///
/// Files are read as `stratus import --assets-dir` reads them (regular files inside the folder,
/// no symbolic links unless asked). A file whose size differs from the asset's CloudKit `size`
/// is not attached. Attaching keeps the record's change tag and modification date (the record
/// as CloudKit described it does not change), and its asset metadata: an export gives the
/// record back as it came, now with content.
///
/// ```swift
/// let attacher = AssetAttacher(database: container.privateCloudDatabase, folder: URL(fileURLWithPath: "downloads"))
/// let summary = try await attacher.run()
/// print(summary.attached, summary.notFound)
/// ```
public final class AssetAttacher: Sendable {
    /// What an attach run did.
    ///
    /// ```swift
    /// let summary = try await attacher.run()
    /// if summary.notFound > 0 { print("\(summary.notFound) assets still have no file") }
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Assets that got their content: those of records saved with it (a record whose save
        /// failed counts in ``failures``, none of its assets here).
        public var attached = 0
        /// Assets without content for which the folder has no file.
        public var notFound = 0
        /// Assets whose file has another size than CloudKit's `size` (not attached).
        public var sizeDiffers = 0
        /// Records whose save failed, with why (their assets stay without content).
        public var failures: [String] = []

        public init() {}
    }

    /// The database whose assets get their content.
    public let database: Database
    /// The folder the content files are read from (named by checksum or by record and field,
    /// as above); nothing outside it is read.
    public let folder: URL
    /// Whether symbolic links inside ``folder`` are followed (never out of it).
    public let followsSymlinks: Bool
    /// The zones to look in; every zone of the database when nil.
    public let zoneIDs: [RecordZone.ID]?

    /// An attacher of files in `folder` to `database`'s assets.
    public init(database: Database, folder: URL, followsSymlinks: Bool = false, zoneIDs: [RecordZone.ID]? = nil) {
        self.database = database
        self.folder = folder
        self.followsSymlinks = followsSymlinks
        self.zoneIDs = zoneIDs
    }

    /// Looks at every record of the zones and attaches what the folder holds.
    ///
    /// - Throws: store errors; a record that cannot be saved is counted in ``Summary/failures``.
    public func run() async throws -> Summary {
        var summary = Summary()
        let context = database.context
        let inventory = try await database.engineCall { engine, _ in try engine.inventory() }
        let entry = inventory.databases.first {
            $0.containerIdentifier == context.containerIdentifier && $0.scope == context.scope && $0.owner == context.storageOwner
        }
        for zone in entry?.zones ?? [] {
            let zoneID = zone.zone.zoneID
            if let zoneIDs, !zoneIDs.contains(where: { $0.zoneName == zoneID.zoneName }) { continue }
            for recordType in zone.recordCounts.keys.sorted() {
                var pending: [(record: Record, assets: Int)] = []
                for try await record in database.allRecords(matching: Query(recordType: recordType), inZoneWith: zoneID) {
                    if let updated = attach(record, &summary) { pending.append(updated) }
                    if pending.count >= 100 {
                        try await save(pending, &summary)
                        pending.removeAll()
                    }
                }
                if !pending.isEmpty { try await save(pending, &summary) }
            }
        }
        return summary
    }

    /// The record with content for its assets that lack it and how many got it, or nil when
    /// none was found.
    private func attach(_ record: Record, _ summary: inout Summary) -> (record: Record, assets: Int)? {
        var found = 0
        let copy = record.copy() as! Record
        for (key, value) in record.fieldValues {
            switch value {
            case .asset(let asset) where asset.storedIdentifier == nil:
                if let file = content(for: asset, record: record, field: key, index: nil, &summary) {
                    copy.setFieldValue(.asset(file), forKey: key, encrypted: record.encryptedKeys.contains(key))
                    found += 1
                }
            case .assetList(let assets) where assets.contains(where: { $0.storedIdentifier == nil }):
                var updated = assets
                for (index, asset) in assets.enumerated() where asset.storedIdentifier == nil {
                    if let file = content(for: asset, record: record, field: key, index: index, &summary) {
                        updated[index] = file
                        found += 1
                    }
                }
                if updated != assets { copy.setFieldValue(.assetList(updated), forKey: key, encrypted: record.encryptedKeys.contains(key)) }
            default:
                continue
            }
        }
        return found > 0 ? (copy, found) : nil
    }

    /// The asset with its content's file from the folder, when there is one of the right size.
    private func content(for asset: Asset, record: Record, field: String, index: Int?, _ summary: inout Summary) -> Asset? {
        var candidates: [String] = []
        if let checksum = asset.fileChecksum, let name = Self.checksumFileName(checksum) { candidates.append(name) }
        candidates.append(Self.recordFileName(record.recordID.recordName) + "/" + (index.map { "\(field).\($0)" } ?? field))
        for path in candidates {
            var info = stat()
            guard lstat(folder.appendingPathComponent(path).path, &info) == 0 else { continue }
            if let size = asset.size, Int64(info.st_size) != size, info.st_mode & S_IFMT == S_IFREG {
                summary.sizeDiffers += 1
                return nil
            }
            return Asset(path: path, in: folder, followsSymlinks: followsSymlinks).withMetadata(of: asset, size: asset.size)
        }
        summary.notFound += 1
        return nil
    }

    /// Saves records with their assets' content; counts the assets of those saved as attached,
    /// and the records that failed as failures.
    private func save(_ records: [(record: Record, assets: Int)], _ summary: inout Summary) async throws {
        let op = ModifyRecordsOperation(recordsToSave: records.map(\.record))
        op.stopsOnStoreFailure = true
        // The record CloudKit described does not change: same tag, same modification.
        op.writeMode = .forceUpdate
        op.preservesSystemFields = true
        op.keepsGivenVersion = true
        op.isAtomic = false
        let failures = Mutex<[Record.ID: String]>([:])
        op.perRecordSaveBlock = { id, result in
            if case .failure(let error) = result { failures.withLock { $0[id] = "\(id.recordName): \(error)" } }
        }
        try await database.run { finish in
            op.modifyRecordsResultBlock = { result in
                if case .failure(let error as StratusError) = result, error.code != .partialFailure { finish(.failure(error)) } else { finish(.success(())) }
            }
            return op
        }
        let failed = failures.withLock { $0 }
        for (record, assets) in records {
            if let failure = failed[record.recordID] { summary.failures.append(failure) } else { summary.attached += assets }
        }
    }

    /// The file name of a CloudKit asset's content in an asset folder: its `fileChecksum` in
    /// base64url; nil when the checksum is not base64 as CloudKit writes it (letters, digits,
    /// `+`, `/` or their base64url `-`, `_`, then at most two `=`), so that a name an input
    /// gives can never be another file's (`app.sqlite`, `feed.ndjson`, `.ssh`): such an asset's
    /// content is named by its SHA-256.
    ///
    /// ```swift
    /// AssetAttacher.checksumFileName("AbC+/x==")   // "AbC-_x=="
    /// AssetAttacher.checksumFileName("app.sqlite") // nil
    /// ```
    public static func checksumFileName(_ checksum: String) -> String? {
        let bytes = Array(checksum.utf8)
        let padding = bytes.reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count
        guard padding <= 2, bytes.count > padding, bytes.count <= 255 else { return nil }
        var name = ""
        name.reserveCapacity(bytes.count)
        for byte in bytes.dropLast(padding) {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"):
                name.unicodeScalars.append(UnicodeScalar(byte))
            case UInt8(ascii: "+"): name += "-"
            case UInt8(ascii: "/"): name += "_"
            default: return nil
            }
        }
        return name + String(repeating: "=", count: padding)
    }

    /// A record name as a folder name: bytes other than letters, digits, `.`, `_` and `-` (and
    /// a leading `.`) as `%XX`.
    public static func recordFileName(_ recordName: String) -> String {
        var text = ""
        for (offset, byte) in recordName.utf8.enumerated() {
            let plain = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || (byte == UInt8(ascii: ".") && offset > 0)
            text += plain ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
        }
        return text
    }
}
