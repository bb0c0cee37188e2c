import Foundation
import Stratus
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A sliding window over the input: bytes before `start` are consumed and dropped on the next
/// read, so memory is bounded by the largest item, never the input.
///
/// It also turns offsets into lines and columns for the formats whose items span lines: it
/// counts line breaks and characters up to `start` before dropping bytes.
final class InputBuffer {
    private(set) var storage: UnsafeMutablePointer<UInt8>
    private(set) var capacity: Int
    /// The first byte not consumed.
    var start = 0
    /// One past the last byte read.
    private(set) var end = 0
    /// The input offset of `storage[0]`.
    private(set) var baseOffset = 0
    private(set) var isEOF = false
    private let descriptor: Int32?
    /// Held so the descriptor stays open while the reader lives.
    private let handle: FileHandle?
    /// Bytes in memory, copied a chunk at a time like a file's, so a large `Data` is not
    /// duplicated whole.
    private let data: Data?
    private var dataOffset = 0
    let chunkSize: Int

    /// Line counting: the input offset counted up to, its line, and the characters before it on that line.
    private var countedTo = 0
    private var countedLine = 1
    private var countedColumn = 0
    /// Whether dropped bytes are counted; NDJSON knows its lines without it.
    var countsLines = true
    /// See ``RecordReadOptions/stopRequested``.
    var stopRequested: (@Sendable () -> Bool)?

    init(fileHandle: FileHandle, chunkSize: Int) {
        descriptor = fileHandle.fileDescriptor
        handle = fileHandle
        data = nil
        self.chunkSize = max(chunkSize, 1)
        capacity = max(self.chunkSize, 64) * 2
        storage = .allocate(capacity: capacity)
    }

    init(data: Data, chunkSize: Int) {
        descriptor = nil
        handle = nil
        self.data = data
        self.chunkSize = max(chunkSize, 1)
        capacity = max(self.chunkSize, 64) * 2
        storage = .allocate(capacity: capacity)
        isEOF = data.isEmpty
    }

    deinit { storage.deallocate() }

    var available: Int { end - start }

    /// Reads at least `minimum` more bytes (at least one) unless the input ends first. Answers
    /// false when nothing more could be read. Storage indices change: re-derive them from `start`.
    @discardableResult
    func fill(minimum: Int = 1) throws(StratusError) -> Bool {
        guard !isEOF else { return false }
        compact()
        let wanted = max(minimum, 1)
        if capacity - end < max(wanted, chunkSize) {
            let newCapacity = max(capacity * 2, end + max(wanted, chunkSize))
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
            grown.update(from: storage, count: end)
            storage.deallocate()
            storage = grown
            capacity = newCapacity
        }
        var added = 0
        if let data {
            let count = min(capacity - end, data.count - dataOffset)
            data.withUnsafeBytes { raw in
                (storage + end).update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + dataOffset, count: count)
            }
            dataOffset += count
            end += count
            isEOF = dataOffset == data.count
            return count > 0
        }
        guard let descriptor else { return false }
        while added < wanted {
            try waitUntilReadable(descriptor)
            let n = read(descriptor, storage + end, capacity - end)
            if n > 0 {
                end += n
                added += n
            } else if n == 0 {
                isEOF = true
                break
            } else if errno != EINTR {
                throw StratusError(.internalError, "cannot read the input: \(String(cString: strerror(errno)))")
            }
        }
        return added > 0
    }

    /// Returns when `descriptor` can be read, or throws `operationCancelled` once a stop is
    /// requested: a stop is seen between reads of an endless input and during a silent pipe's wait.
    private func waitUntilReadable(_ descriptor: Int32) throws(StratusError) {
        guard let stopRequested else { return }
        while true {
            if stopRequested() { throw StratusError(.operationCancelled, "reading the input was stopped") }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let n = poll(&ready, 1, 250)
            // Readable, at its end, or in error: the read says which.
            if n > 0 || (n < 0 && errno != EINTR) { return }
        }
    }

    /// How much to ask for when an item did not fit: any progress for small items, doubling for
    /// large ones, so that rescanning a growing item costs linear time in total.
    var refillMinimum: Int { available >= chunkSize ? available : 1 }

    /// Moves the unconsumed bytes to the front, counting lines in the dropped ones first.
    private func compact() {
        guard start > 0 else { return }
        if countsLines { count(upTo: baseOffset + start) }
        let remaining = end - start
        if remaining > 0 { storage.update(from: storage + start, count: remaining) }
        baseOffset += start
        end = remaining
        start = 0
    }

    // MARK: - Positions

    /// Commits line counting up to the input offset `offset`, which must still be buffered.
    func count(upTo offset: Int) {
        guard offset > countedTo else { return }
        let (line, column) = scan(from: countedTo, to: offset)
        countedLine = line
        countedColumn = column
        countedTo = offset
    }

    /// The 1-based line and column (in characters) of the input offset `offset`, which must be
    /// at or after the last committed offset and still buffered.
    func position(of offset: Int) -> (line: Int, column: Int) {
        let (line, column) = offset > countedTo ? scan(from: countedTo, to: offset) : (countedLine, countedColumn)
        return (line, column + 1)
    }

    private func scan(from: Int, to: Int) -> (Int, Int) {
        var line = countedLine, column = countedColumn
        var i = max(from - baseOffset, 0)
        let stop = min(to - baseOffset, end)
        // Line breaks through memchr; characters only after the last one.
        while i < stop, let hit = memchr(storage + i, 0x0A, stop - i) {
            line += 1
            column = 0
            i = UnsafeMutablePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - storage + 1
        }
        column += Self.characterCount(storage, from: i, to: stop)
        return (line, column)
    }

    /// How many characters (Unicode scalars: bytes that do not continue a UTF-8 sequence) the
    /// bytes `from..<to` of `base` hold, eight bytes at a time: what columns count.
    static func characterCount(_ base: UnsafePointer<UInt8>, from: Int, to: Int) -> Int {
        var count = 0
        var i = from
        while i + 8 <= to {
            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            // Continuation bytes are 10xxxxxx: bit 7 set, bit 6 clear.
            let continuation = word & 0x8080_8080_8080_8080 & ~((word & 0x4040_4040_4040_4040) << 1)
            count += 8 - continuation.nonzeroBitCount
            i += 8
        }
        while i < to {
            if base[i] & 0xC0 != 0x80 { count += 1 }
            i += 1
        }
        return count
    }
}
