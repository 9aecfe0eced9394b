internal import CPlatform
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// Where the key to a vault comes from, in the order of precedence of
/// docs/cli.md ("Unlocking"), after a running agent (which
/// `VaultOpener.openVault` asks first).
struct UnlockSources {
    let environment: [String: String]
    let keyfileFlag: String?
    /// False when the program that runs vault said it may not ask the
    /// person (kubectl's `interactive: false`): no terminal prompt then.
    var asksOnTerminal = true

    /// True for the commands that hand tokens to programs (`token`, `env`,
    /// `exec`, ...), which scripts and daemons run without a terminal, and
    /// `test`, run in the same places to see that a token works: a locked
    /// vault's hint then names the agent first.
    var handsOutTokens = false

    /// The commands `handsOutTokens` is set for.
    static let tokenCommands: Set<String> = [
        "token", "env", "exec", "header", "sign", "xoauth2", "git-credential", "kube-credential", "test",
    ]

    /// The hint for a locked vault when nothing may be asked on a terminal,
    /// for a command that hands out tokens.
    static let agentHint =
        "unlock it for a while with 'vault agent', or set VAULT_KEYFILE, VAULT_PASSPHRASE_COMMAND or VAULT_PASSPHRASE_FILE"

    /// The terminal to ask on, unless asking is off.
    private func terminal() -> Terminal? { asksOnTerminal ? Terminal() : nil }

    private func env(_ key: String) -> String? {
        environment[key].flatMap { $0.isEmpty ? nil : $0 }
    }

    var keyfilePath: String? { keyfileFlag ?? env("VAULT_KEYFILE") }

    /// True when a key can be had now: a key file, a passphrase source,
    /// or a terminal to ask.
    var available: Bool {
        keyfilePath != nil || env("VAULT_PASSPHRASE_COMMAND") != nil || env("VAULT_PASSPHRASE_FILE") != nil
            || env("VAULT_PASSPHRASE") != nil || terminal() != nil
    }

    /// The key for unlocking, and a label of its origin for messages.
    /// `secretServiceVault` names a vault and its Secret Service slots,
    /// whose keys are then looked up after a key file and before passphrases:
    /// each slot's own item first, then an item stored before slots had
    /// their own.
    /// `joining`: the vault is the store's, not yet on this machine.
    func key(secretServiceVault: (vaultID: [UInt8], slotIDs: [[UInt8]])? = nil, joining: Bool = false) throws
        -> (
            KeySource, origin: String, interactive: Bool
        )
    {
        if let path = keyfilePath {
            let origin = keyfileFlag != nil ? "--keyfile" : "VAULT_KEYFILE"
            let contents = try UnlockSources.readFile(path, origin: origin)
            do {
                return (.keyfile(try Keyfile.decode(contents)), "key file \(path)", false)
            } catch {
                // A file that is not a key file is the wrong key file: locked.
                throw CLIError(
                    "\(error.reason) (from \(origin))", hint: error.remedy.map(Remedies.hint), exitCode: .locked)
            }
        }
        if let target = secretServiceVault, SecretService.usable(environment: environment) {
            do {
                for slotID in target.slotIDs.map({ $0 as [UInt8]? }) + [nil] {
                    if let secret = try SecretService.lookup(vaultID: target.vaultID, slotID: slotID) {
                        return (.secretService(secret), "the Secret Service", false)
                    }
                }
            } catch {
                Console().warn("\(error.reason); trying the passphrase")
            }
        }
        if let (key, origin) = try nonInteractivePassphrase(prefix: "VAULT") {
            return (key, origin, false)
        }
        guard let terminal = terminal() else {
            if joining {
                throw CLIError(
                    "joining needs the passphrase of the store's vault, and there is no terminal to ask for it",
                    hint:
                        "set VAULT_PASSPHRASE_FILE, VAULT_PASSPHRASE_COMMAND or VAULT_KEYFILE (the other machine's), or join with --pairing-code-file and a code from 'vault pair' there",
                    exitCode: .locked)
            }
            guard asksOnTerminal else {
                throw CLIError(
                    "the vault is locked, and the program that runs vault does not let it ask for the passphrase",
                    hint: Self.agentHint, exitCode: .locked)
            }
            throw CLIError(
                "the vault is locked and there is no terminal to ask for the passphrase",
                hint: handsOutTokens
                    ? Self.agentHint : "set VAULT_KEYFILE, VAULT_PASSPHRASE_COMMAND or VAULT_PASSPHRASE_FILE",
                exitCode: .locked)
        }
        let raw = try terminal.readSecret(
            prompt: joining ? "Passphrase of the vault in the store: " : "Passphrase for the vault: ")
        return (try KeySource.passphrase(utf8: raw), "terminal", true)
    }

    /// The contents of a key or passphrase file named by `origin`. A file
    /// that cannot be read (missing, not a regular file, writable by
    /// others) is a file error, exit 1 as for every file given to vault
    /// (docs/cli.md, "Exit status"): 77 is for a key that does not open
    /// the vault, or no way to ask for one.
    static func readFile(_ path: String, origin: String) throws -> SecureBytes {
        do { return try SecretFile.read(path: path) } catch {
            throw CLIError(
                "\(error.reason) (from \(origin))", hint: error.remedy.map(Remedies.hint),
                exitCode: CLIError(error).exitCode)
        }
    }

    /// A passphrase from `<prefix>_PASSPHRASE_COMMAND`, `_FILE` or the
    /// variable itself, or nil when none is set.
    func nonInteractivePassphrase(prefix: String) throws -> (KeySource, String)? {
        if let command = env("\(prefix)_PASSPHRASE_COMMAND") {
            let variable = "\(prefix)_PASSPHRASE_COMMAND"
            var timeout = PassphraseCommand.defaultTimeout
            if let text = env(variable + "_TIMEOUT") {
                guard let t = Double(text), t.isFinite, t > 0, t <= 86400 else {
                    throw CLIError("\(variable)_TIMEOUT must be a number of seconds", exitCode: .usage)
                }
                timeout = t
            }
            let raw = try PassphraseCommand.run(command, variable: variable, timeout: timeout)
            return (try passphrase(raw, origin: "\(prefix)_PASSPHRASE_COMMAND"), "\(prefix)_PASSPHRASE_COMMAND")
        }
        if let path = env("\(prefix)_PASSPHRASE_FILE") {
            let raw = try UnlockSources.readFile(path, origin: "\(prefix)_PASSPHRASE_FILE")
            return (try passphrase(raw, origin: "\(prefix)_PASSPHRASE_FILE"), "\(prefix)_PASSPHRASE_FILE")
        }
        if let text = env("\(prefix)_PASSPHRASE") {
            // The environment reaches Swift with invalid UTF-8 repaired; check
            // the bytes themselves, so such a passphrase is not called wrong.
            if let raw = getenv("\(prefix)_PASSPHRASE"), String(validatingCString: raw) == nil {
                throw CLIError("the passphrase is not valid UTF-8 (from \(prefix)_PASSPHRASE)", exitCode: .locked)
            }
            return (
                try KeySource.passphrase(normalizing: text),
                "\(prefix)_PASSPHRASE"
            )
        }
        return nil
    }

    /// A new passphrase: from the non-interactive sources named by
    /// `prefix`, else asked twice on the terminal. `otherwise` ends the
    /// hint given without a terminal (another way to do without one).
    func newPassphrase(prefix: String, fileFlag: String?, otherwise: String? = nil) throws -> KeySource {
        if let path = fileFlag {
            let raw: SecureBytes
            do { raw = try SecretFile.read(path: path) } catch {
                throw CLIError("\(error.reason) (from --new-passphrase-file)", hint: error.remedy.map(Remedies.hint))
            }
            return try passphrase(raw, origin: "--new-passphrase-file")
        }
        if let (key, _) = try nonInteractivePassphrase(prefix: prefix) { return key }
        guard let terminal = Terminal() else {
            throw CLIError(
                "no terminal to ask for the new passphrase",
                hint: "set \(prefix)_PASSPHRASE_FILE or \(prefix)_PASSPHRASE_COMMAND"
                    + (otherwise.map { ", \($0)" } ?? ""),
                exitCode: .locked)
        }
        let first = try terminal.readSecret(prompt: "New passphrase: ")
        let second = try terminal.readSecret(prompt: "Repeat the new passphrase: ")
        guard first.constantTimeEquals(second) else { throw CLIError("the passphrases do not match") }
        return try passphrase(first, origin: "terminal")
    }

    private func passphrase(_ raw: SecureBytes, origin: String) throws -> KeySource {
        do {
            return try KeySource.passphrase(utf8: SecretFile.trimmingNewline(raw))
        } catch {
            throw CLIError("\(error.reason) (from \(origin))", exitCode: .locked)
        }
    }
}

/// Runs `VAULT_PASSPHRASE_COMMAND` with `/bin/sh -c`, like restic and borg:
/// its stdout is the passphrase; stdin and stderr stay the terminal's so a
/// pinentry or `pass` can interact. It has `defaultTimeout` seconds (or
/// `VAULT_PASSPHRASE_COMMAND_TIMEOUT`) to exit, and its output is what it
/// printed until it exited: a child it leaves behind is not waited for.
enum PassphraseCommand {
    static let limit = 4096

    static func run(_ command: String, variable: String, timeout: Double = defaultTimeout) throws
        -> SecureBytes
    {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw CLIError("cannot create a pipe: \(errnoText())") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        // The command gets stdin, the pipe as stdout, stderr, and nothing else.
        vault_spawn_close_from(&actions, 3)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sh"), strdup("-c"), strdup(command), nil]
        defer { for p in argv { free(p) } }
        let rc = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw CLIError("cannot run \(variable): \(String(cString: strerror(rc)))", exitCode: .locked)
        }
        let output: SecureBuffer
        do { output = try Secure.buffer(count: limit + 1) } catch {
            close(fds[0])
            kill(pid, SIGKILL)
            while waitpid(pid, nil, 0) < 0 && errno == EINTR {}
            throw error
        }
        // Reading stops when the command exits, even if a child it left in
        // the background still holds the pipe open, and after `timeout`.
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        let deadline = MonotonicClock.now() + timeout
        var total = 0
        var status: Int32 = 0
        var finished = false
        var endOfFile = false
        while !finished {
            if !endOfFile {
                var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 50)
                endOfFile = drain(fds[0], into: output, total: &total)
            } else {
                usleep(20_000)
            }
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || (r < 0 && errno != EINTR) { finished = true }
            if !finished && MonotonicClock.now() > deadline {
                close(fds[0])
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                throw CLIError(
                    "\(variable) did not finish within \(Int(timeout)) seconds",
                    hint: "set \(variable)_TIMEOUT to allow it longer", exitCode: .locked)
            }
        }
        // What it wrote before exiting is still in the pipe.
        _ = drain(fds[0], into: output, total: &total)
        close(fds[0])
        let exited = (status & 0x7f) == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            throw CLIError(
                "\(variable) failed (\(exited ? "exit status \(code)" : "killed by signal \(status & 0x7f)"))",
                exitCode: .locked)
        }
        guard total <= limit else { throw CLIError("\(variable) printed more than \(limit) bytes", exitCode: .locked) }
        return try Secure.prefix(output, total)
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    /// Reads what the pipe holds now into `output` (at most `limit` + 1
    /// bytes in all); true at end of file.
    private static func drain(_ fd: Int32, into output: SecureBuffer, total: inout Int) -> Bool {
        while total <= limit {
            let start = total
            let n = output.withUnsafeMutableBytes { read(fd, $0.baseAddress! + start, limit + 1 - start) }
            if n < 0 && errno == EINTR { continue }
            if n == 0 { return true }
            if n < 0 { return false }
            total += n
        }
        return true
    }

    /// Seconds allowed by default: long enough for a person at a pinentry.
    static let defaultTimeout = 120.0
}

/// A monotonic clock in seconds.
enum MonotonicClock {
    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
