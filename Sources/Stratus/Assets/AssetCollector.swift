import Foundation

/// Removes asset content that no record names: after writes (the content of replaced values,
/// deleted records and failed saves), and as a whole sweep (`stratus assets gc`,
/// ``Database/collectUnreferencedAssets()``), which also removes what processes that ended
/// left (holds, unfinished uploads, the folders of files they handed out, see
/// ``AssetHandouts``). Safe beside any number of writers: the engine checks what
/// rows name and what live holders hold in the same transaction that removes content (see
/// ``AssetContentStore``), and a holder is alive while its process holds its lock
/// (``AssetHolder``).
///
/// ```swift
/// let removed = try AssetCollector.collect(engine.assetContents(for: context), releasing: nil, candidates: nil)
/// ```
enum AssetCollector {
    /// Releases `releasing`'s holds and removes unreferenced content among `candidates`
    /// (everything when `nil`).
    ///
    /// - Throws: store or file errors.
    static func collect(_ store: any AssetContentStore, releasing hold: String?, candidates: Set<String>?) throws -> AssetCollection {
        let directory = store.localDirectory
        var handouts = 0
        if candidates == nil {
            AssetHolder.removeDeadLocks(in: directory)
            handouts = AssetHandouts.removeEnded(in: directory)
        }
        var collection = try store.collect(releasing: hold, candidates: candidates) { holder in
            // A hold's name is its process holder's, a ':' and the request's number.
            let process = holder.split(separator: ":", maxSplits: 1).first.map(String.init) ?? holder
            return AssetHolder.isAlive(process, in: directory)
        }
        collection.removedHandoutFolders += handouts
        return collection
    }
}
