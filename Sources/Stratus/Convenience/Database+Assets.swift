import Foundation

extension Database {
    /// The current user's record name (as the user directory gives it), as records name their
    /// creator and as an export writes the owner of the user's zones; `nil` for a caller who
    /// is not signed in.
    ///
    /// ```swift
    /// print(try await database.currentUserRecordName() ?? "not signed in")
    /// ```
    ///
    /// - Throws: store errors reading the user directory.
    public func currentUserRecordName() async throws -> String? {
        let database = self
        return try await engineCall { _, _ in try database.resolvedContext().userRecordName }
    }

    /// A Stratus extension: the folder of this machine where the store keeps asset content,
    /// each under its SHA-256 (an SQLite store's `<store>.sqlite.assets/sha256`, PostgreSQL's
    /// local copies), which the asset URLs of a plain export (one without an assets folder)
    /// name. Give it as `RecordReadOptions.storeContentDirectory` to import such an export
    /// back into the store it came from.
    ///
    /// ```swift
    /// options.storeContentDirectory = database.assetContentDirectory
    /// ```
    public var assetContentDirectory: URL {
        engine.assetContents(for: context).localDirectory.appendingPathComponent("sha256", isDirectory: true)
    }

    /// A readable file with an asset's content: the store's own read-only file, which every
    /// record with those bytes shares. Read it only: moving, deleting or writing it (a process
    /// running as root can) changes the store. For a file of the app's own, read the fetched
    /// asset's ``Asset/fileURL``.
    ///
    /// ```swift
    /// let url = try await database.assetContentURL(for: record["photo"] as! Asset)
    /// ```
    ///
    /// - Throws: ``StratusError`` `assetNotAvailable` for an asset whose content the store
    ///   does not hold (a CloudKit asset not attached yet, see ``AssetAttacher``);
    ///   `assetFileModified` when the store's file is not the asset's size (a damaged assets
    ///   folder); store errors.
    public func assetContentURL(for asset: Asset) async throws -> URL {
        guard let identifier = asset.storedIdentifier else {
            let origin = asset.downloadURL != nil ? "a CloudKit asset whose content was not attached (stratus assets attach)" : "an asset that was not saved"
            throw StratusError(.assetNotAvailable, "the asset's content is not in the store: it is \(origin)")
        }
        return try await engineCall { engine, context in
            let store = engine.assetContents(for: context)
            let visible = try context.isAdministrator || !store.visibleContent([identifier]).isEmpty
            guard visible, let url = try store.contentFile(identifier) else {
                throw StratusError(.assetNotAvailable, "the asset's content \(identifier.prefix(12))… is no longer in the store")
            }
            if let fileSize = asset.damagedContentSize(in: url) {
                throw StratusError(.assetFileModified, asset.damagedContentMessage(fileSize: fileSize, file: url))
            }
            return url
        }
    }

    /// Removes asset content that no record names, and what writers that died left (holds,
    /// unfinished copies): `stratus assets gc`. Safe while other processes write. Writes
    /// collect what they stop naming on their own; this sweep is for the rest.
    ///
    /// ```swift
    /// let collected = try await database.collectUnreferencedAssets()
    /// print(collected.removedContents, collected.removedBytes)
    /// ```
    ///
    /// - Throws: store or file errors.
    public func collectUnreferencedAssets() async throws -> AssetCollection {
        try await engineCall { engine, context in
            try AssetCollector.collect(engine.assetContents(for: context), releasing: nil, candidates: nil)
        }
    }

    /// How many asset contents the store holds for this database's owner, and their bytes.
    ///
    /// ```swift
    /// let (count, bytes) = try await database.assetContentInventory()
    /// ```
    ///
    /// - Throws: store or file errors.
    public func assetContentInventory() async throws -> (count: Int, bytes: Int64) {
        try await engineCall { engine, context in
            let inventory = try engine.assetContents(for: context).inventory()
            return (inventory.identifiers.count, inventory.bytes)
        }
    }
}
