internal import CPlatform
internal import Glibc
internal import VaultCore
internal import VaultCrypto

/// The controlling terminal, opened directly (`/dev/tty`) so prompts work
/// even when stdin and stdout are pipes, and fail fast when there is none.
final class Terminal {
    private let fd: Int32
    static let maximumLength = 1024

    /// Opens the controlling terminal, or returns nil when there is none.
    init?() {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Prompts and reads one line with echo off, straight into secure
    /// memory. Ctrl-C and other terminating signals restore the terminal.
    func readSecret(prompt: String) throws -> SecureBytes {
        Console.write(prompt, to: fd)
        guard vault_tty_echo_off(fd) == 0 else {
            throw CLIError("cannot turn off terminal echo", exitCode: .locked)
        }
        defer {
            vault_tty_restore()
            Console.write("\n", to: fd)
        }
        let buffer = try Secure.buffer(count: Terminal.maximumLength)
        var length = 0
        var sawNewline = false
        while length < Terminal.maximumLength {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + length, 1) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            if buffer.withUnsafeBytes({ $0[length] }) == 0x0a {
                sawNewline = true
                break
            }
            length += 1
        }
        guard sawNewline || length < Terminal.maximumLength else {
            throw CLIError("the passphrase is longer than \(Terminal.maximumLength) bytes")
        }
        return try Secure.prefix(buffer, length)
    }
}

/// Standard input, read whole into secure memory: it may carry tokens.
enum StandardInput {
    /// Reads all of stdin (at most `limit` bytes) into secure memory.
    static func read(limit: Int) throws -> SecureBytes {
        let buffer = try Secure.buffer(count: limit + 1)
        var total = 0
        while total <= limit {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw CLIError("cannot read standard input: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw CLIError("standard input is larger than \(limit) bytes") }
        return try Secure.prefix(buffer, total)
    }
}
