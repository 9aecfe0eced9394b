internal import Glibc

/// Standard streams: data to stdout, messages to stderr as
/// `vault: error: ...` and `vault: hint: ...`.
struct Console {
    /// Writes all of `text` to a file descriptor, retrying short writes.
    static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        writeAll(&bytes, fd: fd)
    }

    static func writeAll(_ bytes: inout [UInt8], fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Text from outside (providers, stores, imports, other users) made
    /// safe for a terminal: C0 and C1 controls, DEL and the bidirectional
    /// overrides and isolates are shown as `\u{...}`, so they can neither
    /// drive the terminal, forge a line, nor reorder what a person reads.
    /// Every human-readable output goes through this; machine outputs are
    /// checked against their own grammar instead.
    static func escaped(_ text: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1f, 0x7f...0x9f: return true  // C0, DEL, C1
        case 0x202a...0x202e, 0x2066...0x2069: return true  // embeddings, overrides, isolates
        case 0x200e, 0x200f, 0x061c: return true  // directional marks
        case 0x2028, 0x2029: return true  // line and paragraph separators
        default: return false
        }
    }

    func out(_ line: String) { Console.write(line + "\n", to: 1) }
    func info(_ line: String) { Console.write("vault: \(Console.escaped(line))\n", to: 2) }
    /// A question on stderr, answered on the same line: `vault: ...` without a newline.
    func prompt(_ text: String) { Console.write("vault: \(Console.escaped(text))", to: 2) }
    func warn(_ line: String) { Console.write("vault: warning: \(Console.escaped(line))\n", to: 2) }
    func error(_ line: String, hint: String? = nil, more: [String] = []) {
        var text = "vault: error: \(Console.escaped(line))\n"
        for hint in (hint.map { [$0] } ?? []) + more { text += "vault: hint: \(Console.escaped(hint))\n" }
        Console.write(text, to: 2)
    }
}
