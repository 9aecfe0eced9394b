internal import FoundationEssentials
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

    /// `in 59m`, `3h ago`.
    static func relative(_ date: Date, now: Date) -> String {
        let delta = Int64(date.timeIntervalSince(now).rounded())
        let magnitude = abs(delta)
        let text: String
        switch magnitude {
        case ..<60: text = "\(magnitude)s"
        case ..<3600: text = "\(magnitude / 60)m"
        case ..<86400: text = "\(magnitude / 3600)h"
        default: text = "\(magnitude / 86400)d"
        }
        return delta >= 0 ? "in \(text)" : "\(text) ago"
    }

    /// Left-aligned columns separated by two spaces, for a person to read; every cell is escaped
    /// (`Console.escaped`), so a cell can neither forge a row nor drive
    /// the terminal.
    static func table(_ raw: [[String]]) -> [String] {
        let rows = raw.map { $0.map(Console.escaped) }
        guard let width = rows.first?.count else { return [] }
        // Characters, not bytes, line columns up; ASCII cells (most) are
        // counted by their bytes, without breaking them into graphemes.
        let counts = rows.map { row in row.map { $0.utf8.allSatisfy { $0 < 0x80 } ? $0.utf8.count : $0.count } }
        var widths = [Int](repeating: 0, count: width)
        for row in counts { for (i, n) in row.enumerated() { widths[i] = max(widths[i], n) } }
        let lineWidth = widths.reduce(0, +) + 2 * width
        return zip(rows, counts).map { row, count in
            var line = ""
            line.reserveCapacity(lineWidth)
            for (i, cell) in row.enumerated() {
                line += cell
                if i < row.count - 1 {
                    for _ in 0..<(widths[i] - count[i] + 2) { line.append(" ") }
                }
            }
            return line
        }
    }
}
