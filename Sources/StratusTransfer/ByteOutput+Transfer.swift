import Foundation
import Stratus

// The transfer codecs' own pieces of ``Stratus/ByteOutput``: CloudKit timestamps and CSV cells.
extension ByteOutput {
    /// Appends milliseconds since 1970, exactly (see ``TimestampText``).
    mutating func appendTimestamp(_ date: Date, field: @autoclosure () -> String) {
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds.isFinite else {
            if problem == nil { problem = "field '\(field())' holds a non-finite date" }
            append("null")
            return
        }
        if let milliseconds = TimestampText.wholeMilliseconds(seconds) {
            appendInt(milliseconds)
        } else if seconds.bitPattern == lastFraction.seconds {
            lastFraction.text.withUnsafeBufferPointer { append($0) }
        } else {
            let start = count
            TimestampText.append(seconds, to: &self)
            lastFraction.seconds = seconds.bitPattern
            lastFraction.text.removeAll(keepingCapacity: true)
            let written = UnsafeBufferPointer(rebasing: bytes[start...])
            lastFraction.text.append(contentsOf: written)
        }
    }

    /// Appends `cell` as a CSV cell, quoted (with quotes doubled) when it holds a comma, a
    /// quote or a line break, or is empty and `quoteEmpty` asks for `""`.
    mutating func appendCSVCell(_ cell: UnsafeBufferPointer<UInt8>, quoteEmpty: Bool = false) {
        var needsQuotes = cell.isEmpty && quoteEmpty
        for b in cell where b == UInt8(ascii: ",") || b == UInt8(ascii: "\"") || b == 0x0A || b == 0x0D {
            needsQuotes = true
            break
        }
        guard needsQuotes else {
            append(cell)
            return
        }
        append(UInt8(ascii: "\""))
        for b in cell {
            append(b)
            if b == UInt8(ascii: "\"") { append(b) }
        }
        append(UInt8(ascii: "\""))
    }

    mutating func appendCSVCell(_ text: String, quoteEmpty: Bool = false) {
        if text.utf8.withContiguousStorageIfAvailable({ appendCSVCell($0, quoteEmpty: quoteEmpty) }) != nil { return }
        var text = text
        text.withUTF8 { appendCSVCell($0, quoteEmpty: quoteEmpty) }
    }
}
