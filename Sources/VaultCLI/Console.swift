internal import Glibc
internal import VaultCore

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

    /// Text from outside made safe for a terminal (`DisplayText.escaped`):
    /// every human-readable output goes through this; machine outputs are
    /// checked against their own grammar instead.
    static func escaped(_ text: String) -> String { DisplayText.escaped(text) }

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
