import Foundation
import Stratus
import StratusTestSupport
import Testing

/// The file-backed job state a Swift program gets from the library (what `stratus` uses for
/// `--checkpoint` and `--token-file`): read back by a new object after the one that wrote it
/// is gone, read in the format today's `stratus` writes, refused with the file's name when
/// damaged, another job's or of a later format, and never lost to a failed write.
@Suite("Job files", .timeLimit(.minutes(30)))
struct JobFileTests {
    /// The reason of the ``JobFileError`` `body` throws, after checking that its message names `path`.
    func refusal(naming path: String, _ body: () throws -> Void) -> JobFileError.Reason? {
        do {
            try body()
            Issue.record("no error for \(path)")
            return nil
        } catch let error as JobFileError {
            #expect(error.path == path && error.message.contains(path), "\(error)")
            return error.reason
        } catch {
            Issue.record("not a JobFileError: \(error)")
            return nil
        }
    }

    func text(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    /// Whether the JSON object in the file at `path` has the members of `expected`, with the
    /// same values: Foundation's encoder orders members as it likes (today's files too).
    func sameJSON(_ path: String, as expected: String) throws -> Bool {
        let written = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? NSDictionary
        let wanted = try JSONSerialization.jsonObject(with: Data(expected.utf8)) as? NSDictionary
        return written != nil && written == wanted
    }

    /// A real change token, of a zone of a fresh SQLite store.
    func someToken() async throws -> ServerChangeToken {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Photos")
            try await database.save(RecordZone(zoneID: zone))
            try await database.save(makeRecord("Photo", "p1", zoneID: zone))
            var token: ServerChangeToken?
            _ = try await RecordZoneChangeFeed(database: database, zoneID: zone).run(tokens: MemoryTokens()) { token = $0.token }
            return try #require(token)
        }
    }

    // MARK: - Saved by one object, read by the next

    @Test("each file saved by one object is read back by a new one after the first is gone (a process killed and run again)")
    func readBackAfterTheWriterIsGone() async throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let importPath = folder.path("import.checkpoint")
        let saved = ImportCheckpoint(itemsSettled: 4_000, job: "import-1", pendingItems: [17, 18], itemsRejected: 3,
                                     unreportedRejections: [RecordRejection(line: 12, column: 1, recordName: "r12", message: "no parent")])
        do {
            let first = try ImportCheckpointFile(path: importPath, input: "records.ndjson", inputSize: 4_096)
            #expect(try first.load() == nil, "no file: a new import")
            try first.save(saved)
        }
        let second = try ImportCheckpointFile(path: importPath, input: "records.ndjson", inputSize: 4_096)
        #expect(try second.load() == saved)
        try second.remove()
        #expect(try second.load() == nil && !FileManager.default.fileExists(atPath: importPath))

        let pipelinePath = folder.path("reprice.checkpoint")
        let entry = PipelineCheckpointStoreEntry(job: "pipeline-7", position: .items(4_000), isRecordedInStore: true)
        do {
            let first = try PipelineCheckpointFile(path: pipelinePath, belongsTo: "reprice by 10%")
            try first.save(entry)
        }
        #expect(try PipelineCheckpointFile(path: pipelinePath, belongsTo: "reprice by 10%").load() == entry)
        // The job a file names, read without taking it as any job's.
        #expect(PipelineCheckpointFile.jobName(inFileAt: pipelinePath) == "reprice by 10%")
        #expect(PipelineCheckpointFile.jobName(inFileAt: folder.path("none.checkpoint")) == nil)
        let other = try folder.writeFile("import.json", Data(#"{"input":"records.ndjson","inputSize":4096,"committedItems":40}"#.utf8))
        #expect(PipelineCheckpointFile.jobName(inFileAt: other.path) == nil, "an import's checkpoint names no pipeline job")

        let copyPath = folder.path("copy.checkpoint")
        var progress = StoreCopier.Checkpoint(sourceIdentifier: "source-1", destinationIdentifier: "destination-1")
        progress.schemasCopied = true
        do { try CopyCheckpointFile(path: copyPath).save(progress) }
        #expect(try CopyCheckpointFile(path: copyPath).load() == progress)

        let tokenPath = folder.path("photos.token")
        let token = try await someToken()
        let commit = ChangeTokenFile.OutputCommit(fileIdentity: "2049:1311042", length: 52_817, path: "/var/exports/photos.ndjson", link: nil)
        do {
            let first = try ChangeTokenFile(path: tokenPath)
            #expect(try first.loadToken() == nil && first.outputCommit == nil, "no file: from the beginning")
            first.outputCommit = commit
            try first.saveToken(token)
        }
        let tokens = try ChangeTokenFile(path: tokenPath)
        #expect(try tokens.loadToken()?.serialized == token.serialized && tokens.outputCommit == commit)
        #expect(try text(tokenPath).hasPrefix(token.serialized + "\n"), "the first line is the token, for `head -1`")
    }

    @Test("a change feed run with a token file from one object, then from a new one, delivers every change once")
    func changeFeedGoesOnFromTheFile() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Feed")
            try await database.save(RecordZone(zoneID: zone))
            let tokenPath = fixture.store.path("feed.token")
            func run() async throws -> [String] {
                let tokens = try ChangeTokenFile(path: tokenPath)
                var names: [String] = []
                _ = try await RecordZoneChangeFeed(database: database, zoneID: zone, batchSize: 2).run(tokens: tokens) { batch in
                    for case .changed(let record) in batch.changes { names.append(record.recordID.recordName) }
                }
                return names
            }
            for name in ["a", "b", "c"] { try await database.save(makeRecord("Item", name, zoneID: zone)) }
            #expect(try await run() == ["a", "b", "c"])
            try await database.save(makeRecord("Item", "d", zoneID: zone))
            #expect(try await run() == ["d"], "the second run goes on after the token the first saved")
            #expect(try await run() == [])
        }
    }

    @Test("a file is locked while its object lives: a second object for it (another run) is refused until the first is gone, also through a link")
    func lockedWhileItsObjectLives() throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let path = folder.path("job.checkpoint")
        try FileManager.default.createSymbolicLink(atPath: folder.path("latest.checkpoint"), withDestinationPath: path)
        var first: CopyCheckpointFile? = try CopyCheckpointFile(path: path)
        for name in [path, folder.path("latest.checkpoint")] {
            let reason = refusal(naming: name) { _ = try CopyCheckpointFile(path: name) }
            guard case .inUse? = reason else { Issue.record("\(name): \(String(describing: reason))"); continue }
        }
        #expect(first != nil)
        first = nil
        _ = try CopyCheckpointFile(path: path)
        #expect(refusal(naming: folder.directory.path) { _ = try ImportCheckpointFile(path: folder.directory.path, input: "x") } == .notARegularFile)
    }

    // MARK: - Today's format

    @Test("files in the format today's stratus writes are read, and written again in it (the copy checkpoint and the token file byte for byte)")
    func todaysFormat() async throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let importText = #"{"input":"/data/records.ndjson","inputSize":104857600,"committedItems":42000,"job":"import-5f1c","pendingItems":[17,18],"rejectedItems":3}"#
        let importURL = try folder.writeFile("import.checkpoint", Data(importText.utf8))
        let imports = try ImportCheckpointFile(path: importURL.path, input: "/data/records.ndjson", inputSize: 104_857_600)
        let checkpoint = try #require(try imports.load())
        #expect(checkpoint == ImportCheckpoint(itemsSettled: 42_000, job: "import-5f1c", pendingItems: [17, 18], itemsRejected: 3))
        try imports.save(checkpoint)
        #expect(try sameJSON(importURL.path, as: importText))
        // Written before the job's name and the rejects were kept.
        let older = try folder.writeFile("older.checkpoint", Data(#"{"input":"in.csv","committedItems":800}"#.utf8))
        #expect(try ImportCheckpointFile(path: older.path, input: "in.csv").load() == ImportCheckpoint(itemsSettled: 800))

        let pipelineText = #"{"command":"update Todo where checked == 0 set checked:INT64=1","job":"pipeline-9a7e","position":"sti1_4000","recordedInStore":true}"#
        let pipelineURL = try folder.writeFile("update.checkpoint", Data(pipelineText.utf8))
        let pipeline = try PipelineCheckpointFile(path: pipelineURL.path, belongsTo: "update Todo where checked == 0 set checked:INT64=1")
        let entry = try #require(try pipeline.load())
        #expect(entry == PipelineCheckpointStoreEntry(job: "pipeline-9a7e", position: .items(4_000), isRecordedInStore: true))
        try pipeline.save(entry)
        #expect(try sameJSON(pipelineURL.path, as: pipelineText))
        let olderPipeline = try folder.writeFile("older-update.checkpoint", Data(#"{"command":"delete Session","job":"pipeline-1"}"#.utf8))
        #expect(try PipelineCheckpointFile(path: olderPipeline.path, belongsTo: "delete Session").load() == PipelineCheckpointStoreEntry(job: "pipeline-1", position: nil))

        let copyText = #"{"destinationIdentifier":"destination-1","schemasCopied":true,"sourceIdentifier":"source-1","zonesCopied":[],"zonesNotCopied":[]}"#
        let copyURL = try folder.writeFile("copy.checkpoint", Data(copyText.utf8))
        let copy = try CopyCheckpointFile(path: copyURL.path)
        let progress = try #require(try copy.load())
        #expect(progress.sourceIdentifier == "source-1" && progress.destinationIdentifier == "destination-1" && progress.schemasCopied)
        try copy.save(progress)
        #expect(try text(copyURL.path) == copyText)

        let token = try await someToken()
        let tokenText = "\(token.serialized)\noutput-file=2049:1311042\noutput-length=52817\noutput-path=/var/exports/photos-2026-11-21.ndjson\noutput-link=/var/lib/jobs/photos.token.output-9f2c41d07ab3e8c5\n"
        let tokenURL = try folder.writeFile("photos.token", Data(tokenText.utf8))
        let tokens = try ChangeTokenFile(path: tokenURL.path)
        #expect(try tokens.loadToken()?.serialized == token.serialized)
        #expect(tokens.outputCommit == ChangeTokenFile.OutputCommit(fileIdentity: "2049:1311042", length: 52_817, path: "/var/exports/photos-2026-11-21.ndjson",
                                                                    link: "/var/lib/jobs/photos.token.output-9f2c41d07ab3e8c5"))
        try tokens.save()
        #expect(try text(tokenURL.path) == tokenText)
        let emptyURL = try folder.writeFile("empty.token", Data("\n".utf8))
        #expect(try ChangeTokenFile(path: emptyURL.path).loadToken() == nil, "an empty first line: from the beginning")
    }

    @Test("a checkpoint whose long list comes before the member that names its kind (as earlier versions wrote them in any order) is read, and is written again with that member first")
    func longListsBeforeTheirKind() throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        // 60,000 records waiting for a parent: a list of hundreds of kilobytes.
        let pending = Array(stride(from: 1, through: 120_000, by: 2))
        let listed = pending.map(String.init).joined(separator: ",")
        let importText = #"{"inputSize":1048576,"pendingItems":[\#(listed)],"committedItems":70000,"job":"import-77","input":"children.ndjson"}"#
        #expect(importText.utf8.count > 64 << 10)
        let importURL = try folder.writeFile("import.checkpoint", Data(importText.utf8))
        let imports = try ImportCheckpointFile(path: importURL.path, input: "children.ndjson", inputSize: 1_048_576)
        let checkpoint = try #require(try imports.load())
        #expect(checkpoint.itemsSettled == 70_000 && checkpoint.pendingItems == pending)
        try imports.save(checkpoint)
        let written = try text(importURL.path)
        let input = try #require(written.range(of: #""input":"#)), list = try #require(written.range(of: #""pendingItems":"#))
        #expect(input.lowerBound < list.lowerBound, "the member naming the kind is written before the list")
        #expect(try imports.load() == checkpoint)

        // A long member first (a later version's, unknown here, is skipped as any unknown one).
        let filler = String(repeating: "x", count: 200_000)
        let pipelineText = #"{"later":"\#(filler)","position":"sti1_4000","job":"pipeline-3","command":"update R where n > 1 set s:STRING=x"}"#
        let pipelineURL = try folder.writeFile("update.checkpoint", Data(pipelineText.utf8))
        let pipeline = try PipelineCheckpointFile(path: pipelineURL.path, belongsTo: "update R where n > 1 set s:STRING=x")
        #expect(try pipeline.load() == PipelineCheckpointStoreEntry(job: "pipeline-3", position: .items(4_000)))
    }

    // MARK: - Refusals

    @Test("a damaged file, another job's, another kind of file and one of a later format are refused naming the file, and left as they are")
    func refusals() throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        func file(_ name: String, _ text: String) throws -> String { try folder.writeFile(name, Data(text.utf8)).path }

        let damaged = try file("damaged.checkpoint", #"{"input":"in.csv","committedItems":"many"}"#)
        #expect(refusal(naming: damaged) { _ = try ImportCheckpointFile(path: damaged, input: "in.csv").load() }
                == .damaged("member 'committedItems' holds a value of another type"))
        for (name, counts) in [("negative", #""committedItems":-5"#), ("pending", #""committedItems":5,"pendingItems":[-7]"#), ("rejected", #""committedItems":5,"rejectedItems":-1"#)] {
            let edited = try file("\(name).checkpoint", #"{"input":"in.csv",\#(counts)}"#)
            guard case .damaged? = refusal(naming: edited, { _ = try ImportCheckpointFile(path: edited, input: "in.csv").load() }) else {
                Issue.record("\(name): counts no run writes are damage")
                continue
            }
        }
        let badPosition = try file("position.checkpoint", #"{"command":"nightly","job":"pipeline-1","position":"sti1_many"}"#)
        guard case .damaged? = refusal(naming: badPosition, { _ = try PipelineCheckpointFile(path: badPosition, belongsTo: "nightly").load() }) else {
            Issue.record("a position that does not read is damage")
            return
        }

        let otherInput = try file("other.checkpoint", #"{"input":"other.csv","inputSize":10,"committedItems":5}"#)
        #expect(refusal(naming: otherInput) { _ = try ImportCheckpointFile(path: otherInput, input: "in.csv", inputSize: 10).load() }
                == .belongsToAnotherJob("the import of other.csv (10 bytes)"))
        let otherDestination = try file("elsewhere.checkpoint", #"{"input":"in.csv","inputSize":10,"committedItems":5,"destination":"zone A"}"#)
        #expect(refusal(naming: otherDestination) { _ = try ImportCheckpointFile(path: otherDestination, input: "in.csv", inputSize: 10, destination: "zone B").load() }
                == .belongsToAnotherJob("the import into zone A (this one imports into zone B)"))
        let noDestination = try file("older.checkpoint", #"{"input":"in.csv","inputSize":10,"committedItems":5}"#)
        #expect(try ImportCheckpointFile(path: noDestination, input: "in.csv", inputSize: 10, destination: "zone B").load()?.itemsSettled == 5,
                "a checkpoint of an earlier version names no destination, and is taken")
        let otherJob = try file("nightly.checkpoint", #"{"command":"nightly","job":"pipeline-1"}"#)
        #expect(refusal(naming: otherJob) { _ = try PipelineCheckpointFile(path: otherJob, belongsTo: "weekly").load() } == .belongsToAnotherJob("nightly"))

        #expect(refusal(naming: otherJob) { _ = try ImportCheckpointFile(path: otherJob, input: "in.csv").load() }
                == .holdsAnotherKind(.pipelineCheckpoint(belongsTo: "nightly")))
        #expect(refusal(naming: otherInput) { _ = try CopyCheckpointFile(path: otherInput).load() } == .holdsAnotherKind(.importCheckpoint))
        let records = try file("records.ndjson", #"{"recordName":"a","recordType":"Item"}"# + "\n")
        #expect(refusal(naming: records) { _ = try ImportCheckpointFile(path: records, input: "in.csv").load() } == .holdsAnotherKind(nil))
        #expect(refusal(naming: records) { _ = try ChangeTokenFile(path: records) } == .holdsAnotherKind(nil))
        #expect(refusal(naming: otherInput) { _ = try ChangeTokenFile(path: otherInput) } == .holdsAnotherKind(.importCheckpoint))
        let badToken = try file("bad.token", "stk1_not-a-token\n")
        guard case .damaged? = refusal(naming: badToken, { _ = try ChangeTokenFile(path: badToken) }) else {
            Issue.record("a first line that looks like a token and does not read is damage")
            return
        }
        let unknownLine = try file("unknown.token", "\noutput-colour=blue\n")
        #expect(refusal(naming: unknownLine) { _ = try ChangeTokenFile(path: unknownLine) } == .damaged("an unknown line 'output-colour=blue'"))

        let later = try file("later.checkpoint", #"{"format":2,"input":"in.csv","committedItems":5,"ranges":[[0,5]]}"#)
        #expect(refusal(naming: later) { _ = try ImportCheckpointFile(path: later, input: "in.csv").load() } == .newerFormat(2))
        let laterCopy = try file("later-copy.checkpoint", #"{"destinationIdentifier":"d","format":3,"sourceIdentifier":"s"}"#)
        #expect(refusal(naming: laterCopy) { _ = try CopyCheckpointFile(path: laterCopy).load() } == .newerFormat(3))
        let laterToken = try file("later.token", "\nformat=2\n")
        #expect(refusal(naming: laterToken) { _ = try ChangeTokenFile(path: laterToken) } == .newerFormat(2))

        let huge = folder.path("huge.checkpoint")
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: huge))
        try handle.truncate(atOffset: UInt64(PipelineCheckpointFile.maximumSize) + 1)
        try handle.close()
        #expect(refusal(naming: huge) { _ = try PipelineCheckpointFile(path: huge, belongsTo: "nightly").load() } == .tooLarge(limit: PipelineCheckpointFile.maximumSize))

        for (path, text) in [(damaged, #"{"input":"in.csv","committedItems":"many"}"#), (otherJob, #"{"command":"nightly","job":"pipeline-1"}"#),
                             (records, #"{"recordName":"a","recordType":"Item"}"# + "\n"), (later, #"{"format":2,"input":"in.csv","committedItems":5,"ranges":[[0,5]]}"#)] {
            #expect(try self.text(path) == text, "\(path) is left as it was")
        }
    }

    // MARK: - Failed writes

    @Test("a save that cannot write (its temporary file cannot be made) throws, naming the file, and the old checkpoint stays for the next run")
    func failedSaveKeepsTheOldCheckpoint() throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let path = folder.path("import.checkpoint")
        let old = ImportCheckpoint(itemsSettled: 400, job: "import-1")
        do {
            let checkpoint = try ImportCheckpointFile(path: path, input: "in.csv")
            try checkpoint.save(old)
            // A folder where the save makes its temporary file (`NAME.tmp-PID`, beside it):
            // nothing, root included, can open it for writing.
            try FileManager.default.createDirectory(atPath: path + ".tmp-\(getpid())", withIntermediateDirectories: false)
            let reason = refusal(naming: path) { try checkpoint.save(ImportCheckpoint(itemsSettled: 800, job: "import-1")) }
            guard case .cannotWrite? = reason else { Issue.record("\(String(describing: reason))"); return }
            #expect(try checkpoint.load() == old)
        }
        #expect(try ImportCheckpointFile(path: path, input: "in.csv").load() == old, "a new run finds the old checkpoint")
    }

    @Test("a save into a folder the user may no longer write throws and keeps the old token", .enabled(if: geteuid() != 0, "root writes any folder"))
    func saveIntoReadOnlyFolderKeepsTheOldToken() async throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let jobs = folder.url("jobs")
        try FileManager.default.createDirectory(at: jobs, withIntermediateDirectories: false)
        let path = jobs.appendingPathComponent("photos.token").path
        let token = try await someToken()
        let tokens = try ChangeTokenFile(path: path)
        try tokens.saveToken(token)
        let before = try text(path)
        try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: jobs.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: jobs.path) }
        tokens.outputCommit = ChangeTokenFile.OutputCommit(fileIdentity: "1:2", length: 3, path: "/var/exports/out.ndjson")
        let reason = refusal(naming: path) { try tokens.saveToken(token) }
        guard case .cannotWrite? = reason else { Issue.record("\(String(describing: reason))"); return }
        #expect(try text(path) == before)
    }

    @Test("a file whose folder is a file cannot be locked: the error names it, and nothing is made")
    func folderIsAFile() throws {
        let folder = try TemporaryStore(prefix: "stratus-jobfiles")
        let notAFolder = try folder.writeFile("plain", Data("x".utf8)).path
        let path = notAFolder + "/import.checkpoint"
        guard case .cannotWrite? = refusal(naming: path, { _ = try ImportCheckpointFile(path: path, input: "in.csv") }) else {
            Issue.record("no cannotWrite for \(path)")
            return
        }
        #expect(try text(notAFolder) == "x")
    }
}
