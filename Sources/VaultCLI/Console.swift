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

    /// `text` made safe to show on a terminal: C0 and C1 controls, DEL and
    /// the bidirectional overrides and isolates are shown as `\u{...}`
    /// escapes, so text from a provider, a store or a file cannot move the
    /// cursor, rewrite a line, or reorder what the person reads.
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let v = scalar.value
            let control = v < 0x20 || (0x7f...0x9f).contains(v)
            let bidi =
                (0x202a...0x202e).contains(v) || (0x2066...0x2069).contains(v) || v == 0x200e || v == 0x200f
                || v == 0x061c
            if control || bidi {
                out += "\\u{" + String(v, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    func out(_ line: String) { Console.write(line + "\n", to: 1) }
    func info(_ line: String) { Console.write("vault: \(line)\n", to: 2) }
    func warn(_ line: String) { Console.write("vault: warning: \(line)\n", to: 2) }
    func error(_ line: String, hint: String? = nil) {
        var text = "vault: error: \(line)\n"
        if let hint { text += "vault: hint: \(hint)\n" }
        Console.write(text, to: 2)
    }
}
