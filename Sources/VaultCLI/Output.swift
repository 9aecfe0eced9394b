internal import FoundationEssentials
internal import VaultCore
internal import VaultCrypto

/// What a command writes: data on stdout, messages on stderr, every line
/// through `Console` (which escapes text from outside), and with `--json`
/// exactly one JSON document on stdout.
struct Output: Sendable {
    /// Whether the command was asked for `--json`.
    let json: Bool
    let console = Console()

    /// A line of data on stdout.
    func out(_ line: String) { console.out(line) }
    /// A message on stderr: `vault: ...`.
    func info(_ line: String) { console.info(line) }
    /// `vault: warning: ...` on stderr.
    func warn(_ line: String) { console.warn(line) }
    /// `vault: error: ...` on stderr, with its hints.
    func error(_ line: String, hint: String? = nil, more: [String] = []) {
        console.error(line, hint: hint, more: more)
    }

    /// Says what a command did: `message` on stderr, or with `--json` the
    /// document `value` on stdout, so that stdout holds one JSON document.
    func report(_ message: String, json value: some Encodable) throws {
        if json { try printJSON(value) } else { console.info(message) }
    }

    /// Prints a value as JSON on stdout, then a newline: the one printer
    /// every `--json` output goes through.
    func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        do {
            var data = try encoder.encode(value)
            data.append(0x0a)
            var bytes = [UInt8](data)
            Console.writeAll(&bytes, fd: 1)
            secureZero(&bytes)
        } catch {
            throw CLIError("cannot encode JSON output")
        }
    }
}

/// Text formatting shared by commands.
enum Format {
    /// `2026-12-02T14:05:00Z`.
    static func timestamp(_ date: Date) -> String { date.utcText }

    /// `in 59m`, `3h ago`, and `now` for a time less than half a second
    /// away on either side: times are kept in whole seconds, so a refresh
    /// a moment ago is stored up to a second before the clock reads it and
    /// must never read `in 0s`.
    static func relative(_ date: Date, now: Date) -> String {
        let delta = Int64(date.timeIntervalSince(now).rounded())
        if delta == 0 { return "now" }
        let magnitude = abs(delta)
        let (count, unit): (Int64, Character) =
            switch magnitude {
            case ..<60: (magnitude, "s")
            case ..<3600: (magnitude / 60, "m")
            case ..<86400: (magnitude / 3600, "h")
            default: (magnitude / 86400, "d")
            }
        // Appended rather than interpolated: a listing makes thousands.
        var text = delta > 0 ? "in " : ""
        text += String(count)
        text.append(unit)
        if delta < 0 { text += " ago" }
        return text
    }

    /// Left-aligned columns separated by two spaces, for a person to read; every cell is escaped
    /// (`Console.escaped`), so a cell can neither forge a row nor drive
    /// the terminal.
    static func table(_ raw: [[String]]) -> [String] {
        tableText(raw).split(separator: 0x0a, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// True when `text` is printable ASCII only: nothing to escape, and
    /// one column a byte. Read in place when the string is contiguous.
    static func isPrintableASCII(_ text: String) -> Bool {
        let plain = { (b: UInt8) in b >= 0x20 && b < 0x7f }
        return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(plain) } ?? text.utf8.allSatisfy(plain)
    }

    /// `table`'s lines, each ended by a newline, as the bytes to write:
    /// built in one buffer, since a long list has tens of thousands of
    /// cells. Printable ASCII cells (nearly all) are neither escaped nor
    /// broken into characters.
    static func tableText(_ raw: [[String]]) -> [UInt8] {
        guard let width = raw.first?.count else { return [] }
        // Each cell as shown and its width, then each part's lines, in
        // parts at once on a long table.
        let measured = inParts(raw.count, minimumPart: 2048) { range in
            var part = MeasuredRows(rows: range, widths: [Int](repeating: 0, count: width))
            part.cells.reserveCapacity(range.count * width)
            for row in raw[range] {
                for (i, cell) in row.enumerated() {
                    let plain = Format.isPrintableASCII(cell)
                    let shown = plain ? cell : Console.escaped(cell)
                    let count = plain || shown.utf8.allSatisfy({ $0 < 0x80 }) ? shown.utf8.count : shown.count
                    part.cells.append((shown, count))
                    part.widths[i] = max(part.widths[i], count)
                    part.bytes += shown.utf8.count
                }
            }
            return part
        }
        var widths = [Int](repeating: 0, count: width)
        for part in measured { for i in widths.indices { widths[i] = max(widths[i], part.widths[i]) } }
        let lines = inParts(measured.count, minimumPart: 1) { parts in
            parts.map { n in
                let part = measured[n]
                var out: [UInt8] = []
                out.reserveCapacity(part.bytes + part.rows.count * (widths.reduce(0, +) + 2 * width + 1))
                var cell = 0
                for row in raw[part.rows] {
                    for i in row.indices {
                        let (shown, count) = part.cells[cell]
                        cell += 1
                        out.append(contentsOf: shown.utf8)
                        if i < row.count - 1 {
                            out.append(contentsOf: repeatElement(0x20, count: widths[i] - count + 2))
                        }
                    }
                    out.append(0x0a)
                }
                return out
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(lines.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } })
        for chunks in lines { for chunk in chunks { out += chunk } }
        return out
    }
}

/// Rows of a table measured together (`Format.tableText`): each cell as
/// shown with its width in characters, the widest of each column, and
/// the bytes shown.
private struct MeasuredRows {
    let rows: Range<Int>
    var widths: [Int]
    var cells: [(shown: String, count: Int)] = []
    var bytes = 0
}
