extension ChangeTokenFile {
    /// The output file a change feed's batches were appended to, and how much of it the saved
    /// token covers: kept in the token file with the token, so that a run after a kill can cut
    /// away what was appended after the last saved token (`stratus changes --output` does).
    ///
    /// ```swift
    /// tokens.outputCommit = ChangeTokenFile.OutputCommit(fileIdentity: "2049:1311042", length: 52_817, path: "/var/exports/photos.ndjson")
    /// try tokens.saveToken(batch.token)
    /// ```
    public struct OutputCommit: Sendable, Hashable {
        /// The file itself, as "device:inode", so that a file renamed away or replaced is noticed.
        public var fileIdentity: String
        /// How many bytes of the file are covered by the saved token.
        public var length: Int64
        /// The file's name.
        public var path: String
        /// A hard link kept to the file, which keeps its inode in use (so that a new file under
        /// its name cannot be taken for it); nil in token files of older versions.
        public var link: String?

        /// The first `length` bytes of the file `path` (identity `fileIdentity`), held by `link`.
        public init(fileIdentity: String, length: Int64, path: String, link: String? = nil) {
            self.fileIdentity = fileIdentity
            self.length = length
            self.path = path
            self.link = link
        }
    }
}
